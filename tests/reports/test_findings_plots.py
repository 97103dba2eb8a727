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
    plot_counterfactual_grid,
    plot_counterfactual_heatmap,
    plot_forest,
    plot_grounded_trajectories,
)
from promptlab.reports.findings import (
    INCONCLUSIVE,
    NO_VARIATION,
    NOT_AFTER_HOLM,
    findings,
    findings_markdown,
    verdict,
)
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
    label = ax.get_legend().get_texts()[0].get_text().replace("\n", " ")
    assert f"r={r['spearman']:.2f} [{r['spearman_ci_low']:.2f}, {r['spearman_ci_high']:.2f}]" in label
    # identical candidates (two samples of each task) are one point, larger by how many share it
    counts = (ax.collections[0].get_sizes() - 18) / 14
    assert f"n={r['n']}" in label and counts.sum() == r["n"] and len(counts) < r["n"]
    # the legend says what a marker's size means, and the accuracy axis holds only possible values
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "marker size: 1 candidate(s) at one point" in texts
    assert f"marker size: {int(counts.max())} candidate(s) at one point" in texts
    assert ax.get_ylim() == (0.0, 1.0)
    empty = plot_calibration(res.trajectories.assign(grounded_score=pd.NA), ax=axes())
    assert "Nothing to show: no candidate has both a critic score and a grounded" in empty.texts[0].get_text().replace(
        "\n", " "
    )


def test_calibration_scatter_puts_the_finding_in_place_of_r(res: Results) -> None:
    flat = res.trajectories.assign(score=1.0)  # a critic that gave every candidate 1
    label = plot_calibration(flat, ax=axes()).get_legend().get_texts()[0].get_text().replace("\n", " ")
    assert "fake/critic: no r: gave every candidate 1 (n=34): it carries no information about accuracy" in label


def test_grounded_trajectories_plot_the_dev_score(res: Results) -> None:
    ax = plot_grounded_trajectories(res.trajectories, by="loop", ax=axes())
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [1, 2, 3]
    # iteration 1 of all 12 runs: mean of the tasks' first grounded scores
    assert line.get_ydata()[0] == pytest.approx((0.2 + 0.3 + 0.1) / 3)
    assert ax.get_title().startswith("Mean dev accuracy by iteration") and len(ax.collections) == 1  # the band
    assert (
        "Nothing to show"
        in plot_grounded_trajectories(res.trajectories.assign(grounded_score=pd.NA), ax=axes()).texts[0].get_text()
    )


def test_counterfactual_heatmap_has_one_number_per_cell_and_hatches_what_is_not_exact() -> None:
    table = pd.DataFrame(
        {
            "threshold": [8.0, 8.0, 10.0, 10.0],
            "cap": [1, 2, 1, 2],
            "n_runs": [4] * 4,
            "n_exact": [4, 4, 4, 3],
            "grounded_mean": [0.1, 0.2, 0.3, 0.4],
            "cost_usd_mean": [0.01, 0.02, 0.01, 0.025],
            "tokens_mean": [10.0] * 4,
            "stopped_early": [0.0, 0.5, 0.0, 0.0],
        }
    )
    ax = plot_counterfactual_heatmap(table, ax=axes())
    assert [t.get_text() for t in ax.texts] == ["0.10", "0.20", "0.30", "0.40"]
    assert [p.get_hatch() for p in ax.patches] == ["//"] and "hatched: not exact" in ax.get_title()
    assert ax.get_images()[0].get_array()[1, 0] == pytest.approx(0.3)
    cost = plot_counterfactual_heatmap(table, "cost_usd_mean", ax=axes())
    assert [t.get_text() for t in cost.texts] == ["$0.01", "$0.02", "$0.01", "$0.025"]
    shared = plot_counterfactual_heatmap(table, ax=axes(), vmin=0.0, vmax=1.0)
    assert shared.get_images()[0].norm.vmax == 1.0
    with pytest.raises(ValueError, match="filter"):
        plot_counterfactual_heatmap(pd.concat([table, table]), ax=axes())


def test_counterfactual_grid_shares_one_scale_per_kind() -> None:
    rows = []
    for config, base in (("a", 0.135), ("b", 0.5)):
        for cap in (0, 1, 2):
            rows.append(
                {
                    "config": config,
                    "threshold": 10.0,
                    "cap": cap,
                    "n_runs": 3,
                    "n_exact": 3,
                    "grounded_mean": base + 0.01 * cap,
                    "cost_usd_mean": None,
                    "tokens_mean": 100.0 * cap,
                    "stopped_early": 0.0,
                }
            )
    fig = plot_counterfactual_grid(pd.DataFrame(rows), Figure())
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 4
    accuracy = {(p.get_images()[0].norm.vmin, p.get_images()[0].norm.vmax) for p in panels[0::2]}
    assert accuracy == {(0.135, 0.52)}  # one scale for both configurations, not 0.135-0.155 and 0.5-0.52
    assert panels[1].get_title() == "a\ntokens per run, n=3 runs"  # the configuration, then what is drawn
    bars = [ax.get_xlabel() for ax in fig.axes if not ax.get_images()]  # one colour bar under each column
    assert bars == ["mean dev accuracy of the returned prompt", "mean tokens per run"]


