"""Charts of the findings (see `promptlab.analysis`): each takes a tidy frame and draws on a matplotlib Axes.

- `plot_calibration(trajectories)`: each critic's OWN score of a candidate against that candidate's dev
  accuracy, one colour per critic, Spearman's r with its CI and n (or why there is none) in the legend.
- `plot_grounded_trajectories(trajectories)`: mean dev accuracy per iteration with bootstrap bands.
- `plot_counterfactual_heatmap(table)`: threshold x cap -> one number per cell (the mean dev accuracy of the
  prompt each rule returns, or its cost), on a colour scale that can be shared between panels;
  `plot_counterfactual_grid(table, fig)` draws accuracy and cost panels for every configuration, each kind on
  one shared scale.
- `plot_budget_curve(table)`: score against spend at equal budget (`analysis.equal_budget`), one line per
  configuration with CI bands.
- `plot_forest(table)`: estimates with CIs (paired deltas from `analysis.compare` or gains from
  `analysis.delta_table`), an interval that spans the null drawn hollow.

A chart with nothing to draw says why inside its axes (`say_why`) instead of raising. Nothing here calls a
model; with `ax=None` a chart makes its figure with pyplot.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..analysis.paired import standing
from ..critics.simulated import simulated_critic
from .plots import By, colour_range, plot_trajectories

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def say_why(ax: Axes, title: str, why: str) -> Axes:
    """An empty chart that says, inside its axes, why it has nothing to show."""
    import textwrap

    ax.set_title(title)
    ax.text(
        0.5,
        0.5,
        "\n".join(textwrap.wrap(f"Nothing to show: {why}", 60)),
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize="medium",
        color="#444",
        bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#bbb"},
    )
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def plot_calibration(trajectories: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Each critic's own score of a candidate (x) against the candidate's dev accuracy (y), one point per
    candidate, one colour per critic; the legend gives Spearman's r with its 95% CI and n, or the finding
    that replaces it (a critic that gave every candidate the same score). Identical points are drawn once,
    larger by how many candidates share them. The dashed line is what a perfect critic (`sim/oracle`, 1 + 9 x
    accuracy) would draw. The decision score is never used: under score_source 'grounded' it is the dev
    accuracy itself."""
    from ..analysis.critic import ALL, calibration

    ax = _axes(ax, (8, 5.5))
    title = "Critic's own score vs dev accuracy of the same candidate"
    cal = calibration(trajectories)
    cal = cal[cal["criterion"] == ALL].set_index("critic_model") if len(cal) else cal
    if cal.empty:
        return say_why(ax, title, "no candidate has both a critic score and a grounded (dev) score")
    traj = trajectories[trajectories["score"].notna() & trajectories["grounded_score"].notna()]
    critic = "critic_model" if "critic_model" in traj.columns and traj["critic_model"].notna().any() else "judge"
    keys = [c for c in ("cell_id", "run_id", "iteration") if c in traj.columns]
    most = 1
    for k, (name, g) in enumerate(traj.groupby(traj[critic].astype("string").fillna("(unknown)"), sort=True)):
        points = g.groupby(keys, sort=False).agg(x=("score", "mean"), y=("grounded_score", "first"))
        counts = points.groupby(["x", "y"]).size().reset_index(name="count")
        row: Any = cal.loc[str(name)]
        most = max(most, int(counts["count"].max()))
        ax.scatter(
            counts["x"].astype(float),
            counts["y"].astype(float),
            s=18 + 14 * counts["count"],
            alpha=0.55,
            marker="osD^vPX*"[k % 8],
            label=_calibration_label(str(name), row),
            clip_on=False,  # a point at accuracy 0 or 1 is drawn whole on an axis that stops there
        )
    ax.plot([1, 10], [0, 1], linestyle="--", color="grey", linewidth=1, label="a perfect critic: 1 + 9 x accuracy")
    for c in sorted({1, most}):  # what a marker's size says
        ax.scatter([], [], s=18 + 14 * c, color="grey", alpha=0.55, label=f"marker size: {c} candidate(s) at one point")
    ax.set(
        xlim=(0.5, 10.5),
        ylim=(0.0, 1.0),  # accuracy: never below 0 nor above 1
        xlabel="critic's own score of the candidate (1-10)",
        ylabel="dev accuracy of the candidate",
        title=f"{title} (one point per candidate)",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    ax.grid(alpha=0.3)
    return ax


def _calibration_label(name: str, r: pd.Series) -> str:
    """The legend entry of one critic: r, its CI and n, or the finding that replaces r."""
    import textwrap

    if not _na(r["finding"]):
        text = f"{name}: no r: {str(r['finding']).replace(f'the critic {name} ', '')}"
    else:
        text = (
            f"{name}: Spearman r={r['spearman']:.2f} [{r['spearman_ci_low']:.2f}, "
            f"{r['spearman_ci_high']:.2f}], n={r['n']}"
        )
    if simulated_critic(name) is not None:
        text += " (simulated from the dev accuracy)"
    return "\n".join(textwrap.wrap(text, 48))


def plot_grounded_trajectories(
    trajectories: pd.DataFrame, by: By = "config", ax: Axes | None = None, **kwargs: Any
) -> Axes:
    """Mean dev accuracy (grounded score) per iteration for each configuration, with bootstrap bands over runs.

    Keyword arguments go to `promptlab.reports.plots.plot_trajectories` (ci, carry_forward, ...).
    """
    if "grounded_score" not in trajectories.columns or trajectories["grounded_score"].isna().all():
        return say_why(_axes(ax, (8, 4.5)), "Mean dev accuracy by iteration", "no iteration has a grounded score")
    return plot_trajectories(trajectories, by=by, ax=ax, value="grounded_score", **kwargs)


def plot_counterfactual_heatmap(
    table: pd.DataFrame,
    value: str = "grounded_mean",
    ax: Axes | None = None,
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
    cmap: str = "viridis",
) -> Axes:
    """Heatmap of one configuration's `counterfactual_stopping` table: threshold (rows) x cap (columns) ->
    `value`, one number per cell. Cells where some run's counterfactual is not exact are hatched. Give
    `vmin`/`vmax` to share one colour scale between panels (`plot_counterfactual_grid` does).

    Raises:
        ValueError: the table holds several configurations (filter it to one first).
    """
    import numpy as np
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    ax = _axes(ax, (7, 5))
    title = f"{_VALUE_NAMES.get(value, value)} by stopping rule"
    if table.empty or table[value].isna().all():
        return say_why(ax, title, f"no rule has a {value.replace('_', ' ')}")
    if table.duplicated(["threshold", "cap"]).any():
        raise ValueError("the table holds several configurations per threshold x cap: filter it to one first")
    grid = table.pivot(index="threshold", columns="cap", values=value).astype(float)
    values = grid.to_numpy(dtype=float, na_value=np.nan)
    norm = Normalize(vmin=np.nanmin(values) if vmin is None else vmin, vmax=np.nanmax(values) if vmax is None else vmax)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=_VALUE_NAMES.get(value, value))
    cells = table.set_index(["threshold", "cap"])
    for i, t in enumerate(grid.index):
        for j, c in enumerate(grid.columns):
            r = cells.loc[(t, c)]
            v = values[i, j]
            if r["n_exact"] != r["n_runs"]:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#888", lw=0))
            text = "NA" if math.isnan(v) else _fmt(value, v)
            dark = not math.isnan(v) and _luminance(image.cmap(norm(v))) < 0.5
            ax.text(j, i, text, ha="center", va="center", fontsize="small", color="white" if dark else "black")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [f"{t:g}" for t in grid.index])
    n = int(table["n_runs"].max())
    hatched = "; hatched: not exact" if (table["n_exact"] != table["n_runs"]).any() else ""
    ax.set(
        xlabel="iteration cap" + (" (0: return the starting prompt)" if 0 in set(grid.columns) else ""),
        ylabel="finish threshold (1-10)",
        title=f"{title} (n={n} runs{hatched})",
    )
    return ax


