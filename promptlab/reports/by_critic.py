"""The chart rule: comparisons across configurations use grounded measures (accuracy); a critic's own score is
drawn only within that critic. Critics' scales differ (the oracle's is 1 + 9 x accuracy, SmolLM2's a G-Eval
expectation), so two critics' scores on one axis compare nothing.

- `critics_differ(frame)`: whether the frame holds more than one critic.
- `run_measure(runs)`: the run column to compare configurations by: the final prompt's test accuracy, else (one
  critic only) the critic's final score, else None with the reason.
- `plot_critic_trajectories(traj, fig)`: the critic's score by iteration, one panel per critic (small multiples,
  each on its own axis); one panel when there is one critic.
- `trajectory_charts(traj)`: what a notebook shows: dev accuracy across configurations, critics' scores per critic.
- `pairing_why_not(runs)` / `stop_reasons_why_not(runs)`: the sentence that replaces a chart that would hold one
  number per row (a 1 x n pairing heatmap) or one bar (every run stopped the same way), or None to draw it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..results.configs import by_columns
from ..results.labels import fmt_value, short_model
from .charts import accuracy_limits
from .plots import plot_trajectories

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

ACCURACY = "final_test_score"
"""The run column of the grounded measure: the test accuracy of the prompt the run returned."""


def critics_differ(frame: pd.DataFrame) -> bool:
    """Whether the frame holds runs of more than one critic model."""
    return "critic_model" in frame.columns and frame["critic_model"].nunique(dropna=True) > 1


def run_measure(runs: pd.DataFrame) -> tuple[str | None, str]:
    """(column, why): the test accuracy of the final prompt where runs have one; else the critic's own final
    score when one critic made every run; else (None, why not)."""
    if ACCURACY in runs.columns and runs[ACCURACY].notna().any():
        return ACCURACY, ""
    if critics_differ(runs):
        return None, "no test accuracy, and the critics' own scores are on scales that differ by critic"
    if "final_score" in runs.columns and runs["final_score"].notna().any():
        return "final_score", ""
    return None, "no run has a test accuracy or a final score"


def plot_critic_trajectories(traj: pd.DataFrame, fig: Figure, value: str = "average") -> Figure:
    """Mean critic score per iteration, one panel per critic, each on its own y axis; within a panel one line
    per configuration (the other columns that vary)."""
    cols = [c for c in by_columns(traj, "config") if c != "critic_model"] or ["loop"]
    critics = sorted(traj["critic_model"].dropna().unique()) if "critic_model" in traj.columns else []
    if len(critics) < 2:
        plot_trajectories(traj, ax=fig.add_subplot(), value=value)
        return fig
    axes = fig.subplots(1, len(critics), squeeze=False)[0]
    fig.set_layout_engine("constrained")
    for ax, critic in zip(axes, critics, strict=True):
        rows = traj[traj["critic_model"] == critic]
        plot_trajectories(rows, by=cols, ax=ax, value=value)
        ax.set_title(f"critic {short_model(fmt_value(critic))}", fontsize="medium")
        ax.set_ylabel("mean critic score (its own scale)" if ax is axes[0] else "")
        legend = ax.get_legend()
        if legend is not None and (len(cols) <= 1 or ax is not axes[-1]):
            legend.remove()  # one configuration per panel: the title says which
    fig.suptitle("Each critic's own score by iteration (scales differ by critic: compare within a panel only)")
    return fig


def trajectory_charts(traj: pd.DataFrame) -> list[Figure]:
    """The trajectory charts a notebook shows (pyplot figures): the mean dev accuracy by iteration across
    configurations where candidates were measured, and each critic's own score in a panel of its own."""
    import matplotlib.pyplot as plt

    figures = []
    if "grounded_score" in traj.columns and traj["grounded_score"].notna().any():
        fig = plt.figure(figsize=(9, 4.5))
        ax = plot_trajectories(traj, ax=fig.add_subplot(), value="grounded_score")
        ax.set_ylim(*accuracy_limits(traj[["grounded_score"]]))  # never below 0 nor above 1
        figures.append(fig)
    if "average" in traj.columns and traj["average"].notna().any():
        critics = traj["critic_model"].nunique() if "critic_model" in traj.columns else 1
        fig = plt.figure(figsize=(min(4.5 * max(critics, 2), 13.5), 4.2))
        figures.append(plot_critic_trajectories(traj, fig))
    return figures


GAINS = "notebook 04's forest plot (and the report's deltas.png)"
"""Where a pairing's test-split gain with its CI is drawn when the heatmap is not: 03 draws no deltas.png."""


def pairing_why_not(runs: pd.DataFrame) -> str | None:
    """Why the generator x critic heatmap is not drawn (a sentence), or None when it is worth drawing: both
    models vary, and the runs have a measure comparable across pairings."""
    gens = runs["generator_model"].nunique(dropna=True) if "generator_model" in runs.columns else 0
    crits = runs["critic_model"].nunique(dropna=True) if "critic_model" in runs.columns else 0
    if gens < 2 or crits < 2:
        one = "generator" if gens < 2 else "critic"
        return f"one {one} model only: the pairings are a single row, whose gains with their CIs are in {GAINS}"
    if len(runs[["generator_model", "critic_model"]].drop_duplicates()) <= max(gens, crits):
        return (
            "each generator runs with one critic only (nothing is crossed): the pairings are the configurations, "
            f"whose gains with their CIs are in {GAINS}"
        )
    column, why = run_measure(runs)
    return None if column else why


def pairing_value(runs: pd.DataFrame) -> str:
    """The value a pairing heatmap shows: the test-split gain where runs have one, else `run_measure`'s column."""
    if "delta" in runs.columns and runs["delta"].notna().any():
        return "delta"
    return run_measure(runs)[0] or "final_score"


def stop_reasons_why_not(runs: pd.DataFrame) -> str | None:
    """The sentence that replaces the stop-reason chart when every run stopped the same way (None: draw it)."""
    reasons = runs["stop_reason"].fillna("").replace("", "(none)") if "stop_reason" in runs.columns else None
    if reasons is None or reasons.nunique() != 1:
        return None
    return f"every run ({len(reasons)}) stopped with {reasons.iloc[0]}"


__all__ = [
    "ACCURACY",
    "critics_differ",
    "pairing_value",
    "pairing_why_not",
    "plot_critic_trajectories",
    "run_measure",
    "stop_reasons_why_not",
    "trajectory_charts",
]