def test_forest_plot_draws_each_estimate_with_its_interval() -> None:
    table = pd.DataFrame(
        {
            "label": ["a", "b"],
            "n": [6, 5],
            "estimate": [0.1, -0.05],
            "ci_low": [0.02, -0.2],
            "ci_high": [0.2, 0.1],
            "p_holm": [0.03, 0.5],
        }
    )
    ax = plot_forest(table, ax=axes())
    labels = dict(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()], strict=True))
    assert labels == {1: "a (n=6, p(Holm)=0.03)", 0: "b (n=5, p(Holm)=0.5; CI spans 0)"}  # first row on top
    points = ax.collections[-1]
    assert [float(x) for x, _ in points.get_offsets()] == pytest.approx([0.1, -0.05])
    assert [tuple(c) for c in points.get_facecolors()][1] == (1.0, 1.0, 1.0, 1.0)  # inconclusive: hollow
    segments = ax.collections[0].get_segments()  # the error bars, in row order
    assert [tuple(s[:, 0]) for s in segments] == [pytest.approx((0.02, 0.2)), pytest.approx((-0.2, 0.1))]
    assert ax.get_title() == "Estimates with 95% CIs"


def test_forest_plot_draws_a_claim_holm_does_not_support_hollow() -> None:
    table = pd.DataFrame(
        {
            "label": ["a", "b"],
            "n": [6, 6],
            "estimate": [0.06, 0.1],
            "ci_low": [0.008, 0.03],
            "ci_high": [0.13, 0.17],
            "p_holm": [0.123, 0.02],
        }
    )
    ax = plot_forest(table, ax=axes())
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == [
        "a (n=6, p(Holm)=0.123; CI excludes 0, not after Holm)",
        "b (n=6, p(Holm)=0.02)",
    ]
    # the chart says why a CI that excludes 0 is drawn hollow
    notes = [t.get_text() for t in ax.texts]
    assert any("CI excludes 0, but not after Holm's correction" in n for n in notes), notes
    faces = [tuple(c) for c in ax.collections[-1].get_facecolors()]  # in row order
    assert faces[0] == (1.0, 1.0, 1.0, 1.0) and faces[1] != (1.0, 1.0, 1.0, 1.0)


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
    # every run gained (deltas 0.5 and 0.55 per task and sample): each answer is a sentence with its CI and n;
    # 6 runs that all gain give a sign-flip p of 2/64, 0.0625 after Holm over the 2 configurations: no claim
    assert (
        "- finish_threshold=8: **Inconclusive after Holm's correction**: mean gain +" in md
        and "over n=6 runs (sign-flip p, Holm-corrected: 0.0625)" in md
    )
    assert "finish_threshold=8 gained more" not in md and "n=6 pairs" in md  # the paired comparison
    # the sweep's critic ranks the 34 logged candidates exactly as their grounded scores do
    assert (
        "- fake/critic: **ranks candidates as accuracy does**: Spearman r=+1.000 [+1.000, +1.000]" in md
    ) and "n=34 candidates" in md
    # threshold 8 and 10 at cap 3 both return 0.533 (8 stops t2 at iteration 2, so it is the cheaper best);
    # threshold 7 at cap 2 returns 0.4, inside the best's CI, for less
    assert "The best rule (stop at threshold 8, cap 3) reaches 0.533 [0.350, 0.683]" in md
    assert "**stop at threshold 7, cap 2**" in md and "mean dev accuracy 0.400 [0.233, 0.567], n=6 runs" in md


def test_when_to_stop_ranks_every_exact_rule_best_first(res: Results) -> None:
    """Issue #30: the answer ranks thresholds x caps up to the logged cap, each with its n and CI; thresholds
    that give a cap the same outcome share a row."""
    f = findings(res)
    ranked = analysis.rank_rules(f.counterfactual)
    assert list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    assert list(ranked["grounded_mean"]) == sorted(ranked["grounded_mean"], reverse=True)
    assert set(ranked["cap"]) == {1, 2, 3} and (ranked["grounded_n"] == 6).all()
    covered = sorted((c, t) for r in ranked.itertuples() for c, t in [(r.cap, x) for x in r.thresholds])
    assert covered == sorted(
        {(int(c), float(t)) for c, t in zip(f.counterfactual["cap"], f.counterfactual["threshold"], strict=True)}
    )
    top = ranked.iloc[0]
    assert top["cap"] == 3 and 8.0 in top["thresholds"] and top["grounded_mean"] == pytest.approx(1.6 / 3)
    md = "\n".join(findings_markdown(f))
    assert "Every rule for loop=p3ro, best first" in md
    assert "| 1 | cap 3, threshold 8 | 0.533 [0.350, 0.683] | 6 | 2.67 |" in md
    assert "| 2 | cap 3, threshold 9, 10 | 0.533" in md  # the same accuracy for more rewrites