_VALUE_SHORT = {
    "grounded_mean": "dev accuracy",
    "tokens_mean": "tokens per run",
    "cost_usd_mean": "USD per run",
    "stopped_early": "stopped early",
}
"""Panel-title names of the values (the colour bar carries the full name)."""

_VALUE_NAMES = {
    "grounded_mean": "mean dev accuracy of the returned prompt",
    "tokens_mean": "mean tokens per run",
    "cost_usd_mean": "mean cost per run (USD)",
    "stopped_early": "fraction stopped early",
}


def _fmt(value: str, v: float) -> str:
    if value == "tokens_mean":
        return f"{v:,.0f}"
    if value == "cost_usd_mean":
        return f"${v:.2g}"
    return f"{v:.2f}"


def _luminance(rgba: Any) -> float:
    r, g, b = rgba[:3]
    return 0.299 * r + 0.587 * g + 0.114 * b


def plot_counterfactual_grid(table: pd.DataFrame, fig: Figure | None = None) -> Figure:
    """Every configuration of a `counterfactual_stopping` table (column `config`) as a row of two heatmaps:
    the mean dev accuracy of the returned prompt and the mean cost per run (USD when every cost is known and
    some is positive, else tokens). Each kind shares one colour scale across the rows, so equal values look
    equal in every panel."""
    import numpy as np

    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure()
    groups = list(table.groupby("config", sort=True)) if len(table) else []
    if not groups:
        say_why(fig.add_subplot(), "Counterfactual stopping", "no counterfactual table (no grounded scores)")
        return fig
    cost = (
        "cost_usd_mean"
        if table["cost_usd_mean"].notna().all() and (table["cost_usd_mean"] > 0).any()
        else "tokens_mean"
    )
    fig.set_layout_engine("constrained")  # panels, titles and colour bars placed without overlap
    axes = fig.subplots(len(groups), 2, squeeze=False)
    for kind, col in ((("grounded_mean", "viridis"), 0), ((cost, "Greys"), 1)):
        value, cmap = kind
        vals = table[value].astype(float).to_numpy(dtype=float, na_value=np.nan)
        lo, hi = (float(np.nanmin(vals)), float(np.nanmax(vals))) if np.any(~np.isnan(vals)) else (0.0, 1.0)
        lo, hi = colour_range(lo, hi, accuracy=value == "grounded_mean")
        for row, (label, g) in enumerate(groups):
            ax = axes[row, col]
            plot_counterfactual_heatmap(g, value, ax=ax, vmin=lo, vmax=hi, colorbar=False, cmap=cmap)
            # the panel says which configuration; the colour bar under the column says what is drawn
            ax.set_title(
                f"{label}\n{_VALUE_SHORT[value]}, {ax.get_title().rsplit('(', 1)[-1].rstrip(')')}", fontsize="small"
            )
            if row < len(groups) - 1:
                ax.set_xlabel("")
        images = [a.get_images()[0] for a in axes[:, col] if a.get_images()]
        if images:
            fig.colorbar(
                images[0],
                ax=list(axes[:, col]),
                label=_VALUE_NAMES.get(value, value),
                location="bottom",
                shrink=0.9,
                aspect=30,
            )
    return fig


