"""Charts over sweep results (the summary table and the report are in `promptlab.reports.summary`); each chart takes a tidy frame and returns a matplotlib Axes.

The frames are those of `promptlab.results` (see TRAJECTORY_COLUMNS and RUN_COLUMNS). A "configuration"
is the loop plus the sweep's params (every column the documented schema does not define), plus the
generator/critic model columns when they vary. Nothing here calls a model. matplotlib, numpy and
pandas are imported inside the functions; with `ax=None` a chart makes its figure with pyplot (so it
shows inline in Jupyter), `report()` draws on bare `Figure`s and never touches pyplot's state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..results.configs import By, config_groups, need_columns
from ..results.labels import fmt_value

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes


def pareto_front(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows no other row dominates (maximise `y`, minimise `x`), sorted by `x`; rows with a missing
    `x` or `y` are left out, identical points are all kept."""
    need_columns(frame, [x, y])
    data = frame.dropna(subset=[x, y]).sort_values([x, y], ascending=[True, False], kind="mergesort")
    keep, best_y, best_x = [], -math.inf, math.nan
    for label, xv, yv in zip(data.index, data[x].astype(float), data[y].astype(float), strict=True):
        if yv > best_y or (yv == best_y and xv == best_x):
            keep.append(label)
            best_y, best_x = yv, xv
    return data.loc[keep]


# charts -----------------------------------------------------------------------------------------
VALUE_LABELS = {
    "average": "critic score (the iteration's average, 1-10)",
    "critic_score": "critic score (the critic's own, 1-10)",
    "decision_score": "decision score (what the router used, 1-10)",
    "grounded_score": "dev accuracy (grounded score, 0-1)",
    "final_test_score": "test accuracy of the final prompt (0-1)",
    "final_score": "critic's score of the final prompt (1-10)",
    "delta": "test-split gain, final minus starting prompt",
}
"""How a trajectories column is named on an axis and in a title (other columns are named as they are)."""


def plot_trajectories(
    traj: pd.DataFrame,
    by: By = "config",
    ax: Axes | None = None,
    ci: float | None = 0.95,
    carry_forward: bool = False,
    max_bands: int = 6,
    value: str = "average",
) -> Axes:
    """Mean `value` per iteration for each configuration, with a bootstrap band over runs.

    Configurations that coincide stay visible: each has its own marker and line style and is drawn slightly
    offset along the x axis (ticks stay on the whole iterations). Iteration 0, when present, is the starting
    prompt scored as candidate 0.

    Args:
        traj: The trajectories frame (or its `iteration_frame`).
        by: "config" (loop + params), a column, or a list of columns.
        ax: Axes to draw on (a new figure when None).
        ci: Confidence level of the band over runs (None: no band): `promptlab.eval.stats.bootstrap_ci`, the
            interval the tables use. A point with one run has no band.
        carry_forward: Count a run that stopped early with its last value at later iterations (without
            it, later iterations average only the runs still going).
        max_bands: Draw the bands only up to this many configurations (more would hide the lines).
        value: The column drawn (default `average`, the critic's iteration score).

    Returns:
        The Axes.
    """
    import numpy as np

    from ..results.frames import iteration_frame

    need_columns(traj, ["cell_id", "run_id", "iteration", value])
    its = iteration_frame(traj) if "criterion" in traj.columns else traj
    ax = _axes(ax, (8, 4.5))
    groups = config_groups(its, by)
    offsets = _offsets(len(groups))
    for k, (label, group) in enumerate(groups):
        table = group.set_index(["cell_id", "run_id", "iteration"])[value].astype(float).unstack("iteration")
        iters = np.asarray(table.columns, dtype=int)
        vals = table.to_numpy(dtype=float, na_value=np.nan, copy=True)
        if carry_forward:
            last = group.groupby(["cell_id", "run_id"])["iteration"].max().reindex(table.index).to_numpy()
            for i, stop in enumerate(last):
                vals[i, iters > stop] = vals[i, iters == stop][0]
        means = np.array([np.nanmean(c) if np.any(~np.isnan(c)) else np.nan for c in vals.T])
        (line,) = ax.plot(iters + offsets[k], means, label=f"{label} (n={len(table)})", **_style(k, len(groups)))
        if ci is not None and len(groups) <= max_bands:
            bands = np.array([_band(c, ci) for c in vals.T]).reshape(-1, 2)
            ax.fill_between(
                iters + offsets[k], bands[:, 0], bands[:, 1], color=line.get_color(), alpha=0.15, linewidth=0
            )
    iterations = sorted(int(i) for i in its["iteration"].dropna().unique())
    integer_ticks(ax, iterations)
    band = f"; band: {ci:.0%} bootstrap CI over runs" if ci is not None and len(groups) <= max_bands else ""
    what = VALUE_LABELS.get(value, value)
    ax.set(
        xlabel="iteration" + (" (0 = the starting prompt)" if 0 in iterations else ""),
        ylabel=f"mean {what}",
        title=f"Mean {what.split(' (')[0]} by iteration, per configuration{band}",
    )
    _legend(ax, "configuration (runs)")
    return ax


