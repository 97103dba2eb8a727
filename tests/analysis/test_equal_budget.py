"""Equal budget: `analysis.equal_budget` truncates logged runs at each spend and gives what re-running them under
that budget gives (exact by truncation), marks the points past a budget-stopped run inexact, and
`compare_at_budget` pairs configurations over task x sample with Holm's correction; the frames carry the spend
and incumbent columns; the report draws budget_curve.png and says which loop leads at which budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import wording
from wording import BEST, START, TASK

import promptlab as pl
from promptlab import analysis
from promptlab.eval.stats import bootstrap_ci
from promptlab.loops.registry import run_loop
from promptlab.record import Run
from promptlab.results.frames import tidy
from promptlab.results.store import write_cell

PARAPHRASES = ["Reply to the item.", "Be careful.", "Be careful with the label.", "Say no.", BEST, "Label it."]


def resample(name: str, budget: int | None = None, sample: int = 0, texts: list[str] = PARAPHRASES) -> Run:
    w, target = wording.models(name, wording.cycling("prompt", texts))
    return run_loop(
        "resample",
        TASK,
        {"model": w.name, "target_model": target.name, "max_iterations": len(texts), "budget_calls": budget},
        sample=sample,
        cache=False,
    )


def opro(name: str, budget: int | None = None) -> Run:
    w, target = wording.models(name, wording.opro_optimizer)
    return run_loop(
        "opro",
        TASK,
        {
            "model": w.name,
            "target_model": target.name,
            "candidates_per_step": 2,
            "max_iterations": 4,
            "budget_calls": budget,
        },
        cache=False,
    )


@pytest.mark.parametrize("make", [resample, opro])
@pytest.mark.parametrize("budget", [20, 40, 62, 83, 100, 130])
def test_truncating_a_long_run_gives_what_the_budgeted_run_returns(make: Any, budget: int) -> None:
    long = make(f"long-{make.__name__}-{budget}")
    short = make(f"short-{make.__name__}-{budget}", budget)
    row = analysis.equal_budget([long], "calls", points=[budget], per_run=True).iloc[0]
    assert row["exact"]
    assert row["returned_iteration"] == short.info["final_iteration"]
    returned = long.iterations[int(row["returned_iteration"])]
    assert returned.candidate == short.final_output
    assert row["dev"] == returned.grounded.score and row["test"] == short.final_test.score
    assert row["spend"] <= budget and short.spent.calls <= budget


def test_points_past_a_budget_stopped_run_are_inexact_and_below_its_start_return_the_start() -> None:
    run = resample("stopped", budget=62)
    assert run.stop_reason == "budget" and run.spent.calls == 62
    rows = analysis.equal_budget([run], "calls", points=[10, 62, 63, 500], per_run=True)
    assert rows["exact"].tolist() == [True, True, False, False]
    assert rows["returned_iteration"].tolist() == [0, 2, 2, 2]  # "Be careful." (iteration 2) is its best
    start = rows.iloc[0]
    assert start["spend"] == 0 and start["test"] == run.baseline_test.score
    assert start["dev"] == run.iterations[0].grounded.score
    # a run that ended by its own rule answers every larger budget exactly
    done = resample("done")
    assert done.stop_reason == "max_iterations"
    far = analysis.equal_budget([done], "calls", points=[10_000], per_run=True).iloc[0]
    assert far["exact"] and far["returned_iteration"] == done.info["final_iteration"] == 5
    assert far["test"] == done.final_test.score == 1.0


def test_tokens_points_and_the_summary_over_runs() -> None:
    runs = [resample(f"tok-{s}", sample=s) for s in range(3)]
    table = analysis.equal_budget(runs, "tokens")
    assert len(table) == 10 and table["point"].is_monotonic_increasing
    top = max(r.spent.tokens for r in runs)
    assert table["point"].iloc[-1] == top
    row = table.iloc[-1]
    tests = [r.final_test.score for r in runs]
    assert (row["n_runs"], row["n_exact"], row["test_n"]) == (3, 3, 3)
    assert row["test_mean"] == pytest.approx(sum(tests) / 3)
    assert (row["test_ci_low"], row["test_ci_high"]) == pytest.approx(bootstrap_ci(tests))
    with pytest.raises(ValueError, match="budget must be 'tokens' or 'calls'"):
        analysis.equal_budget(runs, "dollars")  # type: ignore[arg-type]


def test_compare_at_budget_pairs_loops_over_task_and_sample_with_holm() -> None:
    blind = [resample(f"cmp-r{s}", sample=s, texts=["Say no.", "Reply now."]) for s in range(4)]
    found = [resample(f"cmp-f{s}", sample=s, texts=[BEST]) for s in range(4)]
    for r in blind:  # the same loop twice: tell the two configurations apart by a column
        r.loop = "resample"
    frames = [tidy(blind, {"arm": "blind"}, "c1"), tidy(found, {"arm": "found"}, "c2")]
    traj = pd.concat([t for t, _ in frames], ignore_index=True)
    runs = pd.concat([r for _, r in frames], ignore_index=True)
    table = analysis.compare_at_budget(traj, 200, "calls", by="arm", runs=runs)
    assert len(table) == 1
    row = table.iloc[0]
    gain = (
        wording.accuracy(
            BEST,
            [
                int(TASK.examples[i].input.split()[1])
                for i in pl.eval.tasks.split_examples(TASK)[1]  # type: ignore[union-attr]
            ],
        )
        - blind[0].final_test.score
    )
    assert row["label"] == "arm=found - arm=blind" and row["n"] == 4
    assert row["estimate"] == pytest.approx(gain) and row["p_holm"] == pytest.approx(row["p_value"])


def test_the_frames_record_spend_and_incumbents_and_the_report_draws_the_budget_curve(tmp_path: Path) -> None:
    out = tmp_path / "results"
    for arm, texts in (("search", PARAPHRASES), ("stay", [START, "Say no."])):
        runs = [resample("rep", budget=100, sample=s, texts=texts) for s in range(2)]  # one model name per run
        write_cell(out, arm, {"arm": arm}, runs)
    res = pl.load(out)
    traj, frame = res.trajectories, res.runs
    first = traj[(traj["iteration"] == 0)].iloc[0]
    assert first["cum_calls"] == 20 and first["incumbent"] == 0 and first["test_n"] == 20
    assert frame["cum_calls"].max() <= 100 and frame["target_model"].notna().all()
    report = pl.report(out)
    assert "budget_curve.png" in report and (out / "report" / "budget_curve.png").stat().st_size > 10_000
    text = (out / "report" / "summary.md").read_text()
    section = text.split("### 4. Which loop leads at equal budget?", 1)[1]
    # the last point is the largest spend (83 calls: a 21-call step more would pass 100); there the search arm
    # holds "Be careful with the label." (0.75 on test), the other the start (0.35)
    last = [line for line in section.splitlines() if line.startswith("| 83 |")][0]
    assert "Budget in calls" in section
    assert last.startswith(
        "| 83 | arm=search: 0.750 [0.750, 0.750], n=2 | over arm=stay: +0.400 [+0.400, +0.400] "
        "(2 pairs, p 0.5) | **Inconclusive after Holm's correction** |"
    ), last  # 2 pairs prove no lead


def test_configurations_that_share_the_top_mean_are_a_tie_not_a_lead(tmp_path: Path) -> None:
    out = tmp_path / "results"
    for arm in ("a", "b"):  # the same runs twice: no configuration leads
        write_cell(out, arm, {"arm": arm}, [resample("tie", budget=60, sample=s, texts=["Say no."]) for s in range(2)])
    found = pl.reports.findings(pl.load(out)).budget
    assert found is not None and all(r["tied"] == ["arm=a", "arm=b"] for r in found.leaders)
    text = "\n".join(pl.reports.findings_markdown(pl.reports.findings(pl.load(out))))
    assert (
        "| tie at 0.350: arm=a, arm=b | (no lead: 2 configurations share the top mean) | **No leader: a tie** |" in text
    )
