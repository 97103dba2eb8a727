"""The per-example frame reads each measurement's example replies back from the run records: per run and
measurement, its scores are the record's own per-example scores (`GroundedScore.scores`), in split order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from exported import TARGET, register_target, write_experiment

from promptlab.eval.tasks import examples_of
from promptlab.results import EXAMPLE_COLUMNS, example_frame, load, read_runs
from promptlab.sweeps.run import sweep


def test_each_measurement_s_rows_are_its_per_example_scores_in_split_order(tmp_path: Path) -> None:
    register_target()
    out = tmp_path / "results"
    sweep(write_experiment(tmp_path, target=TARGET, replicates=1), out, progress=False)
    frame = example_frame(out)
    assert list(frame.columns) == list(EXAMPLE_COLUMNS)
    assert {str(frame[c].dtype) for c in ("score", "example", "output")} == {"Float64", "Int64", "string"}
    assert frame["score"].notna().all() and set(frame["score"]) == {0.0, 1.0}  # some right, some wrong
    runs = load(out).runs
    assert set(frame["run_id"]) == set(runs["run_id"])
    for cell_id in runs["cell_id"].unique():
        for run in read_runs(out, cell_id):
            rows = frame[frame["run_id"] == run.run_id]

            def scores(measure: str, candidate: int, r: pd.DataFrame = rows) -> list[float]:
                part = r[(r["measure"] == measure) & (r["candidate"] == candidate)].sort_values("example")
                return [float(s) for s in part["score"]]

            for it in run.iterations:
                assert it.grounded is not None
                assert scores("dev", it.index) == it.grounded.scores
            assert run.baseline_test is not None and run.final_test is not None
            assert scores("baseline_test", 0) == run.baseline_test.scores
            assert scores("final_test", run.info["final_iteration"]) == run.final_test.scores
            test = examples_of(run.task, "test")
            final = rows[rows["measure"] == "final_test"].sort_values("example")
            assert list(final["target"]) == [e.target for e in test]
            assert list(final["example_id"].fillna("")) == [e.id or "" for e in test]


def test_a_results_dir_without_grounded_runs_gives_the_empty_frame_with_its_columns(tmp_path: Path) -> None:
    from grounded import write_grounded_sweep  # hand-built runs: grounded scores but no example steps

    frame = example_frame(write_grounded_sweep(tmp_path / "r"))
    assert len(frame) == 0 and list(frame.columns) == list(EXAMPLE_COLUMNS)
    assert str(frame["score"].dtype) == "Float64"