def integer_ticks(ax: Axes, values: Sequence[int]) -> None:
    """Ticks on whole numbers only: each value when there are at most 20, else a whole-number locator."""
    from matplotlib.ticker import MaxNLocator

    if values and len(values) <= 20:
        ax.set_xticks(list(values), [str(v) for v in values])
        ax.set_xlim(min(values) - 0.5, max(values) + 0.5)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _offsets(n: int, width: float = 0.24) -> list[float]:
    """Horizontal offsets of n series spread over `width` (0 for a single series) so coinciding ones stay visible."""
    if n < 2:
        return [0.0] * n
    return [(k - (n - 1) / 2) * width / (n - 1) for k in range(n)]


def _band(values: Any, ci: float) -> tuple[float, float]:
    """The bootstrap interval of the mean of the present values (NaN, NaN with fewer than two)."""
    import numpy as np

    from ..eval.stats import bootstrap_ci

    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if len(arr) < 2:
        return math.nan, math.nan
    return bootstrap_ci(arr.tolist(), ci)


def plot_pairing_heatmap(
    runs: pd.DataFrame,
    row: str = "generator_model",
    col: str = "critic_model",
    value: str = "final_score",
    ax: Axes | None = None,
) -> Axes:
    """Mean `value` for each `row` x `col` pairing, each cell annotated with its mean and run count.

    A pairing that was never run is hatched and labelled "not run"; one whose runs all lack a score says
    "no score" with its run count, so the two are never confused."""
    import numpy as np
    import pandas as pd
    from matplotlib.patches import Rectangle

    need_columns(runs, [row, col, value])
    rows = sorted({fmt_value(v) for v in runs[row]})
    cols = sorted({fmt_value(v) for v in runs[col]})
    mean = np.full((len(rows), len(cols)), np.nan)
    count = np.zeros((len(rows), len(cols)), dtype=int)
    keys = zip(runs[row].map(fmt_value), runs[col].map(fmt_value), runs[value].astype("Float64"), strict=True)
    cells: dict[tuple[str, str], list[float]] = {}
    for r, c, v in keys:
        cells.setdefault((r, c), [])
        if not pd.isna(v):
            cells[(r, c)].append(float(v))
    for (r, c), vs in cells.items():
        i, j = rows.index(r), cols.index(c)
        count[i, j] = len(vs)
        mean[i, j] = float(np.mean(vs)) if vs else np.nan
    ax = _axes(ax, (1.8 * len(cols) + 3, 1.0 * len(rows) + 2))
    image = ax.imshow(np.ma.masked_invalid(mean), cmap="viridis", aspect="auto")
    present = mean[~np.isnan(mean)]
    mid = (present.min() + present.max()) / 2 if len(present) else 0.0
    runs_in = {key: 0 for key in cells}
    for r, c in zip(runs[row].map(fmt_value), runs[col].map(fmt_value), strict=True):
        runs_in[(r, c)] += 1
    counts = {int(count[rows.index(r), cols.index(c)]) for (r, c) in runs_in}  # every pairing that ran
    same_n = len(counts) == 1 and 0 not in counts
    for i in range(len(rows)):
        for j in range(len(cols)):
            ran = runs_in.get((rows[i], cols[j]), 0)
            if not ran:  # this pairing was never run: hatched, and said so
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#999"))
                text = "not run"
            elif count[i, j]:  # one number per cell when every pairing has the same n (then in the title)
                text = f"{mean[i, j]:.2f}" if same_n else f"{mean[i, j]:.2f}\nn={count[i, j]}"
            else:  # runs, but none with a score
                text = f"no score\n0 of {ran} runs"
            dark = not np.isnan(mean[i, j]) and mean[i, j] < mid
            ax.text(j, i, text, ha="center", va="center", fontsize=9, color="white" if dark else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=20, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set(
        xlabel=col, ylabel=row, title=f"Mean {value} by pairing" + (f" (n={counts.pop()} runs each)" if same_n else "")
    )
    ax.figure.colorbar(image, ax=ax, label=f"mean {value}")
    return ax


def plot_score_vs_cost(
    runs: pd.DataFrame, x: str = "cost_usd", y: str = "final_score", by: By = "config", ax: Axes | None = None
) -> Axes:
    """Each run's `y` against its `x` (cost_usd or tokens), coloured by configuration, with the Pareto
    front (highest score for the least cost) drawn as a step line through its points. Compare configurations
    by a grounded `y` (final_test_score); a critic's own final_score only within one critic
    (`promptlab.reports.by_critic.run_measure` picks). Configurations are drawn slightly apart along x, so
    runs of equal cost stay visible."""
    need_columns(runs, [x, y])
    data = runs.dropna(subset=[x, y])
    ax = _axes(ax, (8, 4.5))
    groups = config_groups(data, by)
    xs = data[x].astype(float)
    dodge = 0.01 * (float(xs.max() - xs.min()) or float(xs.abs().max()) or 1.0) if len(xs) else 0.0
    for k, (label, group) in enumerate(groups):
        style = _style(k, len(groups))
        ax.scatter(
            group[x].astype(float) + (k - (len(groups) - 1) / 2) * dodge,
            group[y].astype(float),
            alpha=0.7,
            label=label,
            color=style["color"],
            marker=style["marker"],
        )
    front = pareto_front(data, x, y)
    if len(front):
        ax.step(
            front[x].astype(float),
            front[y].astype(float),
            where="post",
            color="black",
            linestyle="--",
            linewidth=1,
            label="Pareto front",
        )
        ax.scatter(
            front[x].astype(float), front[y].astype(float), s=120, facecolors="none", edgecolors="black", linewidths=1.2
        )
    what = VALUE_LABELS.get(y, y)
    ax.set(xlabel=x, ylabel=what, title=f"{what.split(' (')[0]} vs {x} (Pareto front: most for least)")
    _legend(ax, "configuration")
    return ax


def plot_stop_reasons(runs: pd.DataFrame, by: By = "config", ax: Axes | None = None) -> Axes:
    """Stacked horizontal bars: how many runs of each configuration stopped for each reason."""
    from matplotlib.ticker import MaxNLocator

    need_columns(runs, ["stop_reason"])
    reasons = runs["stop_reason"].fillna("").replace("", "(none)")
    order = reasons.value_counts().index.tolist()
    groups = config_groups(runs, by)
    counts = [reasons.loc[g.index].value_counts() for _, g in groups]
    ax = _axes(ax, (8, 0.6 * len(groups) + 2))
    left = [0] * len(groups)
    for reason in order:
        widths = [int(c.get(reason, 0)) for c in counts]
        bars = ax.barh([label for label, _ in groups], widths, left=left, label=str(reason))
        ax.bar_label(bars, labels=[str(w) if w else "" for w in widths], label_type="center", fontsize=9)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.invert_yaxis()
    ax.set(xlabel="runs", ylabel="", title="Stop reasons per configuration")
    _legend(ax, "stop reason")
    return ax


def plot_final_by(
    runs: pd.DataFrame,
    x: str = "finish_threshold",
    hue: str | None = "max_iterations",
    y: str = "final_score",
    ax: Axes | None = None,
    ci: float = 0.95,
) -> Axes:
    """Mean `y` at each value of `x`, one line per `hue` value, with bootstrap error bars over runs
    (`promptlab.eval.stats.bootstrap_ci`, the interval the tables use; a point with one run has none)."""
    import numpy as np
    import pandas as pd

    need_columns(runs, [x, y] + ([hue] if hue else []))
    ax = _axes(ax, (8, 4.5))
    numeric = pd.api.types.is_numeric_dtype(runs[x])
    xkey = runs[x].astype(float) if numeric else runs[x].map(fmt_value)
    levels: list[Any] = sorted(xkey.dropna().unique().tolist())
    position = {v: float(v) if numeric else float(i) for i, v in enumerate(levels)}
    span = max(position.values()) - min(position.values()) if numeric and len(levels) > 1 else 8.0
    groups = list(runs.groupby(hue, dropna=False, sort=True)) if hue else [("", runs)]
    for k, (level, group) in enumerate(groups):
        stats = []
        for xv, vals in group[y].groupby(xkey.loc[group.index], sort=True):
            v = vals.astype(float).dropna().to_numpy()
            if len(v):
                stats.append((position[xv], float(v.mean()), *_band(v, ci)))
        if not stats:
            continue
        a = np.array(stats)
        dodge = (k - (len(groups) - 1) / 2) * 0.015 * span
        # clipped at 0: equal values give a band on the mean, a rounding below or above it
        yerr = np.clip(np.nan_to_num(np.vstack([a[:, 1] - a[:, 2], a[:, 3] - a[:, 1]])), 0, None)
        ax.errorbar(
            a[:, 0] + dodge,
            a[:, 1],
            yerr=yerr,
            capsize=3,
            label=f"{hue}={fmt_value(level)}" if hue else "all runs",
            **_style(k, len(groups)),
        )
    if not numeric or len(levels) <= 12:
        ax.set_xticks(list(position.values()), [fmt_value(v) for v in levels])
    ax.set(
        xlabel=x,
        ylabel=f"mean {y}",
        title=f"Mean {y} by {x}" + (f", one line per {hue}" if hue else "") + f" ({ci:.0%} bootstrap CI over runs)",
    )
    _legend(ax, None)
    return ax


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size)
    return new


