"""Sweep results on disk and as tidy pandas frames.

More in docs/data.md, section "promptlab.results.store".
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import ConfigError
from ..errors import PromptlabWarning as Note
from ..reading import bounded, read_bounded
from ..record import Run
from .atomic import atomic_write, remove_leftovers
from .columns import ADDED_COLUMNS, CELL_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS
from .frames import (
    arrow_table,
    build_frame,
    check_params,
    concat_frames,
    conform_frame,
    frame_columns,
    iteration_frame,
    param_dtype,
)
from .runs_file import RunsRead, read_runs_file, warn_damaged
from .status import CellError, CellStatus, read_status, status_of

if TYPE_CHECKING:
    import pandas as pd

CELL_FILES = ("runs.jsonl", "trajectories.parquet", "runs.parquet", "status.json")
"""What `write_cell` writes in a cell directory (status.json last)."""
MAX_FRAME_BYTES = 2**30
"""The largest parquet file read. Every file of a results directory is read with `reading.read_bounded`: regular
files only, never through a link, never a FIFO (which would hang the reader) or a device (/dev/zero would fill
memory); `runs_file.MAX_RUNS_BYTES` and `status.MAX_STATUS_BYTES` bound a runs.jsonl and a status.json."""


@dataclass(frozen=True)
class Results:
    """A loaded results directory: the frames of its ok cells and one row per cell directory."""

    trajectories: pd.DataFrame
    """One row per run x iteration x criterion (TRAJECTORY_COLUMNS + params)."""
    runs: pd.DataFrame
    """One row per run (RUN_COLUMNS + params)."""
    cells: pd.DataFrame
    """One row per cell directory (CELL_COLUMNS + params)."""
    path: Path
    """The results directory."""

    def iterations(self) -> pd.DataFrame:
        """The trajectories deduplicated to one row per run x iteration (see `iteration_frame`)."""
        return iteration_frame(self.trajectories)

    def __repr__(self) -> str:
        counts = self.cells["status"].value_counts().to_dict() if len(self.cells) else {}
        return (
            f"Results({str(self.path)!r}: {len(self.runs)} runs, {len(self.trajectories)} trajectory rows, "
            f"cells {counts})"
        )


# writing ----------------------------------------------------------------------------------------
def load_writer() -> None:
    """Import what `write_cell` needs (pyarrow), e.g. in a worker thread while a sweep's first calls wait on the
    network, so that the first cell's write does not wait for it."""
    import pyarrow.parquet  # noqa: F401


def write_cell(
    results_dir: str | os.PathLike[str],
    cell_id: str,
    params: Mapping[str, Any],
    runs: Sequence[Run],
    *,
    error: Mapping[str, Any] | None = None,
    wall_time_s: float = 0.0,
    spent: tuple[int, float | None] | None = None,
) -> Path:
    """Write one cell's files atomically, status.json last.

    Args:
        results_dir: The sweep's results directory (created if missing).
        cell_id: The cell's id, used as its directory name.
        params: Flat dict of JSON scalars (always "loop"); the names become frame columns.
        runs: The cell's runs (partial runs are fine for a failed cell).
        error: Why the cell failed ({"kind", "message", "notebook", "cell_index", "ename", "evalue"});
            the status is "failed" when given ("cut" for kind "spending_cap"), else "ok" -- unless a run is incomplete (an infrastructure
            failure touched it): then the cell is failed with kind "infrastructure" (see `incomplete_error`).
        wall_time_s: Wall-clock seconds the cell took.
        spent: (tokens, USD) the cell's execution paid, when known beyond its runs (a spending cap's
            charges, which include runs the cap stopped); default: the sum of its runs' spent figures.

    Returns:
        The cell directory.
    """
    import pyarrow.parquet as pq

    params = check_params(params)
    error = error if error is not None else incomplete_error(runs)
    cell_error = None
    if error is not None:
        try:
            cell_error = CellError.model_validate(dict(error))
        except ValidationError as e:
            raise ConfigError(f"write_cell({cell_id!r}): bad error dict: {e}") from e
    traj, run_rows = frame_columns(runs, params, cell_id)
    cell_dir = _cell_dir(results_dir, cell_id)
    cell_dir.mkdir(parents=True, exist_ok=True)
    # a re-run must not leave the old status pointing at half-replaced files, nor a killed write's temp files
    (cell_dir / "status.json").unlink(missing_ok=True)
    remove_leftovers(cell_dir, CELL_FILES)
    atomic_write(cell_dir / "runs.jsonl", "".join(r.model_dump_json() + "\n" for r in runs).encode())
    for name, columns, spec in (
        ("trajectories.parquet", traj, TRAJECTORY_COLUMNS),
        ("runs.parquet", run_rows, RUN_COLUMNS),
    ):
        table = arrow_table(columns, spec, params)
        atomic_write(cell_dir / name, functools.partial(pq.write_table, table))
    tokens, cost = spent if spent is not None else _runs_spent(runs)
    status = CellStatus(
        cell_id=cell_id,
        params=params,
        status=status_of(cell_error),
        error=cell_error,
        n_runs=len(runs),
        n_errors=sum(len(r.errors) for r in runs),
        wall_time_s=float(wall_time_s),
        finished_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        spent_tokens=tokens,
        spent_cost_usd=cost,
    )
    atomic_write(cell_dir / "status.json", status.model_dump_json(indent=1).encode())
    return cell_dir


