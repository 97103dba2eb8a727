"""The findings charts, the findings of a results directory, and the report's findings section."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # this process only

import pandas as pd
import pytest
from factories import write_sweep
from grounded import DECISIONS, write_grounded_sweep
from matplotlib.figure import Figure

from promptlab import analysis
from promptlab.reports.charts import (
    plot_calibration,
    plot_counterfactual_heatmap,
    plot_forest,
    plot_grounded_trajectories,
)
from promptlab.reports.findings import findings, findings_markdown
from promptlab.reports.summary import report
from promptlab.results.store import Results, load

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def res(tmp_path: Path) -> Results:
    return load(write_grounded_sweep(tmp_path / "results"))


def axes():  # type: ignore[no-untyped-def]
    return Figure().add_subplot()


def test_calibration_scatter_shows_r_with_ci_and_n(res: Results) -> None:
    ax = plot_calibration(res.trajectories, ax=axes())
    cal = analysis.calibration(res.trajectories)
    r = cal[(cal["critic_model"] == "fake/critic") & (cal["criterion"] == analysis.ALL)].iloc[0]
    label = ax.get_legend().get_texts()[0].get_text()
    assert f"r={r['spearman']:.2f} [{r['spearman_ci_low']:.2f}, {r['spearman_ci_high']:.2f}]" in label
    assert f"n={r['n']}" in label and len(ax.collections[0].get_offsets()) == r["n"]
    with pytest.raises(ValueError, match="both"):
        plot_calibration(res.trajectories.assign(grounded_score=pd.NA), ax=axes())


def test_grounded_trajectories_plot_the_dev_score(res: Results) -> None:
    ax = plot_grounded_trajectories(res.trajectories, by="loop", ax=axes())
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [1, 2, 3]
    # iteration 1 of all 12 runs: mean of the tasks' first grounded scores
    assert line.get_ydata()[0] == pytest.approx((0.2 + 0.3 + 0.1) / 3)
    assert "Grounded score by iteration" in ax.get_title() and len(ax.collections) == 1  # the band


def test_counterfactual_heatmap_annotates_value_cost_and_exactness() -> None:
    table = pd.DataFrame({"threshold": [8.0, 8.0, 10.0, 10.0], "cap": [1, 2, 1, 2], "n_runs": [4] * 4,
                          "n_exact": [4, 4, 4, 3], "grounded_mean": [0.1, 0.2, 0.3, 0.4],
                          "cost_usd_mean": [0.01, 0.02, 0.01, 0.025], "tokens_mean": [10.0] * 4,
                          "stopped_early": [0.0, 0.5, 0.0, 0.0]})
    ax = plot_counterfactual_heatmap(table, ax=axes())
    texts = [t.get_text() for t in ax.texts]
    assert texts[3].startswith("0.40*") and "$0.025" in texts[3] and texts[1].startswith("0.20\n")
    assert ax.get_images()[0].get_array()[1, 0] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="filter"):
        plot_counterfactual_heatmap(pd.concat([table, table]), ax=axes())


def test_forest_plot_draws_each_estimate_with_its_interval() -> None:
    table = pd.DataFrame({"label": ["a", "b"], "n": [6, 5], "estimate": [0.1, -0.05], "ci_low": [0.02, -0.2],
                          "ci_high": [0.2, 0.1], "p_holm": [0.03, 0.5]})
    ax = plot_forest(table, ax=axes())
    labels = dict(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()], strict=True))
    assert labels == {1: "a (n=6, p(Holm)=0.03)", 0: "b (n=5, p(Holm)=0.5)"}  # first row on top
    xs = ax.get_lines()[0].get_xdata()
    assert list(xs) == pytest.approx([0.1, -0.05])
    segments = ax.collections[0].get_segments()  # the error bars, in row order
    assert [tuple(s[:, 0]) for s in segments] == [pytest.approx((0.02, 0.2)), pytest.approx((-0.2, 0.1))]


def test_findings_of_a_grounded_directory(res: Results) -> None:
    f = findings(res)
    assert f.grounded and not f.warnings
    assert list(f.deltas["n"]) == [6, 6]  # two configurations x (3 tasks x 2 samples)
    # counterfactual: one configuration (the loop; threshold and cap are what it replaces), each task x
    # sample counted once from the longest (threshold 10) log, so every rule is exact
    cf = f.counterfactual
    assert set(cf["config"]) == {"loop=p3ro"} and (cf["n_runs"] == 6).all() and (cf["n_exact"] == 6).all()
    at_cap3 = cf[(cf["threshold"] == 10.0) & (cf["cap"] == 3)].iloc[0]
    assert at_cap3["grounded_mean"] == pytest.approx((0.7 + 0.6 + 0.3) / 3)  # best by decision score
    assert f.best_rules["loop=p3ro"]["best"]["grounded_mean"] == pytest.approx(at_cap3["grounded_mean"])
    md = "\n".join(findings_markdown(f))
    assert "delta +" in md and "n=6 runs" in md
    # the sweep's critic ranks the 34 logged iterations exactly as their grounded scores do
    assert "fake/critic: r=+1.000 [+1.000, +1.000]" in md and "n=34 iterations" in md
    # threshold 8 and 10 at cap 3 both return 0.533; 8 stops t2 at iteration 2, so it is cheaper
    assert "best threshold 8, cap 3: grounded 0.533 [0.400, 0.667], n=6" in md and "grounded score per $" in md


def test_report_writes_the_findings(res: Results, tmp_path: Path) -> None:
    written = report(res, tmp_path / "out")
    for name in ("calibration.png", "grounded_trajectories.png", "counterfactual.png", "deltas.png"):
        assert written[name].read_bytes().startswith(PNG), name
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "## Findings" in md and "Does refinement beat the original prompt?" in md and "mixes" not in md
    stopping = md.split("### Which stopping rule?", 1)[1].split("##", 1)[0]
    assert "DEV-split score" in stopping and "best threshold" in stopping  # not the test split of the deltas
    assert "## Per configuration" in md and "trajectories.png" in md  # the existing report is still there


def test_report_warns_when_provenance_is_mixed(tmp_path: Path) -> None:
    mixed = load(write_grounded_sweep(tmp_path / "r", mixed_prompts=True))
    report(mixed, tmp_path / "out")
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "mixes provenance" in md and "different role prompts for loop p3ro" in md and "cells t10, t8" in md


def test_report_without_grounded_data_says_so(tmp_path: Path) -> None:
    written = report(write_sweep(tmp_path / "results"))
    md = (tmp_path / "results" / "report" / "summary.md").read_text()
    assert "No grounded data" in md
    for name in ("calibration.png", "grounded_trajectories.png", "counterfactual.png", "deltas.png"):
        assert name not in written and "no grounded data" in written.skipped[name]
    assert "trajectories.png" in written and len(load(tmp_path / "results").runs) == 8
    assert set(DECISIONS) == {"t1", "t2", "t3"}