def _style(i: int, n: int) -> dict[str, Any]:
    """Colour, marker and line style of the i-th of n series: colours distinct up to 20, and markers and line
    styles that differ between neighbours, so series drawn on top of each other can still be told apart."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return {
        "color": cmap(i % int(cmap.N)),
        "marker": "osD^vPX*"[i % 8],
        "linestyle": ("-", "--", ":", "-.")[i % 4],
        "markersize": 6,
    }


def _legend(ax: Axes, title: str | None) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize="small")
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)


def colour_range(lo: float, hi: float, *, accuracy: bool = False) -> tuple[float, float]:
    """A colour scale for values from `lo` to `hi`: as it is when they differ; around the one value when all are
    equal (0.1 wide for an accuracy, kept inside [0, 1]; else 10% of it, at least 1), never a 1e-9 sliver."""
    if hi > lo:
        return lo, hi
    if accuracy:
        low = min(max(0.0, lo - 0.05), 0.9)
        return low, low + 0.1
    pad = max(abs(lo) * 0.05, 0.5)
    low = max(0.0, lo - pad) if lo >= 0 else lo - pad
    return low, low + 2 * pad


__all__ = [
    "colour_range",
    "VALUE_LABELS",
    "integer_ticks",
    "pareto_front",
    "plot_final_by",
    "plot_pairing_heatmap",
    "plot_score_vs_cost",
    "plot_stop_reasons",
    "plot_trajectories",
]