def plot_forest(
    table: pd.DataFrame,
    ax: Axes | None = None,
    null: float = 0.0,
    *,
    title: str = "Estimates with 95% CIs",
    xlabel: str = "estimate with its 95% CI",
) -> Axes:
    """Forest plot: one row per `label` with `estimate` and its [ci_low, ci_high], n (and p_holm when
    present) in the tick label, and a reference line at `null`. An estimate whose CI spans the null is drawn
    hollow and marked "CI spans 0" (inconclusive); one whose CI excludes it but whose Holm-corrected p is
    `analysis.paired.ALPHA` or more is drawn hollow and marked "not after Holm", as the findings say
    (`analysis.paired.standing`). `title` should say what the estimates are."""
    ax = _axes(ax, (8, 0.5 * max(len(table), 1) + 1.8))
    if table.empty or table["estimate"].isna().all():
        return say_why(ax, title, "no estimate to draw (no configuration has a value)")
    rows = table.reset_index(drop=True)
    ys = list(range(len(rows)))[::-1]
    est = rows["estimate"].astype(float)
    lo = (est - rows["ci_low"].astype(float)).clip(lower=0).fillna(0)
    hi = (rows["ci_high"].astype(float) - est).clip(lower=0).fillna(0)
    ax.errorbar(est, ys, xerr=[lo, hi], fmt="none", capsize=4, color="C0")
    holm = rows["p_holm"] if "p_holm" in rows.columns else [None] * len(rows)
    stands = [standing(low, high, p, null) for low, high, p in zip(rows["ci_low"], rows["ci_high"], holm, strict=True)]
    marks = {
        "spans": "; CI spans 0",
        "not_after_holm": "; CI excludes 0, not after Holm",
        "no_variation": "; no variation",
    }
    ax.scatter(est, ys, s=40, zorder=3, color=["white" if st in marks else "C0" for st in stands], edgecolors="C0")
    ax.axvline(null, color="grey", linestyle="--", linewidth=1)
    labels = []
    for r, st in zip(rows.itertuples(), stands, strict=True):
        p = f", p(Holm)={r.p_holm:.3g}" if "p_holm" in rows.columns and not _na(r.p_holm) else ""
        labels.append(f"{r.label} (n={r.n}{p}{marks.get(st, '')})")
    ax.set_yticks(ys, labels)
    ax.set(xlabel=xlabel, title=title)
    ax.grid(alpha=0.3, axis="x")
    if "not_after_holm" in stands:  # a hollow marker whose CI excludes 0: the chart says why
        ax.annotate(HOLM_NOTE, (0, 0), (0, -38), "axes fraction", "offset points", va="top", fontsize="small")
    return ax


