"""Charts and a report over sweep results; each chart takes a tidy frame and returns a matplotlib Axes.

The frames are those of `promptlab.results` (see TRAJECTORY_COLUMNS and RUN_COLUMNS). A "configuration"
is the loop plus the sweep's params (every column the documented schema does not define), plus the
generator/critic model columns when they vary. Nothing here calls a model. matplotlib, numpy and
pandas are imported inside the functions; with `ax=None` a chart makes its figure with pyplot (so it
shows inline in Jupyter), `report()` draws on bare `Figure`s and never touches pyplot's state.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.axes import Axes

    from .results import Results

By = str | Sequence[str] | None
_MODEL_COLUMNS = ("generator_model", "critic_model")


# configurations -------------------------------------------------------------------------------
def config_columns(frame: pd.DataFrame) -> list[str]:
    """The columns naming a configuration: loop, the params, and the model columns where they vary."""
    from .results import CELL_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS

    documented = set(TRAJECTORY_COLUMNS) | set(RUN_COLUMNS) | set(CELL_COLUMNS)
    cols = ["loop"] if "loop" in frame.columns else []
    cols += [c for c in frame.columns if c not in documented and c != "loop"]
    cols += [c for c in _MODEL_COLUMNS if c in frame.columns and c not in cols
             and frame[c].nunique(dropna=False) > 1]
    return cols


def config_labels(frame: pd.DataFrame, by: By = "config") -> pd.Series:
    """A readable label per row ("finish_threshold=8, max_iterations=3"), naming only the `by` columns
    that vary in the frame (all of them when none varies)."""
    import pandas as pd

    cols = _by(frame, by)
    if not cols:
        return pd.Series(["all runs"] * len(frame), index=frame.index, dtype="string")
    varying = [c for c in cols if frame[c].nunique(dropna=False) > 1] or cols
    parts = [frame[c].map(lambda v, c=c: f"{c}={_fmt(v)}") for c in varying]
    out = parts[0]
    for p in parts[1:]:
        out = out + ", " + p
    return out.astype("string")


def config_groups(frame: pd.DataFrame, by: By = "config") -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per configuration, ordered by the `by` columns' values (not by label text)."""
    cols = _by(frame, by)
    if frame.empty:
        return []
    if not cols:
        return [("all runs", frame)]
    labels = config_labels(frame, cols)
    return [(str(labels.loc[g.index[0]]), g) for _, g in frame.groupby(cols, dropna=False, sort=True)]


def _by(frame: pd.DataFrame, by: By) -> list[str]:
    cols = config_columns(frame) if by in (None, "config") else [by] if isinstance(by, str) else list(by)
    _need(frame, cols)
    return cols


