"""A cell's status.json: written last, it says whether the cell finished ("ok"), failed or was cut, and why."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..reading import RefusedFile, read_bounded

MAX_STATUS_BYTES = 2**20
"""The largest status.json read (one is about 1 KB)."""
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


def status_of(error: CellError | None) -> str:
    """A cell's status for its error: "ok" without one, "cut" by the spending cap, else "failed"."""
    if error is None:
        return "ok"
    return "cut" if error.kind in (SPENDING_CAP_KIND, "budget") else "failed"  # "budget": its name before


def read_status(cell_dir: Path) -> tuple[CellStatus | None, str | None]:
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


__all__ = ["MAX_STATUS_BYTES", "SPENDING_CAP_KIND", "CellError", "CellStatus", "read_status", "status_of"]
