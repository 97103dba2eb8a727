"""Charts of the findings (see `promptlab.analysis`): each takes a tidy frame and returns a matplotlib Axes.

- `plot_calibration(trajectories)`: critic score against grounded score, one colour per critic, Spearman's r
  with its CI and n in the legend.
- `plot_grounded_trajectories(trajectories)`: mean dev-split grounded score per iteration with bootstrap bands.
- `plot_counterfactual_heatmap(table)`: threshold x cap -> mean final grounded score, annotated with the cost.
- `plot_forest(table)`: estimates with CIs (paired deltas from `analysis.compare` or `analysis.delta_table`).

Nothing here calls a model; with `ax=None` a chart makes its figure with pyplot.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .plots import By, plot_trajectories

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes


def plot_calibration(trajectories: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Scatter of each iteration's decision score (the critic's; `average` without a decision_score column)
    against its grounded score, one colour per critic, with Spearman's r, its 95% CI and n in the legend.

    Raises:
        ValueError: no iteration has both scores.
    """
    from ..analysis.critic import ALL, calibration
    from ..results.frames import iteration_frame

    cal = calibration(trajectories)
    cal = cal[(cal["criterion"] == ALL) & (cal["critic_model"] != ALL)].set_index("critic_model")
    if cal.empty:
        raise ValueError("no iteration has both a critic score and a grounded score")
    its = iteration_frame(trajectories)
    x = "decision_score" if "decision_score" in its.columns else "average"
    critic = "critic_model" if "critic_model" in its.columns and its["critic_model"].notna().any() else "judge"
    its = its[its[x].notna() & its["grounded_score"].notna()]
    ax = _axes(ax, (7, 5))
    for critic_name, g in its.groupby(its[critic].fillna("(unknown)"), sort=True):
        r = cal.loc[critic_name] if critic_name in cal.index else None
        stat = "r undefined" if r is None or _na(r["spearman"]) else (
            f"Spearman r={r['spearman']:.2f} [{r['spearman_ci_low']:.2f}, {r['spearman_ci_high']:.2f}]")
        ax.scatter(g[x].astype(float), g["grounded_score"].astype(float), alpha=0.6,
                   label=f"{critic_name}: {stat}, n={len(g)}")
    ax.set(xlabel=f"critic {x.replace('_', ' ')} (1-10)", ylabel="grounded score (dev split)",
           title="Does the critic track accuracy? (95% bootstrap CI)")
    ax.legend(loc="best", fontsize="small", frameon=False)
    ax.grid(alpha=0.3)
    return ax


def plot_grounded_trajectories(trajectories: pd.DataFrame, by: By = "config", ax: Axes | None = None,
                               **kwargs: Any) -> Axes:
    """Mean grounded (dev-split) score per iteration for each configuration, with bootstrap bands over runs.

    Keyword arguments go to `promptlab.reports.plots.plot_trajectories` (ci, n_boot, carry_forward, ...).
    """
    from ..results.frames import iteration_frame

    if "grounded_score" not in trajectories.columns:
        raise KeyError("the trajectories have no grounded_score column")
    its = iteration_frame(trajectories)
    ax = plot_trajectories(its.assign(average=its["grounded_score"]), by=by, ax=ax, **kwargs)
    ax.set(ylabel="mean grounded score (dev split)",
           title=ax.get_title().replace("Score by iteration", "Grounded score by iteration"))
    return ax


def plot_counterfactual_heatmap(table: pd.DataFrame, value: str = "grounded_mean", ax: Axes | None = None) -> Axes:
    """Heatmap of a `counterfactual_stopping` table: threshold (rows) x cap (columns) -> `value`, each cell
    annotated with the value, the mean cost (cost_usd_mean when known, else tokens) and the fraction stopped
    early; cells where some run's counterfactual is not exact are marked with an asterisk.

    Raises:
        ValueError: the table holds several configurations (filter it to one first) or is empty.
    """
    import numpy as np

    if table.empty:
        raise ValueError("the counterfactual table is empty")
    if table.duplicated(["threshold", "cap"]).any():
        raise ValueError("the table holds several configurations per threshold x cap: filter it to one first")
    cost = "cost_usd_mean" if table["cost_usd_mean"].notna().all() and (table["cost_usd_mean"] > 0).any() \
        else "tokens_mean"
    grid = table.pivot(index="threshold", columns="cap", values=value).astype(float)
    ax = _axes(ax, (1.6 * grid.shape[1] + 3, 0.9 * grid.shape[0] + 2))
    image = ax.imshow(grid.to_numpy(dtype=float, na_value=np.nan), cmap="viridis", aspect="auto")
    ax.figure.colorbar(image, ax=ax, label=value.replace("_", " "))
    cells = table.set_index(["threshold", "cap"])
    for i, t in enumerate(grid.index):
        for j, c in enumerate(grid.columns):
            r = cells.loc[(t, c)]
            mark = "" if r["n_exact"] == r["n_runs"] else "*"
            cost_text = f"${r[cost]:.3g}" if cost == "cost_usd_mean" else f"{r[cost]:.0f} tok"
            ax.text(j, i, f"{_num(r[value])}{mark}\n{cost_text}\nearly {_num(r['stopped_early'])}", ha="center",
                    va="center", fontsize="small", color="white")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [f"{t:g}" for t in grid.index])
    n = int(table["n_runs"].max())
    ax.set(xlabel="iteration cap", ylabel="finish threshold",
           title=f"Counterfactual stopping: {value.replace('_', ' ')} (n={n} runs; * = not exact)")
    return ax


def plot_forest(table: pd.DataFrame, ax: Axes | None = None, null: float = 0.0) -> Axes:
    """Forest plot: one row per `label` with `estimate` and its [ci_low, ci_high], n (and p_holm when
    present) in the tick label, and a reference line at `null`.

    Raises:
        ValueError: the table is empty.
    """
    if table.empty:
        raise ValueError("nothing to plot: the table is empty")
    rows = table.reset_index(drop=True)
    ax = _axes(ax, (8, 0.5 * len(rows) + 1.8))
    ys = list(range(len(rows)))[::-1]
    est = rows["estimate"].astype(float)
    lo = (est - rows["ci_low"].astype(float)).clip(lower=0).fillna(0)
    hi = (rows["ci_high"].astype(float) - est).clip(lower=0).fillna(0)
    ax.errorbar(est, ys, xerr=[lo, hi], fmt="o", capsize=4, color="C0")
    ax.axvline(null, color="grey", linestyle="--", linewidth=1)
    labels = []
    for r in rows.itertuples():
        p = f", p(Holm)={r.p_holm:.3g}" if "p_holm" in rows.columns and not _na(r.p_holm) else ""
        labels.append(f"{r.label} (n={r.n}{p})")
    ax.set_yticks(ys, labels)
    ax.set(xlabel="estimate with 95% bootstrap CI", title="Paired differences")
    ax.grid(alpha=0.3, axis="x")
    return ax


def _na(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _num(v: Any) -> str:
    return "NA" if _na(v) else f"{float(v):.2f}"


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size)
    return new


__all__ = ["plot_calibration", "plot_counterfactual_heatmap", "plot_forest", "plot_grounded_trajectories"]
