"""Charts, summary table and report over hand-built sweep results."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # this process only: an MPLBACKEND variable would leak into notebook kernels

import numpy as np
import pandas as pd
import pytest
from factories import CELL_A, cfg, make_run, runs_a, write_sweep
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from promptlab.errors import ConfigError
from promptlab.eval.stats import bootstrap_ci
from promptlab.reports.plots import (
    pareto_front,
    plot_final_by,
    plot_pairing_heatmap,
    plot_score_vs_cost,
    plot_stop_reasons,
    plot_trajectories,
)
from promptlab.reports.summary import report, summary_table
from promptlab.results.configs import config_columns
from promptlab.results.store import Results, load, write_cell

PNG = b"\x89PNG\r\n\x1a\n"
FINDINGS_CHARTS = (
    "biases.png",
    "calibration.png",
    "grounded_trajectories.png",
    "counterfactual.png",
    "budget_curve.png",
    "deltas.png",
)


@pytest.fixture
def res(tmp_path: Path) -> Results:
    return load(write_sweep(tmp_path / "results"))


def new_ax() -> Axes:
    return Figure(figsize=(8, 5)).add_subplot()


def floats(data: object) -> list[float]:
    return [float(v) for v in np.asarray(data, dtype=float)]


def save(ax: Axes, path: Path) -> None:
    fig = ax.figure
    assert isinstance(fig, Figure)
    fig.savefig(path, bbox_inches="tight")
    assert path.read_bytes().startswith(PNG)


def test_pareto_front_keeps_the_non_dominated_points() -> None:
    df = pd.DataFrame(
        {
            "name": ["A", "B", "C", "D", "E", "F", "G", "H"],
            "cost": [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 1.0, None],
            "score": [5.0, 7.0, 6.0, 7.0, 9.0, 8.0, 5.0, 10.0],
        }
    )
    front = pareto_front(df, "cost", "score")
    # C is beaten by B at equal cost, D by B at lower cost, F by E; G ties A exactly; H has no cost
    assert front.name.tolist() == ["A", "G", "B", "E"]
    assert pareto_front(pd.DataFrame({"c": [1, 1], "s": [3, 5]}), "c", "s").s.tolist() == [5]
    assert pareto_front(df.iloc[:0], "cost", "score").empty
    with pytest.raises(KeyError, match="tokens"):
        pareto_front(df, "tokens", "score")


def test_chart_bands_are_the_tables_intervals() -> None:
    """One bootstrap for the whole package: a trajectory band is `eval.stats.bootstrap_ci` of the same values."""
    its = pd.DataFrame(
        {
            "cell_id": "c",
            "run_id": [f"r{i}" for i in range(6)] * 2,
            "loop": "p3ro",
            "iteration": [1] * 6 + [2] * 6,
            "average": [1.0, 4.0, 6.0, 9.0, 10.0, 5.0, 2.0, 2.0, 3.0, 8.0, 7.0, float("nan")],
        }
    )
    ax = plot_trajectories(its, ax=new_ax())
    band = ax.collections[0].get_paths()[0].vertices
    lows = sorted({round(float(y), 9) for y in band[:, 1]})
    expect = [bootstrap_ci([1.0, 4.0, 6.0, 9.0, 10.0, 5.0]), bootstrap_ci([2.0, 2.0, 3.0, 8.0, 7.0])]
    for lo, hi in expect:
        assert round(lo, 9) in lows and round(hi, 9) in lows
    assert bootstrap_ci([6.0, 6.0, 6.0]) == (6.0, 6.0)
    with pytest.raises(ValueError, match="present"):
        bootstrap_ci([4.0, float("nan")])


def test_config_columns(res: Results) -> None:
    # critic_model is the same everywhere, so it does not name a configuration
    assert config_columns(res.runs) == ["loop", "finish_threshold", "max_iterations", "generator_model"]
    assert config_columns(res.trajectories) == ["loop", "finish_threshold", "max_iterations", "generator_model"]


def test_plot_trajectories(res: Results, tmp_path: Path) -> None:
    ax = plot_trajectories(res.trajectories, ax=new_ax())
    assert isinstance(ax, Axes)
    lines = ax.get_lines()
    assert len(lines) == 2 and len(ax.collections) == 2  # a line and a band per configuration
    a = lines[0]
    assert "finish_threshold=8" in str(a.get_label()) and "(n=4)" in str(a.get_label())
    # two configurations, drawn apart by a small offset so that equal values never hide each other
    assert floats(a.get_xdata()) == pytest.approx([0.88, 1.88, 2.88])
    assert floats(lines[1].get_xdata()) == pytest.approx([1.12, 2.12, 3.12])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]  # whole iterations only
    assert a.get_marker() != lines[1].get_marker() and a.get_linestyle() != lines[1].get_linestyle()
    assert ax.get_title().startswith("Mean critic score by iteration")
    # iteration 1: averages 6.5, 5, 4, 7; iteration 2: 8.5, 6, 5 and a missing one;
    # iteration 3: 7, 6 and a missing one (the threshold run stopped at 2)
    assert np.allclose(np.asarray(a.get_ydata(), dtype=float), [5.625, (8.5 + 6 + 5) / 3, 6.5])
    save(ax, tmp_path / "t.png")


def test_plot_trajectories_pools_runs_of_several_cells(res: Results) -> None:
    ax = plot_trajectories(res.trajectories, by="loop", ax=new_ax())
    (line,) = ax.get_lines()
    assert str(line.get_label()) == "loop=p3ro (n=8)"
    # iteration 1 over both cells: 6.5, 5, 4, 7 (cell a) and 5 x 4 (cell b)
    assert floats(line.get_ydata())[0] == pytest.approx((6.5 + 5 + 4 + 7 + 4 * 5) / 8)


def test_plot_trajectories_carry_forward_and_no_band(res: Results) -> None:
    ax = plot_trajectories(res.trajectories, ax=new_ax(), carry_forward=True, ci=None)
    assert len(ax.collections) == 0
    # the run that stopped at iteration 2 (8.5) now counts at iteration 3; a missing average stays missing
    assert np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)[2] == pytest.approx((7 + 6 + 8.5) / 3)


def test_coinciding_configurations_stay_visible_and_one_iteration_has_one_tick() -> None:
    its = pd.DataFrame(
        {
            "cell_id": ["a", "b", "c", "d"],
            "run_id": ["r1", "r2", "r3", "r4"],
            "loop": "p3ro",
            "variant": ["w", "x", "y", "z"],
            "iteration": [1] * 4,
            "average": [10.0] * 4,
        }
    )
    ax = plot_trajectories(its, ax=new_ax())
    xs = [floats(line.get_xdata())[0] for line in ax.get_lines()]
    assert len(set(xs)) == 4 and all(abs(x - 1) < 0.2 for x in xs)  # four points at 10, none hidden
    assert len({line.get_marker() for line in ax.get_lines()}) == 4
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1"]


def test_plot_trajectories_with_one_run_per_point(tmp_path: Path) -> None:
    write_cell(tmp_path, "solo", {"loop": "p3ro"}, [make_run([[5.0, 6.0], [7.0, 7.0]])])
    ax = plot_trajectories(load(tmp_path).trajectories, by=["loop"], ax=new_ax())
    assert len(ax.get_lines()) == 1 and str(ax.get_lines()[0].get_label()) == "loop=p3ro (n=1)"
    save(ax, tmp_path / "solo.png")


def test_plot_pairing_heatmap(res: Results, tmp_path: Path) -> None:
    ax = plot_pairing_heatmap(res.runs, ax=new_ax())
    texts = [t.get_text() for t in ax.texts]
    # cell a's final scores are 8.5, 7, 6 and one missing
    assert texts == ["7.17\nn=3", "6.00\nn=4"]
    save(ax, tmp_path / "h.png")


def test_plot_pairing_heatmap_marks_empty_pairings() -> None:
    runs = pd.DataFrame(
        {
            "generator_model": ["g1", "g2"],
            "critic_model": ["c1", "c2"],
            "final_score": pd.array([6.0, None], dtype="Float64"),
        }
    )
    ax = plot_pairing_heatmap(runs, ax=new_ax())
    # g1/c2 and g2/c1 were never run; g2/c2 ran once without a score: three different things
    assert [t.get_text() for t in ax.texts] == ["6.00\nn=1", "not run", "not run", "no score\n0 of 1 runs"]
    assert sum(p.get_hatch() == "//" for p in ax.patches) == 2


def test_plot_score_vs_cost_highlights_the_front(res: Results, tmp_path: Path) -> None:
    ax = plot_score_vs_cost(res.runs, x="tokens", ax=new_ax())
    front = pareto_front(res.runs, "tokens", "final_score")
    (step,) = ax.get_lines()
    assert floats(step.get_xdata()) == front.tokens.astype(float).tolist()
    assert floats(step.get_ydata()) == front.final_score.astype(float).tolist() == [8.5]
    assert len(ax.collections) == 3  # one scatter per configuration + the front's rings
    save(ax, tmp_path / "c.png")


def test_plot_stop_reasons(res: Results, tmp_path: Path) -> None:
    ax = plot_stop_reasons(res.runs, ax=new_ax())
    assert len(ax.patches) == 2 * 3  # 2 configurations x 3 reasons
    widths: dict[float, float] = {}
    for p in ax.patches:
        assert isinstance(p, Rectangle)
        y = round(p.get_y(), 3)
        widths[y] = widths.get(y, 0) + p.get_width()
    assert sorted(widths.values()) == [4, 4]
    assert sorted(ax.get_legend_handles_labels()[1]) == ["max_iterations", "plateau", "threshold"]
    save(ax, tmp_path / "s.png")


def test_plot_final_by(res: Results, tmp_path: Path) -> None:
    runs = res.runs.copy()
    runs["max_iterations"] = pd.array([3, 5] * 4, dtype="Int64")
    ax = plot_final_by(runs, ax=new_ax())
    assert len(ax.containers) == 2  # one errorbar line per cap
    assert sorted(ax.get_legend_handles_labels()[1]) == ["max_iterations=3", "max_iterations=5"]
    bars = ax.containers[0]
    assert isinstance(bars, ErrorbarContainer)
    line = bars.lines[0]
    assert line is not None
    # cap 3 at threshold 8: runs t1/0 (8.5) and t2/0 (6.0); at threshold 9: 6.0 and 6.0
    assert np.allclose(np.asarray(line.get_ydata(), dtype=float), [7.25, 6.0])
    save(ax, tmp_path / "f.png")
    single = plot_final_by(res.runs, hue=None, ax=new_ax())
    assert len(single.containers) == 1


def test_plots_make_their_own_figure_when_ax_is_none(res: Results) -> None:
    import matplotlib.pyplot as plt

    try:
        ax = plot_stop_reasons(res.runs)
        assert isinstance(ax, Axes) and ax.figure is not None
    finally:
        plt.close("all")


def test_unknown_columns_are_named(res: Results) -> None:
    with pytest.raises(KeyError, match="no_such"):
        plot_final_by(res.runs, x="no_such", ax=new_ax())
    with pytest.raises(KeyError, match="no_such"):
        plot_stop_reasons(res.runs, by=["no_such"], ax=new_ax())


def test_summary_table(res: Results) -> None:
    table = summary_table(res)
    a = table[table.finish_threshold == 8.0].iloc[0]
    assert (a.runs, a.final_score_n, a.n_errors, a.runs_with_errors) == (4, 3, 1, 1)
    assert a.final_score_mean == pytest.approx((8.5 + 7 + 6) / 3)
    assert a.best_score_mean == pytest.approx((8.5 + 7 + 6 + 7) / 4) and a.iterations_mean == 2.75
    assert a.stop_reasons == "max_iterations: 3, threshold: 1"
    assert a.tokens_total == 90 + 3 * 120 and a.cost_usd_total == pytest.approx(0.03)
    assert summary_table(res.runs, by=["generator_model"]).runs.tolist() == [4, 4]


def test_summary_table_cost_is_missing_when_a_price_is_unknown(tmp_path: Path) -> None:
    write_cell(tmp_path, "c", {"loop": "p3ro"}, [make_run([[5.0]]), make_run([[6.0]], sample=1, cost=None)])
    assert summary_table(load(tmp_path)).cost_usd_total.isna().all()


def test_report_writes_every_file(res: Results) -> None:
    out = report(res.path)
    names = {
        "trajectories.png",
        "score_vs_cost.png",
        "stop_reasons.png",
        "final_by_threshold.png",
        "summary.csv",
        "summary.md",
    }
    assert set(out) == names
    # two generators and one critic: a 2 x 1 heatmap would hold one number per row, so a sentence says why not
    assert out.skipped == {
        **dict.fromkeys(FINDINGS_CHARTS, "no grounded data"),  # tasks without examples
        "pairings.png": "one critic model only: the pairings are a single row, whose gains with their CIs are in "
        "notebook 04's forest plot (and the report's deltas.png)",  # 03 draws no deltas.png: it points to 04
    }
    for name in names:
        assert out[name] == res.path / "report" / name and out[name].stat().st_size > 0
    assert out["trajectories.png"].read_bytes().startswith(PNG)
    csv = pd.read_csv(out["summary.csv"])
    assert len(csv) == 2 and "final_score_mean" in csv.columns
    md = out["summary.md"].read_text()
    assert "| loop |" in md and "`failed` (failed): SweepCellError" in md


def test_report_skips_charts_with_nothing_to_compare(tmp_path: Path) -> None:
    write_cell(tmp_path, "a", CELL_A, runs_a())
    out = report(tmp_path, tmp_path / "elsewhere")
    assert set(out.skipped) == {"pairings.png", "final_by_threshold.png", *FINDINGS_CHARTS}
    assert "one generator model only" in out.skipped["pairings.png"]
    assert not (tmp_path / "elsewhere" / "pairings.png").exists()
    assert "pairings.png not drawn" in out["summary.md"].read_text()
    assert {"trajectories.png", "score_vs_cost.png", "stop_reasons.png"} <= set(out)


def test_report_of_a_directory_without_ok_cells(tmp_path: Path) -> None:
    write_cell(
        tmp_path,
        "f",
        {"loop": "p3ro"},
        [make_run([[1.0]], config=cfg({**CELL_A}))],
        error={"kind": "ProviderError", "message": "down"},
    )
    out = report(tmp_path)
    assert set(out) == {"summary.csv", "summary.md"} and len(out.skipped) == 5 + len(FINDINGS_CHARTS)
    assert "(no runs)" in out["summary.md"].read_text()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_report_facets_trajectories_when_there_are_many_configurations(tmp_path: Path) -> None:
    few = report(write_sweep(tmp_path / "few"))
    for t in (7.0, 8.0, 9.0):
        for cap in (2, 3, 4):
            write_cell(
                tmp_path / "many",
                f"c{t}-{cap}",
                {"loop": "p3ro", "finish_threshold": t, "max_iterations": cap},
                [make_run([[5.0, 6.0]] * cap)],
            )
    many = report(tmp_path / "many")
    # nine configurations: one panel per varied parameter (two) instead of nine lines in one panel
    assert png_size(many["trajectories.png"])[1] > 1.2 * png_size(few["trajectories.png"])[1]


def test_pairing_heatmap_with_equal_counts_has_one_number_per_cell() -> None:
    runs = pd.DataFrame(
        {"generator_model": ["g"] * 4, "critic_model": ["a", "a", "b", "b"], "final_score": [4.0, 6.0, 7.0, 9.0]}
    )
    ax = plot_pairing_heatmap(runs, ax=new_ax())
    assert [t.get_text() for t in ax.texts] == ["5.00", "8.00"] and "(n=2 runs each)" in ax.get_title()


def test_report_writes_over_a_planted_link_never_through_it(res: Results, tmp_path: Path) -> None:
    """#41 item 6 for what a report writes: summary.md, summary.csv and each chart replace a link planted under
    their name (a temp file renamed over it), so a file outside the results directory is never overwritten; a
    report folder that is itself a link out is refused by name."""
    victims = {name: tmp_path / f"victim-{name}" for name in ("summary.md", "summary.csv", "trajectories.png")}
    folder = res.path / "report"
    folder.mkdir()
    for name, victim in victims.items():
        victim.write_text("keep me")
        (folder / name).symlink_to(victim)
    out = report(res.path)
    assert all(v.read_text() == "keep me" for v in victims.values())  # was: written through the links
    assert not (folder / "summary.md").is_symlink() and out["trajectories.png"].read_bytes().startswith(PNG)
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    (tmp_path / "outside").mkdir()
    folder.symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(ConfigError, match=r"report is a symbolic link to .*outside; refused"):
        report(res.path)
    assert list((tmp_path / "outside").iterdir()) == []