def _need(frame: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise KeyError(f"column(s) {missing} not in the frame; its columns are {list(frame.columns)}")


def _fmt(value: Any) -> str:
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "NA"
    return f"{value:g}" if isinstance(value, float) else str(value)


# statistics -------------------------------------------------------------------------------------
def bootstrap_ci(values: Sequence[float] | np.ndarray, ci: float = 0.95, n_boot: int = 1000,
                 rng: np.random.Generator | None = None) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; (nan, nan) with fewer than two values."""
    import numpy as np

    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if len(arr) < 2:
        return math.nan, math.nan
    rng = rng if rng is not None else np.random.default_rng(0)
    means = arr[rng.integers(0, len(arr), size=(n_boot, len(arr)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return float(lo), float(hi)


def pareto_front(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows no other row dominates (maximise `y`, minimise `x`), sorted by `x`; rows with a missing
    `x` or `y` are left out, identical points are all kept."""
    _need(frame, [x, y])
    data = frame.dropna(subset=[x, y]).sort_values([x, y], ascending=[True, False], kind="mergesort")
    keep, best_y, best_x = [], -math.inf, math.nan
    for label, xv, yv in zip(data.index, data[x].astype(float), data[y].astype(float), strict=True):
        if yv > best_y or (yv == best_y and xv == best_x):
            keep.append(label)
            best_y, best_x = yv, xv
    return data.loc[keep]


# charts -----------------------------------------------------------------------------------------
def plot_trajectories(traj: pd.DataFrame, by: By = "config", ax: Axes | None = None, ci: float | None = 0.95,
                      n_boot: int = 1000, seed: int = 0, carry_forward: bool = False, max_bands: int = 6) -> Axes:
    """Mean iteration score (`average`) per iteration for each configuration, with a bootstrap band.

    Args:
        traj: The trajectories frame (or its `iteration_frame`).
        by: "config" (loop + params), a column, or a list of columns.
        ax: Axes to draw on (a new figure when None).
        ci: Confidence level of the band over runs (None: no band). A point with one run has no band.
        n_boot: Bootstrap resamples.
        seed: Seed of the resampling.
        carry_forward: Count a run that stopped early with its last average at later iterations (without
            it, later iterations average only the runs still going).
        max_bands: Draw the bands only up to this many configurations (more would hide the lines).

    Returns:
        The Axes.
    """
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    from .results import iteration_frame

    _need(traj, ["cell_id", "run_id", "iteration", "average"])
    its = iteration_frame(traj) if "criterion" in traj.columns else traj
    ax = _axes(ax, (8, 4.5))
    rng = np.random.default_rng(seed)
    groups = config_groups(its, by)
    for k, (label, group) in enumerate(groups):
        table = group.set_index(["cell_id", "run_id", "iteration"])["average"].astype(float).unstack("iteration")
        iters = np.asarray(table.columns, dtype=int)
        vals = table.to_numpy(dtype=float, na_value=np.nan, copy=True)
        if carry_forward:
            last = group.groupby(["cell_id", "run_id"])["iteration"].max().reindex(table.index).to_numpy()
            for i, stop in enumerate(last):
                vals[i, iters > stop] = vals[i, iters == stop][0]
        means = np.array([np.nanmean(c) if np.any(~np.isnan(c)) else np.nan for c in vals.T])
        line, = ax.plot(iters, means, label=f"{label} (n={len(table)})", **_style(k, len(groups)))
        if ci is not None and len(groups) <= max_bands:
            bands = np.array([bootstrap_ci(c, ci, n_boot, rng) for c in vals.T]).reshape(-1, 2)
            ax.fill_between(iters, bands[:, 0], bands[:, 1], color=line.get_color(), alpha=0.2, linewidth=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    band = f", {ci:.0%} bootstrap CI over runs" if ci is not None and len(groups) <= max_bands else ""
    ax.set(xlabel="iteration", ylabel="mean iteration score", title=f"Score by iteration (mean{band})")
    _legend(ax, "configuration (runs)")
    return ax


def plot_pairing_heatmap(runs: pd.DataFrame, row: str = "generator_model", col: str = "critic_model",
                         value: str = "final_score", ax: Axes | None = None) -> Axes:
    """Mean `value` for each `row` x `col` pairing, each cell annotated with its mean and run count."""
    import numpy as np
    import pandas as pd

    _need(runs, [row, col, value])
    rows = sorted({_fmt(v) for v in runs[row]})
    cols = sorted({_fmt(v) for v in runs[col]})
    mean = np.full((len(rows), len(cols)), np.nan)
    count = np.zeros((len(rows), len(cols)), dtype=int)
    keys = zip(runs[row].map(_fmt), runs[col].map(_fmt), runs[value].astype("Float64"), strict=True)
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
    for i in range(len(rows)):
        for j in range(len(cols)):
            text = f"{mean[i, j]:.2f}\nn={count[i, j]}" if count[i, j] else f"no score\nn={count[i, j]}"
            dark = not np.isnan(mean[i, j]) and mean[i, j] < mid
            ax.text(j, i, text, ha="center", va="center", fontsize=9, color="white" if dark else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=20, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set(xlabel=col, ylabel=row, title=f"Mean {value} by pairing")
    ax.figure.colorbar(image, ax=ax, label=f"mean {value}")
    return ax


def plot_score_vs_cost(runs: pd.DataFrame, x: str = "cost_usd", y: str = "final_score", by: By = "config",
                       ax: Axes | None = None) -> Axes:
    """Each run's `y` against its `x` (cost_usd or tokens), coloured by configuration, with the Pareto
    front (highest score for the least cost) drawn as a step line through its points."""
    _need(runs, [x, y])
    data = runs.dropna(subset=[x, y])
    ax = _axes(ax, (8, 4.5))
    groups = config_groups(data, by)
    for k, (label, group) in enumerate(groups):
        style = _style(k, len(groups))
        ax.scatter(group[x].astype(float), group[y].astype(float), alpha=0.7, label=label, color=style["color"],
                   marker=style["marker"])
    front = pareto_front(data, x, y)
    if len(front):
        ax.step(front[x].astype(float), front[y].astype(float), where="post", color="black", linestyle="--",
                linewidth=1, label="Pareto front")
        ax.scatter(front[x].astype(float), front[y].astype(float), s=120, facecolors="none",
                   edgecolors="black", linewidths=1.2)
    ax.set(xlabel=x, ylabel=y, title=f"{y} vs {x} (front: max {y}, min {x})")
    _legend(ax, "configuration")
    return ax


def plot_stop_reasons(runs: pd.DataFrame, by: By = "config", ax: Axes | None = None) -> Axes:
    """Stacked horizontal bars: how many runs of each configuration stopped for each reason."""
    from matplotlib.ticker import MaxNLocator

    _need(runs, ["stop_reason"])
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


def plot_final_by(runs: pd.DataFrame, x: str = "finish_threshold", hue: str | None = "max_iterations",
                  y: str = "final_score", ax: Axes | None = None, ci: float = 0.95, n_boot: int = 1000,
                  seed: int = 0) -> Axes:
    """Mean `y` at each value of `x`, one line per `hue` value, with bootstrap error bars over runs."""
    import numpy as np
    import pandas as pd

    _need(runs, [x, y] + ([hue] if hue else []))
    ax = _axes(ax, (8, 4.5))
    rng = np.random.default_rng(seed)
    numeric = pd.api.types.is_numeric_dtype(runs[x])
    xkey = runs[x].astype(float) if numeric else runs[x].map(_fmt)
    levels: list[Any] = sorted(xkey.dropna().unique().tolist())
    position = {v: float(v) if numeric else float(i) for i, v in enumerate(levels)}
    span = max(position.values()) - min(position.values()) if numeric and len(levels) > 1 else 8.0
    groups = list(runs.groupby(hue, dropna=False, sort=True)) if hue else [("", runs)]
    for k, (level, group) in enumerate(groups):
        stats = []
        for xv, vals in group[y].groupby(xkey.loc[group.index], sort=True):
            v = vals.astype(float).dropna().to_numpy()
            if len(v):
                stats.append((position[xv], float(v.mean()), *bootstrap_ci(v, ci, n_boot, rng)))
        if not stats:
            continue
        a = np.array(stats)
        dodge = (k - (len(groups) - 1) / 2) * 0.015 * span
        ax.errorbar(a[:, 0] + dodge, a[:, 1], yerr=np.vstack([a[:, 1] - a[:, 2], a[:, 3] - a[:, 1]]), marker="o",
                    capsize=3, label=f"{hue}={_fmt(level)}" if hue else "all runs")
    if not numeric or len(levels) <= 12:
        ax.set_xticks(list(position.values()), [_fmt(v) for v in levels])
    ax.set(xlabel=x, ylabel=f"mean {y}", title=f"{y} by {x}" + (f" and {hue}" if hue else "")
           + f" ({ci:.0%} bootstrap CI)")
    _legend(ax, None)
    return ax


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size)
    return new


def _style(i: int, n: int) -> dict[str, Any]:
    """Colour, marker and line style of the i-th of n series: distinct up to 20, then varied by style."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    size = int(cmap.N)
    turn = i // size
    return {"color": cmap(i % size), "marker": "os^Dv"[turn % 5], "linestyle": ("-", "--", ":", "-.")[turn % 4]}


def _legend(ax: Axes, title: str | None) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize="small")
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)


# summary and report -----------------------------------------------------------------------------
def summary_table(results: Results | pd.DataFrame, by: By = None) -> pd.DataFrame:
    """One row per configuration: runs, final and best score, iterations, stop reasons, tokens, cost, errors.

    Args:
        results: A `Results` or a runs frame.
        by: Columns of a configuration (default: loop + params, see `config_columns`).

    Returns:
        A frame with the `by` columns then: runs, final_score_n (runs with a final score),
        final_score_mean, final_score_sd, best_score_mean, iterations_mean, stop_reasons ("reason: count"),
        tokens_mean, tokens_total, cost_usd_total (<NA> when some run's cost is unknown), n_errors,
        runs_with_errors.
    """
    import pandas as pd

    runs = results if isinstance(results, pd.DataFrame) else results.runs
    cols = _by(runs, by)
    out_cols = [*cols, "runs", "final_score_n", "final_score_mean", "final_score_sd", "best_score_mean",
                "iterations_mean", "stop_reasons", "tokens_mean", "tokens_total", "cost_usd_total", "n_errors",
                "runs_with_errors"]
    rows = []
    for key, g in (runs.groupby(cols, dropna=False, sort=True) if cols and len(runs) else []):
        key = key if isinstance(key, tuple) else (key,)
        reasons = g["stop_reason"].fillna("").replace("", "(none)").value_counts()
        rows.append([*key, len(g), int(g["final_score"].notna().sum()), g["final_score"].mean(),
                     g["final_score"].std(), g["best_score"].mean(), g["iterations_used"].mean(),
                     ", ".join(f"{r}: {n}" for r, n in reasons.items()), g["tokens"].mean(), g["tokens"].sum(),
                     pd.NA if g["cost_usd"].isna().any() else g["cost_usd"].sum(), g["n_errors"].sum(),
                     int((g["n_errors"] > 0).sum())])
    table = pd.DataFrame(rows, columns=out_cols)
    for c in ("final_score_mean", "final_score_sd", "best_score_mean", "iterations_mean", "tokens_mean",
              "cost_usd_total"):
        table[c] = table[c].astype("Float64")
    for c in ("runs", "final_score_n", "tokens_total", "n_errors", "runs_with_errors"):
        table[c] = table[c].astype("Int64")
    return table


class Report(dict[str, Path]):
    """The files `report()` wrote, by file name; `.skipped` says which charts were not drawn and why."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, str] = {}


def report(results_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None) -> Report:
    """Load a results directory and write its charts, summary.csv and summary.md.

    Charts: trajectories.png, pairings.png, score_vs_cost.png, stop_reasons.png, final_by_threshold.png;
    one whose columns are absent or that has nothing to compare is skipped, with the reason in
    `Report.skipped` and in summary.md.

    Args:
        results_dir: The sweep's results directory.
        out_dir: Where to write (default `<results_dir>/report`).

    Returns:
        A `Report`: file name -> path of every file written.
    """
    from matplotlib.figure import Figure

    from .results import load

    res = load(results_dir)
    out = Path(out_dir) if out_dir is not None else Path(results_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    runs, traj, written = res.runs, res.trajectories, Report()
    table = summary_table(res)

    def chart(name: str, why_not: str | None, draw: Any, size: tuple[float, float]) -> None:
        if why_not:
            written.skipped[name] = why_not
            return
        fig = Figure(figsize=size)
        draw(fig)
        fig.savefig(out / name, dpi=110, bbox_inches="tight")
        written[name] = out / name

    no_runs = "no runs in ok cells" if runs.empty else None
    n_configs = len(config_groups(traj))
    facets = [c for c in config_columns(traj) if traj[c].nunique(dropna=False) > 1] if n_configs > 8 else []

    def trajectories(fig: Figure) -> None:
        if len(facets) < 2:  # one line per configuration
            plot_trajectories(traj, ax=fig.add_subplot())
            return
        for ax, col in zip(fig.subplots(len(facets), 1, squeeze=False, gridspec_kw={"hspace": 0.55})[:, 0], facets, strict=True):
            plot_trajectories(traj, by=[col], ax=ax)  # too many configurations: one panel per parameter
            ax.set_title(f"Score by iteration, by {col} (pooled over the other parameters)")

    chart("trajectories.png", "no scored iterations" if traj.empty or traj["average"].isna().all() else None,
          trajectories, (9, 5 if len(facets) < 2 else 3.2 * len(facets)))
    pairs = runs[list(_MODEL_COLUMNS)].drop_duplicates()
    chart("pairings.png", no_runs or (f"a single generator/critic pairing ({_fmt(pairs.iloc[0, 0])} x "
                                      f"{_fmt(pairs.iloc[0, 1])}): nothing to compare" if len(pairs) == 1 else None),
          lambda fig: plot_pairing_heatmap(runs, ax=fig.add_subplot()), (2 * runs["critic_model"].nunique() + 4,
                                                          runs["generator_model"].nunique() + 3))
    cost_x = next((c for c in ("cost_usd", "tokens") if (runs[c].fillna(0) > 0).any()), None)
    chart("score_vs_cost.png", no_runs or ("no run has a cost or token count" if cost_x is None else None)
          or ("no final scores" if runs["final_score"].isna().all() else None),
          lambda fig: plot_score_vs_cost(runs, x=cost_x or "tokens", ax=fig.add_subplot()), (9, 5))
    chart("stop_reasons.png", no_runs, lambda fig: plot_stop_reasons(runs, ax=fig.add_subplot()),
          (9, 0.5 * len(table) + 3))
    hue = "max_iterations" if "max_iterations" in runs.columns and runs["max_iterations"].nunique() > 1 else None
    threshold_why = ("the sweep has no finish_threshold column" if "finish_threshold" not in runs.columns else
                     "one finish_threshold and one max_iterations value: nothing to compare"
                     if runs["finish_threshold"].nunique() < 2 and hue is None else None)
    chart("final_by_threshold.png", no_runs or threshold_why,
          lambda fig: plot_final_by(runs, x="finish_threshold", hue=hue, ax=fig.add_subplot()), (9, 5))

    table.to_csv(out / "summary.csv", index=False)
    written["summary.csv"] = out / "summary.csv"
    (out / "summary.md").write_text(_summary_md(res, table, written))
    written["summary.md"] = out / "summary.md"
    return written


def _summary_md(res: Results, table: pd.DataFrame, written: Report) -> str:
    counts = res.cells["status"].value_counts().to_dict()
    lines = [f"# Sweep report: {res.path}", "",
             f"Cells: {len(res.cells)} ({', '.join(f'{n} {s}' for s, n in counts.items()) or 'none'}). "
             f"Runs in ok cells: {len(res.runs)}.", "", "## Per configuration", "", _markdown(table), ""]
    bad = res.cells[res.cells["status"] != "ok"]
    if len(bad):
        lines += ["## Cells not included", ""]
        lines += [f"- `{r.cell_id}` ({r.status}): {_fmt(r.error_kind)}: {_fmt(r.error)}" for r in bad.itertuples()]
        lines.append("")
    lines += ["## Charts", ""] + [f"- [{n}]({n})" for n in written if n.endswith(".png")]
    lines += [f"- {n} not drawn: {why}" for n, why in written.skipped.items()]
    return "\n".join(lines) + "\n"


def _markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "(no runs)"

    def cell(v: Any) -> str:
        text = _fmt(v) if not isinstance(v, float) or math.isnan(v) else f"{v:.4g}"
        return text.replace("|", "\\|")

    head = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *body])
