"""How long a sweep will take, said before it starts, from what was measured on this machine.

A results directory that already holds finished cells of the experiment (a resumed sweep) gives their wall
times: the unfinished cells are expected to take as long each, `workers` at once. Before any cell has finished
there is nothing measured to go on, and the line says so; the progress bar counts finished runs, so its own
estimate (tqdm's, from the runs finished so far) appears after the first ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def duration(seconds: float) -> str:
    """Seconds in words a reader takes in at once: "40 s", "12 min", "2.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def time_estimate(cells: list[Any], out: str | Path, workers: int) -> str:
    """One line: how long the unfinished cells of `out` should take (from the finished cells' wall times), or
    why there is no estimate yet."""
    from ..results.store import cell_status

    statuses = [cell_status(out, c.cell_id) or {} for c in cells]
    times = [float(s.get("wall_time_s") or 0.0) for s in statuses if s.get("status") == "ok"]
    pending = len(cells) - len(times)
    if not pending:
        return f"every cell is finished in {out}: nothing to run"
    if not times:
        return (
            f"time: no cell of this experiment has finished in {out} yet, so there is nothing measured to estimate "
            "from; the bar's estimate appears once the first runs finish"
        )
    each = sum(times) / len(times)
    at_once = max(1, min(workers, pending))
    return (
        f"time: about {duration(each * pending / at_once)} for the {pending} unfinished cell(s), {at_once} at once "
        f"(the {len(times)} finished here took {duration(each)} each)"
    )


__all__ = ["duration", "time_estimate"]
