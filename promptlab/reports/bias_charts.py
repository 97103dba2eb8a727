"""Charts of the critic-bias probes (`promptlab.analysis.bias`), from the logs; nothing here calls a model.

- `plot_length_bias(frame)`: one critic's score against candidate length at equal dev accuracy: each
  candidate's length and score as deviations from the mean of the candidates with the same dev accuracy, with
  the length probe's slope and its CI (the bias table's, simultaneous over the critic's probes).
- `plot_inflation(frame)`: one critic's score change against the dev-accuracy change, one point per step of a
  run, with the inflation probe's estimate (the score change at no accuracy change) and its CI at x = 0.
- `plot_biases(frames, biases, fig)`: both, one row per critic (a critic's own score is drawn only within
  that critic's panels: critics' scales differ).
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from ..results.labels import model_names
from .charts import say_why

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LENGTH_TITLE = "Score vs length at equal accuracy"
INFLATION_TITLE = "Score change vs accuracy change per step"


def plot_length_bias(frame: pd.DataFrame, estimate: Any = None, ax: Axes | None = None) -> Axes:
    """One critic's logged candidates (columns score, accuracy, chars): deviations from the mean of their dev
    accuracy level; `estimate` (a `bias_table` row: estimate, ci_low, ci_high) draws the probe's slope."""
    ax = ax if ax is not None else _axes()
    d = frame.dropna(subset=["score", "accuracy", "chars"])
    level = d.groupby(d["accuracy"].round(9))
    dx = (d["chars"] - level["chars"].transform("mean")).round(9)  # float noise is no deviation
    dy = (d["score"] - level["score"].transform("mean")).round(9)
    keep = level["score"].transform("size") > 1
    if not keep.any():
        return say_why(ax, LENGTH_TITLE, "no two candidates share a dev accuracy")
    ax.scatter(dx[keep], dy[keep], s=18, alpha=0.6, color="#4c72b0")
    _line(ax, dx[keep], estimate, per=100, label="slope per 100 characters")
    ax.axhline(0, color="#999", lw=0.8)
    ax.set(title=LENGTH_TITLE, xlabel="characters minus the mean at its accuracy", ylabel="score minus the mean")
    return ax


def plot_inflation(frame: pd.DataFrame, estimate: Any = None, ax: Axes | None = None) -> Axes:
    """One critic's steps along each run (columns run_id, iteration, score, accuracy); `estimate` (a
    `bias_table` row) draws the inflation per step at no accuracy change, with its CI."""
    ax = ax if ax is not None else _axes()
    d = frame.dropna(subset=["score", "accuracy"]).sort_values(["run_id", "iteration"])
    steps = d.groupby("run_id", sort=False)[["score", "accuracy"]].diff().dropna().round(9)
    if steps.empty:
        return say_why(ax, INFLATION_TITLE, "no run has two scored iterations")
    ax.scatter(steps["accuracy"], steps["score"], s=18, alpha=0.6, color="#4c72b0")
    ax.axhline(0, color="#999", lw=0.8)
    ax.axvline(0, color="#999", lw=0.8)
    if _has_ci(estimate):
        lo, hi = float(estimate["ci_low"]), float(estimate["ci_high"])
        ax.errorbar(
            [0],
            [float(estimate["estimate"])],
            yerr=[[float(estimate["estimate"]) - lo], [hi - float(estimate["estimate"])]],
            fmt="D",
            color="#c44e52",
            capsize=4,
            label=f"inflation per step {float(estimate['estimate']):+.2f} [{lo:+.2f}, {hi:+.2f}]",
        )
        ax.legend(loc="best", fontsize="small")
    ax.set(title=INFLATION_TITLE, xlabel="dev accuracy change", ylabel="critic score change")
    return ax


def plot_biases(frames: dict[str, pd.DataFrame], biases: pd.DataFrame | None, fig: Figure) -> Figure:
    """Both charts for every critic of the logged frame (`frames["length"]`), one row per critic."""
    logged = frames["length"]
    critics = sorted(logged["critic_model"].dropna().unique())
    names = model_names(critics)  # as every legend and table names a critic
    fig.set_layout_engine("constrained")
    axes = fig.subplots(max(len(critics), 1), 2, squeeze=False)
    for row, critic in zip(axes, critics, strict=False):
        mine = logged[logged["critic_model"] == critic]
        rows = biases[biases["critic_model"] == critic].set_index("probe") if biases is not None else None

        def get(probe: str, rows: Any = rows) -> Any:
            return rows.loc[probe].to_dict() if rows is not None and probe in rows.index else None

        plot_length_bias(mine, get("length"), ax=row[0])
        plot_inflation(mine, get("inflation"), ax=row[1])
        for ax in row:
            ax.set_title("\n".join([ax.get_title(), *textwrap.wrap(names[str(critic)], 60)]), fontsize="medium")
    return fig


def _line(ax: Axes, xs: Any, estimate: Any, *, per: float, label: str) -> None:
    """The probe's slope through the origin of the deviations, labelled with its CI."""
    import numpy as np

    if not _has_ci(estimate):
        return
    slope = float(estimate["estimate"]) / per
    x = np.array([float(xs.min()), float(xs.max())])
    ax.plot(
        x,
        slope * x,
        color="#c44e52",
        label=f"{label} {float(estimate['estimate']):+.2f} "
        f"[{float(estimate['ci_low']):+.2f}, {float(estimate['ci_high']):+.2f}]",
    )
    ax.legend(loc="best", fontsize="small")


def _has_ci(estimate: Any) -> bool:
    """Whether a `bias_table` row has an estimate and a CI to draw."""
    import pandas as pd

    return estimate is not None and not any(pd.isna(estimate.get(k)) for k in ("estimate", "ci_low", "ci_high"))


def _axes() -> Axes:
    import matplotlib.pyplot as plt

    return plt.subplots()[1]


__all__ = ["INFLATION_TITLE", "LENGTH_TITLE", "plot_biases", "plot_inflation", "plot_length_bias"]
