"""A search tree: one run's candidates by spend and dev score, each joined to the candidate(s) it was made from
(the trajectories' `parents` column; GEPA records it), with the score of what the run would return at each spend.
Candidates kept (a new best, accepted into GEPA's pool, the start) are filled; those rejected on a minibatch are
hollow, at their minibatch score."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..analysis.budget import Unit
from ..results.frames import iteration_frame
from .charts import accuracy_limits

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

KEPT = ("START", "NEW_BEST", "ACCEPTED")
"""Decisions of candidates a search kept (drawn filled)."""


def plot_search_tree(
    traj: pd.DataFrame, run_id: str | None = None, budget: Unit = "tokens", ax: Axes | None = None
) -> Axes:
    """Draw one run's search tree (by default the first run of `traj`, a trajectories frame): x the spend at each
    decision (`cum_<budget>`), y the candidate's dev score, a line from each parent to its child, and a step line
    of the incumbent's dev score (the run's answer at each spend).

    Raises:
        ValueError: no such run, or the frame has no `parents` column (written before lineages were kept).
    """
    if "parents" not in traj.columns:
        raise ValueError("the trajectories frame has no 'parents' column: no lineage was recorded")
    its = iteration_frame(traj)
    run_id = run_id if run_id is not None else (str(its["run_id"].iloc[0]) if len(its) else None)
    its = its[its["run_id"] == run_id]
    if its.empty:
        raise ValueError(f"no run {run_id!r} in the trajectories frame")
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7.5, 4.0))
    rows: list[Any] = list(
        zip(
            its["iteration"],
            its[f"cum_{budget}"],
            its["grounded_score"],
            its["parents"],
            its["incumbent"],
            its["decision"],
            strict=True,
        )
    )
    spend = {int(r[0]): _num(r[1]) for r in rows}
    point: dict[int, tuple[float, float]] = {}
    for r in rows:
        x, y = spend[int(r[0])], _num(r[2])
        if x is not None and y is not None:
            point[int(r[0])] = (x, y)
    for r in rows:
        for parent in _parents(r[3]):
            if parent in point and int(r[0]) in point:
                (x0, y0), (x1, y1) = point[parent], point[int(r[0])]
                ax.plot([x0, x1], [y0, y1], color="0.6", linewidth=0.8, zorder=1)
    for kept in (True, False):
        shown = [point[int(r[0])] for r in rows if (r[5] in KEPT) == kept and int(r[0]) in point]
        ax.scatter(
            [x for x, _ in shown],
            [y for _, y in shown],
            s=28,
            zorder=3,
            label="kept (dev split)" if kept else "rejected (its minibatch)",
            facecolors="C0" if kept else "none",
            edgecolors="C0" if kept else "C3",
        )
    steps = [
        (x, point[int(r[4])][1])
        for r in rows
        if (x := spend[int(r[0])]) is not None and _num(r[4]) is not None and int(r[4]) in point
    ]
    if steps:
        ax.step([x for x, _ in steps], [y for _, y in steps], where="post", color="C2", label="returned at this spend")
    if point:  # a dev score is an accuracy: the axis never shows one below 0 nor above 1
        import pandas as pd

        ax.set_ylim(*accuracy_limits(pd.DataFrame({"dev": [y for _, y in point.values()]})))
    ax.set_xlabel(f"{budget} spent")
    ax.set_ylabel("dev score")
    ax.set_title(f"{its['loop'].iloc[0]} on {its['task_id'].iloc[0]}, sample {its['sample'].iloc[0]}")
    ax.legend(loc="lower right", frameon=False, fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def _parents(value: Any) -> list[int]:
    return [int(p) for p in str(value).split(",") if p.strip().isdigit()] if isinstance(value, str) else []


def _num(value: Any) -> float | None:
    try:
        return None if value is None or value != value else float(value)
    except TypeError:  # pandas' NA
        return None


__all__ = ["KEPT", "plot_search_tree"]
