"""A cell's runs.jsonl, read one way by every reader of a results directory (the exports, reports, analysis, the
run browser, a sweep's outcome): a damaged record costs that record only. It is named by file and line with a
short excerpt (never the line whole), skipped and counted; the other records are read."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..errors import PromptlabWarning
from ..reading import RefusedFile, bounded, excerpt, read_bounded
from ..record import Run

MAX_RUNS_BYTES = 2**30
"""The largest runs.jsonl read (a bigger one is refused by name, its runs skipped)."""
NAMED_DAMAGES = 3
"""The damaged records a warning names one by one; the others are counted."""


class DamagedRecord(PromptlabWarning):
    """Records of a results directory that could not be read: named by file and line, skipped, counted."""


@dataclass(frozen=True)
class RunsRead:
    """What a cell's runs.jsonl held: the runs it could read and why it skipped the others."""

    runs: list[Run]
    """The readable records, in file order."""
    damaged: list[str]
    """One message per skipped record (or one for a file that could not be read at all), each 'file:line: why'
    with a short excerpt, under 1 KiB."""
    path: str
    """The file, as messages name it (cells/<cell_id>/runs.jsonl)."""
    whole_file: bool = False
    """The file itself could not be read (`damaged` holds that one message)."""

    def note(self) -> str | None:
        """One message for all of the file's damage (None when there is none), under 1 KiB."""
        if not self.damaged:
            return None
        if self.whole_file:
            return self.damaged[0]
        shown = "; ".join(self.damaged[:NAMED_DAMAGES])
        more = len(self.damaged) - NAMED_DAMAGES
        text = f"{len(self.damaged)} damaged record(s) skipped ({len(self.runs)} read): {shown}"
        return bounded(text + (f"; and {more} more" if more > 0 else ""))


def read_runs_file(path: Path, name: str) -> RunsRead:
    """The runs of a runs.jsonl; a line that is not UTF-8, not JSON or not a run record is skipped and named.

    Args:
        path: The file.
        name: The file as messages name it (e.g. 'cells/c1/runs.jsonl').

    Returns:
        The runs and one message per skipped record; a file that is missing or refused (a link, a FIFO, over
        `MAX_RUNS_BYTES`) gives no runs and one message.
    """
    try:
        data = read_bounded(path, MAX_RUNS_BYTES, "runs.jsonl")
    except (OSError, RefusedFile) as e:
        why = "missing" if isinstance(e, FileNotFoundError) else f"unreadable ({type(e).__name__}: {e})"
        return RunsRead([], [bounded(f"{name}: {why}; the cell's runs skipped")], name, whole_file=True)
    runs: list[Run] = []
    damaged: list[str] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        line = raw.removesuffix(b"\r")
        if not line.strip():
            continue
        try:
            runs.append(Run.model_validate_json(line))
        except (ValidationError, ValueError) as e:
            damaged.append(bounded(f"{name}:{number}: {_why(e)}: {excerpt(line)}", 300))
    return RunsRead(runs, damaged, name)


def _why(e: Exception) -> str:
    """What is wrong with a line, without its content (pydantic's message quotes no input here)."""
    if not isinstance(e, ValidationError):
        return f"{type(e).__name__}"
    first = e.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    kind = "not JSON" if first.get("type") == "json_invalid" else "not a run record"
    detail = f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
    return f"{kind} ({e.error_count()} error(s); {bounded(detail, 120)})"


def warn_damaged(read: RunsRead, stacklevel: int = 3) -> None:
    """One `DamagedRecord` warning for the file's damage, if any."""
    note = read.note()
    if note is not None:
        where = "" if read.whole_file else f"{read.path}: "
        warnings.warn(f"results: {where}{note}", DamagedRecord, stacklevel=stacklevel)


__all__ = ["MAX_RUNS_BYTES", "DamagedRecord", "RunsRead", "read_runs_file", "warn_damaged"]