def _runs_spent(runs: Sequence[Run]) -> tuple[int, float | None]:
    """(tokens, USD) the runs spent (Run.totals); the USD is None once one run's is unknown."""
    tokens = sum(r.totals.input_tokens + r.totals.output_tokens for r in runs)
    costs = [r.totals.cost_usd for r in runs]
    return tokens, None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 10)


def incomplete_error(runs: Sequence[Run]) -> dict[str, Any] | None:
    """The error of a cell whose runs include an incomplete one (`Run.incomplete`), else None.

    An infrastructure failure (provider error after retries, missing key) is not research data: the cell
    must not be "ok", so the next sweep runs it again (its successful calls replay from the cache)."""
    broken = [r for r in runs if r.incomplete]
    if not broken:
        return None
    first = next(e for e in broken[0].errors if e.infrastructure)
    return {
        "kind": "infrastructure",
        "message": f"{len(broken)} of {len(runs)} run(s) incomplete (infrastructure failure; re-run the sweep "
        f"to retry): task {broken[0].task.id}, role {first.role}: {first.kind}: {first.message}",
        "ename": first.kind,
        "evalue": first.message,
    }


def cell_status(results_dir: str | os.PathLike[str], cell_id: str) -> dict[str, Any] | None:
    """The parsed status.json of a cell, or None if it is missing or unreadable."""
    status, _ = read_status(_cell_dir(results_dir, cell_id))
    return status.model_dump(mode="json") if status is not None else None


def read_runs(results_dir: str | os.PathLike[str], cell_id: str) -> list[Run]:
    """The lossless Run records of a cell (its runs.jsonl), as `read_cell_runs` reads them: a damaged record is
    skipped, with one `DamagedRecord` warning per file naming it by line (a missing file gives no runs)."""
    read = read_cell_runs(results_dir, cell_id)
    warn_damaged(read)
    return read.runs


def read_cell_runs(results_dir: str | os.PathLike[str], cell_id: str) -> RunsRead:
    """A cell's runs and its damaged records (`RunsRead`): what every reader of a results directory reads, so
    each reads it with the same tolerance (one damaged line costs that record, named by file and line)."""
    path = _cell_dir(results_dir, cell_id) / "runs.jsonl"
    return read_runs_file(path, f"cells/{cell_id}/runs.jsonl")


def _cell_dir(results_dir: str | os.PathLike[str], cell_id: str) -> Path:
    if (
        not isinstance(cell_id, str)
        or not cell_id
        or cell_id.startswith(".")
        or len(cell_id) > 200
        or any(c in cell_id for c in "/\\\0")
    ):
        raise ConfigError(
            f"cell_id {cell_id!r} cannot be a directory name (no '/', '\\', leading '.', at most 200 characters)"
        )
    path = Path(results_dir) / "cells" / cell_id
    if path.is_symlink() or path.parent.is_symlink():
        raise ConfigError(
            f"{path} is a symbolic link (to {os.readlink(path if path.is_symlink() else path.parent)}): a cell "
            "directory must be a directory inside the results directory; refused, nothing read or written through it"
        )
    return path


