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

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError
from ..errors import PromptlabWarning as Note
from ..reading import RefusedFile, jsonl_lines, read_bounded
from ..record import Run
from .atomic import atomic_write
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

if TYPE_CHECKING:
    import pandas as pd

MAX_STATUS_BYTES = 2**20
"""The largest status.json read (one is about 1 KB); MAX_RUNS_BYTES and MAX_FRAME_BYTES bound a cell's runs.jsonl
and each parquet file. Every file of a results directory is read with `reading.read_bounded`: regular files only,
never through a link, never a FIFO (which would hang the reader) or a device (/dev/zero would fill memory)."""
MAX_RUNS_BYTES = MAX_FRAME_BYTES = 2**30
SPENDING_CAP_KIND = "spending_cap"
"""The error kind of a cell cut by the sweep's spending cap (its status is "cut")."""


class CellError(BaseModel):
    """Why a cell failed."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    """SweepCellError (the cell's code raised: a bug or a bad config), "infrastructure" (a provider outage,
    a missing key, a run left incomplete) or "spending_cap" (the sweep's max_cost cut it: status "cut"): in every
    case the cell is re-run by the next sweep."""
    message: str
    """What went wrong."""
    notebook: str | None = None
    """Executed notebook holding the traceback (papermill executor)."""
    cell_index: int | None = None
    """Index of the notebook cell that raised."""
    ename: str | None = None
    """Exception name reported by the kernel."""
    evalue: str | None = None
    """Exception value reported by the kernel."""


class CellStatus(BaseModel):
    """The status.json of a cell directory, written last."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Format version."""
    cell_id: str
    """The cell's id (its directory name)."""
    params: dict[str, str | int | float | bool | None]
    """The cell's parameters (flat JSON scalars; always 'loop')."""
    status: str
    """'ok', 'failed' (a cell with an incomplete run is failed, never ok, so a re-run retries it) or 'cut' (the
    sweep's max_cost refused a model call of the cell: a re-run with a higher cap resumes it)."""
    error: CellError | None = None
    """Why it failed (None when ok)."""
    n_runs: int
    """Runs recorded in runs.jsonl."""
    n_errors: int = 0
    """Errors its runs recorded and went on past (a reply that did not parse, a score that could not be read)."""
    wall_time_s: float
    """Wall-clock seconds the cell took."""
    finished_at: str
    """UTC time of writing (ISO 8601)."""
    spent_tokens: int | None = None
    """Tokens the cell's execution sent to providers (None in files written before it was recorded)."""
    spent_cost_usd: float | None = None
    """USD the cell's execution paid; None where a price is unknown (or in older files). Under a spending
    cap it is what the cap's ledger charged the cell, so a cell the cap cut shows what it paid."""


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
    # a re-run must not leave the old status pointing at half-replaced files
    (cell_dir / "status.json").unlink(missing_ok=True)
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
        status=_status_of(cell_error),
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


def _status_of(error: CellError | None) -> str:
    if error is None:
        return "ok"
    return "cut" if error.kind in (SPENDING_CAP_KIND, "budget") else "failed"  # "budget": its name before


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
    status, _ = _read_status(_cell_dir(results_dir, cell_id))
    return status.model_dump(mode="json") if status is not None else None


def read_runs(results_dir: str | os.PathLike[str], cell_id: str) -> list[Run]:
    """The lossless Run records of a cell (its runs.jsonl)."""
    path = _cell_dir(results_dir, cell_id) / "runs.jsonl"
    text = read_bounded(path, MAX_RUNS_BYTES, "runs.jsonl").decode("utf-8")
    return [Run.model_validate_json(line) for line in jsonl_lines(text) if line.strip()]


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
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory not found: {root}")
    cells_dir = root / "cells"
    dirs = (
        sorted(p for p in cells_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
        if cells_dir.is_dir() and not cells_dir.is_symlink()
        else []
    )
    linked = [d for d in dirs if d.is_symlink()]
    if linked:  # a link out of the results directory is never read (nor written: `_cell_dir`)
        warnings.warn(
            f"results: skipping {len(linked)} cell director{'y' if len(linked) == 1 else 'ies'} that "
            f"{'is a symbolic link' if len(linked) == 1 else 'are symbolic links'} ({linked[0].name} -> "
            f"{os.readlink(linked[0])}): refused, not read",
            Note,
            stacklevel=2,
        )
        dirs = [d for d in dirs if not d.is_symlink()]
    cells: list[dict[str, Any]] = []
    parts: list[tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]] = []
    for d in dirs:
        status, problem = _read_status(d)
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
        if row["status"] == "ok":
            try:
                frames = [
                    pq.read_table(
                        pa.BufferReader(read_bounded(d / name, MAX_FRAME_BYTES, name)), use_threads=False
                    ).to_pandas(use_threads=False)
                    for name in ("trajectories.parquet", "runs.parquet")
                ]
                for frame, spec, name in zip(
                    frames, (TRAJECTORY_COLUMNS, RUN_COLUMNS), ("trajectories", "runs"), strict=True
                ):
                    missing = [c for c in spec if c not in frame.columns and c not in ADDED_COLUMNS]
                    if missing:
                        raise ValueError(f"{name}.parquet lacks columns {missing}")
                parts.append((row["params"], frames[0], frames[1]))
            except Exception as e:
                warnings.warn(f"results: skipping cell {d.name}: {type(e).__name__}: {e}", Note, stacklevel=2)
                row.update(status="corrupt", error_kind=type(e).__name__, error=str(e))
        cells.append(row)

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


def _read_status(cell_dir: Path) -> tuple[CellStatus | None, str | None]:
    """(status, None), (None, None) when status.json is missing, or (None, problem) when unreadable."""
    path = cell_dir / "status.json"
    try:
        text = read_bounded(path, MAX_STATUS_BYTES, "status.json").decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None, None
    except (OSError, RefusedFile) as e:
        return None, f"status.json unreadable: {e}"
    try:
        return CellStatus.model_validate_json(text), None
    except ValidationError as e:
        return None, f"status.json invalid: {e.error_count()} error(s): {e.errors()[0]['msg']}"


__all__ = [
    "SPENDING_CAP_KIND",
    "CellError",
    "CellStatus",
    "Results",
    "cell_status",
    "incomplete_error",
    "load",
    "read_runs",
    "write_cell",
]
