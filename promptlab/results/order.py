"""One canonical order of the results frames' rows and of Run records, so that a finding is a function of the data
alone: not of the order in which runs finished, nor of their run ids (random, and different on every machine).

`canonical_rows(frame)` sorts rows by ORDER_KEYS (configuration, task, replicate, iteration, criterion, ...), then by
a digest of their other values; a run id only breaks ties between rows equal in everything else, which give the same
numbers in either order. `canonical_results` orders a `Results`' frames so; `canonical_runs` orders Run records by
task, replicate, loop and what the run is (`Run.comparable`). The analysis and the report order their inputs with
these before anything that depends on order: a float sum, a "first" row, a tie, a seeded draw
(`promptlab.eval.stats.canonical_order` orders the values a bootstrap resamples).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from ..record import Run
    from .store import Results

ORDER_KEYS = ("cell_id", "task_id", "sample", "iteration", "criterion", "judge", "measure", "split", "example")
"""The columns that order rows, first to last, where a frame has them: the configuration (a cell's id is a hash of
what it ran, the same on every machine), the task, the replicate, the iteration, the criterion and judge, and a
per-example frame's measurement and example."""
VOLATILE = frozenset({"run_id", "wall_time_s", "finished_at"})
"""Columns that differ between two executions of the same runs: left out of the digest that orders rows."""


def canonical_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's rows in the canonical order (see the module docstring), with a fresh RangeIndex."""
    import pandas as pd

    if len(frame) < 2:
        return frame.reset_index(drop=True)
    keys = [c for c in ORDER_KEYS if c in frame.columns]
    rest = [c for c in frame.columns if c not in keys and c not in VOLATILE]
    columns: dict[str, Any] = {f"key{i}": _sortable(frame[c]) for i, c in enumerate(keys)}
    if rest:
        columns["digest"] = row_digest(frame[rest])
    if "run_id" in frame.columns:
        columns["run_id"] = _sortable(frame["run_id"])
    order = pd.DataFrame(columns).sort_values(list(columns), kind="mergesort", na_position="last").index
    return frame.iloc[order].reset_index(drop=True)


def row_digest(frame: pd.DataFrame) -> Any:
    """A 64-bit digest of each row's values (pandas' `hash_pandas_object`, without the index), on a RangeIndex:
    equal rows have equal digests, in any frame and in any order."""
    import pandas as pd

    values = frame.apply(lambda c: c.astype("string") if c.dtype == object else c)
    return pd.Series(pd.util.hash_pandas_object(values, index=False).to_numpy())


def _sortable(column: pd.Series) -> pd.Series:
    """A column's values, sortable (an object column as text: mixed types do not compare), on a RangeIndex."""
    return (column.astype("string") if column.dtype == object else column).reset_index(drop=True)


def canonical_results(results: Results) -> Results:
    """`results` with its trajectories, runs and cells frames in the canonical order."""
    return dataclasses.replace(
        results,
        trajectories=canonical_rows(results.trajectories),
        runs=canonical_rows(results.runs),
        cells=canonical_rows(results.cells),
    )


def canonical_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs in the canonical order: by task id, replicate, loop, then a digest of what the run is
    (`Run.comparable`: the record without run ids and wall-clock fields); the run id breaks ties."""
    return sorted(runs, key=lambda r: (r.task.id, r.sample, r.loop, run_digest(r), r.run_id))


def run_digest(run: Run) -> str:
    """sha256 of the run's canonical JSON without its run ids and wall-clock fields (`Run.comparable`)."""
    return hashlib.sha256(json.dumps(run.comparable(), sort_keys=True, default=str).encode()).hexdigest()


__all__ = [
    "ORDER_KEYS",
    "VOLATILE",
    "canonical_results",
    "canonical_rows",
    "canonical_runs",
    "row_digest",
    "run_digest",
]
