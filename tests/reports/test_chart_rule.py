"""The chart rule of issue #31: across configurations compare accuracy; a critic's own score only within that
critic; axes fit the data; short labels; a chart that would hold one number is a sentence."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from critics import write_critics_sweep
from matplotlib.figure import Figure

from promptlab.reports import plot_budget_curve, plot_critic_trajectories, report, run_measure, summary_table
from promptlab.results import load
from promptlab.results.configs import config_labels


@pytest.fixture
def critics_dir(tmp_path: Path) -> Path:
    return write_critics_sweep(tmp_path / "critics")


def test_the_summary_compares_critics_by_accuracy_not_by_their_own_scores(critics_dir: Path) -> None:
    table = summary_table(load(critics_dir)).set_index("critic_model")
    assert "final_score_mean" not in table.columns and "best_score_mean" not in table.columns
    assert list(table.columns[:4]) == ["loop", "runs", "test_accuracy_mean", "gain_mean"]
    assert table.loc["sim/oracle", "test_accuracy_mean"] > table.loc["local/smollm2", "test_accuracy_mean"]
    assert table.loc["sim/oracle", "gain_mean"] == pytest.approx(0.1075)


def test_one_critic_keeps_its_own_score_columns(critics_dir: Path) -> None:
    runs = load(critics_dir).runs
    table = summary_table(runs[runs["critic_model"] == "sim/oracle"])
    assert {"final_score_mean", "test_accuracy_mean"} <= set(table.columns)


def test_trajectories_draw_each_critic_in_its_own_panel(critics_dir: Path) -> None:
    fig = plot_critic_trajectories(load(critics_dir).trajectories, Figure(figsize=(13, 4)))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["critic smollm2", "critic noisy sd 2", "critic oracle"]
    assert len({ax.get_ylim() for ax in fig.axes}) == 3  # each on its own scale, never one shared axis


def test_the_report_follows_the_rule(critics_dir: Path) -> None:
    out = report(critics_dir)
    assert "trajectories.png" in out and "score_vs_cost.png" in out
    assert out.skipped["pairings.png"].startswith("one generator model only")  # a 1 x 3 strip: deltas.png has it
    assert out.skipped["stop_reasons.png"] == "every run (36) stopped with max_iterations"
    md = out["summary.md"].read_text()
    assert "stop_reasons.png not drawn: every run (36) stopped with max_iterations" in md
    assert "final_score_mean" not in md and "test_accuracy_mean" in md
    assert run_measure(load(critics_dir).runs) == ("final_test_score", "")


def test_without_accuracy_critics_are_not_put_on_one_axis(critics_dir: Path) -> None:
    runs = load(critics_dir).runs.drop(columns=["final_test_score"])
    column, why = run_measure(runs)
    assert column is None and "scales that differ by critic" in why
    assert run_measure(runs[runs["critic_model"] == "sim/oracle"]) == ("final_score", "")


def test_labels_are_short() -> None:
    frame = pd.DataFrame({"loop": ["c", "c"], "critic_model": ["sim/noisy?sd=2&seed=0", "local/smollm2"]})
    assert config_labels(frame).tolist() == ["critic=noisy sd 2", "critic=smollm2"]
    clash = pd.DataFrame({"loop": ["c", "c"], "critic_model": ["local/x", "fake/x"]})
    assert config_labels(clash).tolist() == ["critic_model=local/x", "critic_model=fake/x"]  # kept apart


def test_the_budget_curve_fits_its_data() -> None:
    rows = []
    for config, shift in (("loop=a", 0.0), ("loop=b", 0.0), ("loop=c", 0.05)):
        for point, mean in ((10, 0.2), (20, 0.3)):
            m = mean + shift
            rows.append(
                {"config": config, "point": point, "test_mean": m, "test_ci_low": m - 0.02, "test_ci_high": m + 0.02}
                | {"n_exact": 2, "n_runs": 2}
            )
    ax = Figure().add_subplot()
    plot_budget_curve(pd.DataFrame(rows), "test", ax=ax, budget="calls")
    low, high = ax.get_ylim()
    assert 0.1 < low < 0.18 and 0.37 < high < 0.45, (low, high)  # not 0-1 around data between 0.18 and 0.37
    a, b = (line.get_xdata() for line in ax.get_lines()[:2])
    assert list(a) != list(b)  # two identical lines drawn apart, so both stay visible
    assert ax.get_lines()[0].get_linestyle() != ax.get_lines()[1].get_linestyle()


def test_a_pairing_heatmap_needs_crossed_models() -> None:
    from promptlab.reports import pairing_why_not

    diagonal = pd.DataFrame({"generator_model": ["a", "b"], "critic_model": ["x", "y"], "delta": [0.1, 0.2]})
    assert "nothing is crossed" in str(pairing_why_not(diagonal))
    crossed = pd.DataFrame(
        {"generator_model": ["a", "a", "b"], "critic_model": ["x", "y", "x"], "final_test_score": [0.1, 0.2, 0.3]}
    )
    assert pairing_why_not(crossed) is None


def test_the_calibration_table_says_its_finding_on_every_row(critics_dir: Path) -> None:
    from promptlab.reports import findings

    cal = findings(load(critics_dir)).calibration
    assert cal["finding"].notna().all()
    by_critic = cal[cal["criterion"] == "(all)"].set_index("critic_model")["finding"]
    assert by_critic["sim/oracle"] == "ranks candidates as accuracy does"
    assert "same score" in by_critic["local/smollm2"] or "Inconclusive" in by_critic["local/smollm2"]


def test_an_all_zero_accuracy_chart_shows_no_impossible_accuracy(critics_dir: Path) -> None:
    """Dev accuracy 0 everywhere: the axis starts at 0 (no -0.04), and no accuracy axis passes 1."""
    import matplotlib.pyplot as plt

    from promptlab.reports.by_critic import trajectory_charts

    traj = load(critics_dir).trajectories
    for value in (0.0, 1.0):
        figures = trajectory_charts(traj.assign(grounded_score=value))
        low, high = figures[0].axes[0].get_ylim()
        assert 0.0 <= low < high <= 1.0 and low <= value <= high, (value, low, high)
        for fig in figures:
            plt.close(fig)