def test_a_claim_needs_its_ci_clear_of_0_and_its_holm_p_below_005() -> None:
    """An interval that excludes 0 is not enough in a family of comparisons: the Holm-corrected p must agree
    (the demo's equal-budget table once called a lead of +0.054 [+0.008, +0.115] with Holm p 0.125 a lead)."""
    kw = {"up": "b gained more", "down": "a gained more"}
    assert verdict(0.008, 0.115, **kw, p_holm=0.125) == NOT_AFTER_HOLM
    assert verdict(-0.2, -0.01, **kw, p_holm=0.05) == NOT_AFTER_HOLM
    assert verdict(0.008, 0.115, **kw, p_holm=0.049) == "b gained more"
    assert verdict(-0.2, -0.01, **kw, p_holm=0.01) == "a gained more"
    assert verdict(-0.01, 0.2, **kw, p_holm=0.001) == INCONCLUSIVE  # the CI first
    assert verdict(0.0, 0.2, **kw) == INCONCLUSIVE  # touching 0 is spanning it
    assert verdict(0.008, 0.115, **kw) == "b gained more"  # no p: the CI alone
    assert verdict(None, 0.1, **kw).startswith("No CI")


def test_report_writes_the_findings(res: Results, tmp_path: Path) -> None:
    written = report(res, tmp_path / "out")
    for name in ("calibration.png", "grounded_trajectories.png", "counterfactual.png", "deltas.png"):
        assert written[name].read_bytes().startswith(PNG), name
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "## Findings" in md and "### 1. Did refinement help?" in md and "mixes" not in md
    stopping = md.split("### 2. When to stop?", 1)[1].split("##", 1)[0]
    assert "DEV-split accuracy" in stopping and "stop at threshold" in stopping  # not the test split of the deltas
    assert "### 3. Can the critic be trusted?" in md
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


def test_a_zero_width_interval_is_no_variation_not_inconclusive_or_fragile(tmp_path: Path) -> None:
    """Every run's gain exactly 0 (every dev accuracy 0, say): +0.000 [+0.000, +0.000] is "no variation", in the
    verdict, the fragility note and summary.md alike; never "Inconclusive" or "Fragile"."""
    from grounded import CELLS, grounded, grounded_run

    from promptlab.analysis.fragility import fragile_note
    from promptlab.record import Delta
    from promptlab.results.store import write_cell

    assert verdict(0.0, 0.0, up="up", down="down") == NO_VARIATION
    assert verdict(0.1, 0.1, up="up", down="down") == "up"  # every value +0.1 (a Spearman of 1 every resample)
    assert fragile_note(0.0, 0.0) == ""
    for cell_id, params in CELLS.items():
        runs = [grounded_run(params, t, s) for t in DECISIONS for s in (0, 1)]
        for run in runs:
            run.final_test = grounded("test", 0.2)
            run.delta = Delta(value=0.0, n=20, ci_low=0.0, ci_high=0.0)
        write_cell(tmp_path / "r", cell_id, params, runs)
    report(load(tmp_path / "r"), tmp_path / "out")
    helped = (tmp_path / "out" / "summary.md").read_text().split("### 1. Did refinement help?", 1)[1]
    helped = helped.split("### 2.", 1)[0]
    assert "No variation" in helped and "Inconclusive" not in helped and "Fragile" not in helped, helped


def test_the_counterfactual_colour_bars_are_sane_when_every_value_is_equal() -> None:
    """Every dev accuracy 0 (and every cost equal): each colour bar spans a readable range around the one value,
    not 0 to 1e-9 with an offset label ("0.0 ... 1.0 1e-9")."""
    rows = [
        {"config": c, "threshold": 10.0, "cap": cap, "n_runs": 3, "n_exact": 3, "grounded_mean": 0.0}
        | {"cost_usd_mean": None, "tokens_mean": 500.0, "stopped_early": 0.0}
        for c in ("a", "b")
        for cap in (0, 1)
    ]
    fig = plot_counterfactual_grid(pd.DataFrame(rows), Figure())
    fig.canvas.draw()
    bars = [ax for ax in fig.axes if not ax.get_images() and ax.get_label() == "<colorbar>"]
    assert len(bars) == 2
    accuracy, tokens = (bar.get_xlim() for bar in bars)
    assert accuracy == (0.0, 0.1) and tokens[0] < 500 < tokens[1]
    for bar in bars:
        assert bar.xaxis.get_offset_text().get_text() == ""  # no "1e-9" beside the ticks