# loading ----------------------------------------------------------------------------------------
def load(results_dir: str | os.PathLike[str]) -> Results:
    """Load a results directory: the frames of every ok cell, and a row per cell directory.

    Cells without status "ok" are listed in `.cells` only. An ok cell whose parquet files cannot be read
    is listed with status "corrupt" (and a warning); its rows are skipped. Each cell directory counts once.

    Args:
        results_dir: The sweep's results directory.

    Returns:
        A `Results` with `.trajectories`, `.runs` and `.cells`.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory not found: {root}")
    cells: list[dict[str, Any]] = []
    parts: list[tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]] = []
    for d in _cell_dirs(root):
        row = _cell_row(d)
        if row["status"] == "ok":
            try:
                traj, runs = _cell_frames(d)
                parts.append((row["params"], traj, runs))
            except Exception as e:
                warnings.warn(
                    f"results: skipping cell {d.name}: {type(e).__name__}: {bounded(str(e))}", Note, stacklevel=2
                )
                row.update(status="corrupt", error_kind=type(e).__name__, error=bounded(str(e)))
        cells.append(row)
    return _results(root, cells, parts)


def ok_cells(results_dir: str | os.PathLike[str]) -> list[tuple[str, dict[str, Any]]]:
    """(cell id, params) of the results directory's ok cells, in cell id order, found as `load` finds them (a cell
    directory that is a link is skipped with a warning; an unreadable status.json is not ok).

    Raises:
        ConfigError: `results_dir` has no cells/ folder.
    """
    root = Path(results_dir)
    if not (root / "cells").is_dir():
        raise ConfigError(
            f"{root} is not a results dir: it has no cells/ folder (run `promptlab sweep EXPERIMENT --out DIR`)"
        )
    rows = [_cell_row(d) for d in _cell_dirs(root)]
    return [(row["cell_id"], dict(row["params"])) for row in rows if row["status"] == "ok"]


def _cell_dirs(root: Path) -> list[Path]:
    """The cell directories of a results directory, in name order; one that is a symbolic link is skipped with a
    warning (a link out of the results directory is never read, nor written: `_cell_dir`)."""
    cells_dir = root / "cells"
    dirs = (
        sorted(p for p in cells_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
        if cells_dir.is_dir() and not cells_dir.is_symlink()
        else []
    )
    linked = [d for d in dirs if d.is_symlink()]
    if linked:
        warnings.warn(
            f"results: skipping {len(linked)} cell director{'y' if len(linked) == 1 else 'ies'} that "
            f"{'is a symbolic link' if len(linked) == 1 else 'are symbolic links'} ({linked[0].name} -> "
            f"{os.readlink(linked[0])}): refused, not read",
            Note,
            stacklevel=3,
        )
    return [d for d in dirs if not d.is_symlink()]


def _cell_row(d: Path) -> dict[str, Any]:
    """A cell directory's row of the cells frame, from its status.json ("incomplete" without one, "corrupt" when
    it cannot be read)."""
    status, problem = read_status(d)
    row: dict[str, Any] = {"cell_id": d.name, "status": "incomplete", "params": {}}
    if problem is not None:
        row.update(status="corrupt", error_kind="StatusError", error=problem)
    if status is not None:
        row.update(
            status=status.status,
            n_runs=status.n_runs,
            n_errors=status.n_errors,
            wall_time_s=status.wall_time_s,
            finished_at=status.finished_at,
            params=status.params,
            spent_tokens=status.spent_tokens,
            spent_cost_usd=status.spent_cost_usd,
        )
        if status.error is not None:
            row.update(error_kind=status.error.kind, error=status.error.message)
    return row


def _cell_frames(d: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An ok cell's trajectories and runs frames, from its parquet files.

    Raises:
        ValueError: a file lacks documented columns; or whatever reading it raised (a refused file, bad parquet).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    frames = [
        pq.read_table(pa.BufferReader(read_bounded(d / name, MAX_FRAME_BYTES, name)), use_threads=False).to_pandas(
            use_threads=False
        )
        for name in ("trajectories.parquet", "runs.parquet")
    ]
    for frame, spec, name in zip(frames, (TRAJECTORY_COLUMNS, RUN_COLUMNS), ("trajectories", "runs"), strict=True):
        missing = [c for c in spec if c not in frame.columns and c not in ADDED_COLUMNS]
        if missing:
            raise ValueError(f"{name}.parquet lacks columns {missing}")
    return frames[0], frames[1]


def _results(
    root: Path, cells: list[dict[str, Any]], parts: list[tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]]
) -> Results:
    """The cells' rows and the ok cells' frames as one `Results`, every param column with one dtype."""
    names: dict[str, list[Any]] = {}
    for row in cells:
        for name, value in row["params"].items():
            names.setdefault(name, []).append(value)
    dtypes = {name: param_dtype(values) for name, values in names.items()}
    traj = concat_frames(
        [conform_frame(t, TRAJECTORY_COLUMNS, p, dtypes) for p, t, _ in parts],
        build_frame({}, TRAJECTORY_COLUMNS, {}, dtypes, 0, params_first=True),
    )
    runs = concat_frames(
        [conform_frame(r, RUN_COLUMNS, p, dtypes) for p, _, r in parts],
        build_frame({}, RUN_COLUMNS, {}, dtypes, 0, params_first=True),
    )
    cell_frames = [
        build_frame({k: [row.get(k)] for k in CELL_COLUMNS}, CELL_COLUMNS, row["params"], dtypes, 1, params_first=False)
        for row in cells
    ]
    cell_frame = concat_frames(cell_frames, build_frame({}, CELL_COLUMNS, {}, dtypes, 0, params_first=False))
    return Results(trajectories=traj, runs=runs, cells=cell_frame, path=root)


__all__ = [
    "Results",
    "cell_status",
    "incomplete_error",
    "load",
    "ok_cells",
    "read_cell_runs",
    "read_runs",
    "write_cell",
]