HOLM_NOTE = (
    "Hollow: not a finding. A hollow marker whose 95% CI excludes 0: CI excludes 0, but not after Holm's "
    "correction (its Holm-corrected p is 0.05 or more)."
)
"""The forest plot's note under a chart that draws a CI excluding 0 hollow."""


def plot_budget_curve(
    table: pd.DataFrame, value: str = "test", by: str = "config", ax: Axes | None = None, *, budget: str = "tokens"
) -> Axes:
    """Score against spend at equal budget: one line per configuration (`by`) through the mean `value` ("test"
    or "dev") of the prompts the runs would return at each budget point, with its 95% CI as a band (the
    intervals of `analysis.equal_budget`'s table, so band and table agree); hollow markers where some run's
    point is not exact (past the spend of a run its budget stopped). The y axis fits the data; lines that
    coincide stay visible (each its own marker and line style, drawn slightly offset along x)."""
    ax = _axes(ax, (8, 5))
    split = "test" if value == "test" else "dev"
    title = f"Equal budget: {split} accuracy of the prompt\neach run would return, by {budget} spent"
    mean = f"{value}_mean"
    if table.empty or mean not in table.columns or table[mean].isna().all():
        return say_why(ax, title, f"no run has a {split} score at any budget point")
    groups = list(table.groupby(by, sort=True))
    alpha = max(0.05, 0.3 / len(groups))  # overlapping bands stay see-through
    points = table["point"].astype(float)
    step = 0.012 * (points.max() - points.min() or 1.0)
    for k, (label, g) in enumerate(groups):
        g = g.sort_values("point")
        xs = g["point"].astype(float).to_numpy() + (k - (len(groups) - 1) / 2) * step
        ys = g[mean].astype(float).to_numpy(na_value=math.nan)
        lo = g[f"{value}_ci_low"].astype(float).to_numpy(na_value=math.nan)
        hi = g[f"{value}_ci_high"].astype(float).to_numpy(na_value=math.nan)
        exact = (g["n_exact"] == g["n_runs"]).to_numpy(dtype=bool)
        n = int(g["n_runs"].max())
        line = ax.plot(
            xs,
            ys,
            marker="osD^vPX*"[k % 8],
            markersize=5,
            linestyle=("-", "--", ":", "-.")[k % 4],
            label=f"{label} (n={n} runs)",
        )[0]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=alpha, linewidth=0)
        ax.scatter(xs[~exact], ys[~exact], s=40, facecolors="white", edgecolors=line.get_color(), zorder=3)
    ax.set(
        xlabel=f"{budget} spent (the budget point)",
        ylabel=f"mean {split} accuracy (95% CI)",
        title=title,
        ylim=accuracy_limits(table[[mean, f"{value}_ci_low", f"{value}_ci_high"]]),
    )
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def accuracy_limits(values: pd.DataFrame) -> tuple[float, float]:
    """y limits that fit accuracies (means and CI bounds) with a margin, inside [0, 1] (at least 0.1 tall)."""
    present = values.astype(float).to_numpy(na_value=math.nan).ravel()
    present = present[~(present != present)]  # NaN never equals itself
    if not len(present):
        return 0.0, 1.0
    lo, hi = float(present.min()), float(present.max())
    pad = max(0.02, 0.08 * (hi - lo))
    bottom, top = max(0.0, lo - pad), min(1.0, hi + pad)
    if top - bottom < 0.1:
        bottom, top = (max(0.0, top - 0.1), top) if top >= 0.1 else (0.0, 0.1)
    return bottom, top


def _na(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size)
    return new


__all__ = [
    "accuracy_limits",
    "plot_budget_curve",
    "plot_calibration",
    "plot_counterfactual_grid",
    "plot_counterfactual_heatmap",
    "plot_forest",
    "plot_grounded_trajectories",
    "say_why",
]
