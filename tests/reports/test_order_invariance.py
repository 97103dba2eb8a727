"""The findings are a function of the runs alone: the report (summary.md, summary.csv) and every frame's statistics
are the same when the frames' rows are shuffled, when the runs sit on disk in another order, and when the runs carry
other run ids (as the same runs executed on another machine do)."""

from __future__ import annotations

import uuid
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # this process only

import pandas as pd
from biased import write_biased_sweep

from promptlab.analysis.bias import bias_table, logged_frame
from promptlab.analysis.bias_asks import candidate_lengths, logged_runs
from promptlab.analysis.budget import equal_budget
from promptlab.analysis.critic import calibration
from promptlab.analysis.paired import compare, delta_table
from promptlab.analysis.stopping import counterfactual_stopping
from promptlab.reports.summary import report, summary_table
from promptlab.results.order import canonical_rows, canonical_runs
from promptlab.results.store import Results, load, read_runs, write_cell

BUDGET = 10
"""Re-asks of the model critic: fewer than its candidates, so which ones are drawn is a finding too."""


def shuffled(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    return frame.sample(frac=1, random_state=seed)


def shuffled_results(res: Results, seed: int) -> Results:
    return Results(
        trajectories=shuffled(res.trajectories, seed),
        runs=shuffled(res.runs, seed + 1),
        cells=shuffled(res.cells, seed + 2),
        path=res.path,
    )


def rewrite_cells(results_dir: Path, *, seed: int) -> None:
    """Each cell's runs written again in another order, under fresh run ids."""
    res = load(results_dir)
    for cell_id, params in zip(res.cells["cell_id"], res.cells["critic_model"], strict=True):
        runs = read_runs(results_dir, cell_id)
        order = pd.Series(range(len(runs))).sample(frac=1, random_state=seed).tolist()
        runs = [runs[i].model_copy(update={"run_id": uuid.uuid4().hex}) for i in order]
        write_cell(results_dir, cell_id, {"loop": "creator_critic", "critic_model": params}, runs)


def written(out: dict[str, Path]) -> tuple[str, str]:
    return out["summary.md"].read_text(), out["summary.csv"].read_text()


def test_the_report_is_the_same_for_the_same_runs_in_any_order_and_under_any_run_ids(tmp_path: Path) -> None:
    results_dir, _ = write_biased_sweep(tmp_path / "results", samples=2)
    md, csv = written(report(results_dir, tmp_path / "first", bias_budget=BUDGET))
    assert "[" in md and "Can the critic be trusted?" in md and "When to stop?" in md  # intervals to compare
    again = report(shuffled_results(load(results_dir), 1), tmp_path / "shuffled", bias_budget=BUDGET)
    assert written(again) == (md, csv)
    rewrite_cells(results_dir, seed=2)  # as the same runs finished in another order on another machine
    assert written(report(results_dir, tmp_path / "elsewhere", bias_budget=BUDGET)) == (md, csv)


def test_every_frames_statistics_are_the_same_for_its_rows_in_any_order(tmp_path: Path) -> None:
    results_dir, _ = write_biased_sweep(tmp_path / "results", samples=2)
    res = load(results_dir)
    lengths = candidate_lengths(logged_runs(res))

    def statistics(r: Results) -> dict[str, pd.DataFrame]:
        runs, traj = r.runs, r.trajectories
        logged = logged_frame(traj, lengths)
        return {
            "summary": summary_table(runs, by="critic_model"),
            "deltas": delta_table(runs, by="critic_model"),
            "compare": compare(runs, by="critic_model"),
            "calibration": calibration(traj),
            "stopping": counterfactual_stopping(traj, [3.0, 6.0, 10.0], [0, 1, 2, 3], by="critic_model", runs=runs),
            "budget": equal_budget(traj, by="critic_model", runs=runs),
            "logged": logged,
            "biases": bias_table({"length": logged, "inflation": logged}),
        }

    expected = statistics(res)
    assert expected["stopping"]["grounded_ci_low"].notna().any() and len(expected["compare"]) == 3
    for seed in (5, 6, 7):
        for name, frame in statistics(shuffled_results(res, seed)).items():
            pd.testing.assert_frame_equal(frame, expected[name], check_exact=True, obj=name)


def test_canonical_order_ignores_run_ids_and_finishing_order(tmp_path: Path) -> None:
    results_dir, _ = write_biased_sweep(tmp_path / "results", samples=2)
    res = load(results_dir)
    ordered = canonical_rows(res.runs)
    assert list(zip(ordered["cell_id"], ordered["task_id"], ordered["sample"], strict=True)) == sorted(
        zip(res.runs["cell_id"], res.runs["task_id"], res.runs["sample"], strict=True)
    )
    renamed = res.runs.assign(run_id=[uuid.uuid4().hex for _ in range(len(res.runs))])
    pd.testing.assert_frame_equal(
        canonical_rows(shuffled(renamed, 1)).drop(columns="run_id"), ordered.drop(columns="run_id")
    )
    runs = read_runs(results_dir, "model")
    again = [r.model_copy(update={"run_id": uuid.uuid4().hex}) for r in runs[::-1]]
    assert [r.comparable() for r in canonical_runs(again)] == [r.comparable() for r in canonical_runs(runs)]
