"""A sweep's results dir as the sweep keeps it: set up for an experiment (refusing another's cells, writing
experiment.yaml and tasks.jsonl whole), the experiment's hash every run carries, and a papermill cell's notebook
kept only when it was written whole."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ResultsDiskFull, is_disk_full
from ..reading import MAX_FILE_BYTES, read_bounded
from ..results.atomic import atomic_write

if TYPE_CHECKING:
    from ..record import Task
    from .cells import Cell
    from .experiment import Experiment


def prepare_results_dir(out: Path, exp: Experiment, tasks: list[Task], cells: list[Cell]) -> None:
    """Refuse a dir holding other cells; write experiment.yaml and tasks.jsonl (self-contained)."""
    known = {c.cell_id for c in cells}
    cells_dir = out / "cells"
    stale = (
        sorted(p.name for p in cells_dir.iterdir() if p.is_dir() and p.name not in known) if cells_dir.is_dir() else []
    )
    if stale:
        raise ConfigError(
            f"out dir {out} already holds {len(stale)} cell(s) of a different experiment or config "
            f"(e.g. {stale[0]}); their results would mix with these: choose another out dir or remove it"
        )
    out.mkdir(parents=True, exist_ok=True)
    # the cap is how much to spend, not what to run: it stays out (the experiment's hash does not change with it)
    snapshot = exp.model_copy(update={"tasks": "tasks.jsonl", "task_ids": None, "limit": None, "max_cost": None})
    atomic_write(out / "tasks.jsonl", "".join(t.model_dump_json() + "\n" for t in tasks).encode("utf-8"))
    yaml_text = f"# written by promptlab sweep; tasks.jsonl holds the selected tasks\n{snapshot.to_yaml()}"
    atomic_write(out / "experiment.yaml", yaml_text.encode("utf-8"))


def experiment_provenance(out: Path) -> dict[str, Any]:
    """{"experiment_hash": sha256 of the results dir's experiment.yaml}, or {} before it is written; every
    executor reads that one file, so their runs carry the same hash."""
    with contextlib.suppress(FileNotFoundError):
        data = read_bounded(out / "experiment.yaml", MAX_FILE_BYTES, "experiment.yaml")
        return {"experiment_hash": hashlib.sha256(data).hexdigest()}
    return {}


PARTIAL_NOTEBOOK = ".run_cell.partial.ipynb"
"""Where papermill writes a cell's notebook as it runs (it writes in place, not atomically)."""


def keep_notebook(cell_dir: Path) -> None:
    """Keep a cell's last executed notebook as run_cell.ipynb, if papermill wrote it whole: a sweep killed, or
    a disk filled, while papermill wrote it leaves a cut-short .run_cell.partial.ipynb, which is removed (the
    notebook before it, if any, stays; a re-run of the cell replaces both)."""
    partial = cell_dir / PARTIAL_NOTEBOOK
    try:
        json.loads(read_bounded(partial, MAX_FILE_BYTES, PARTIAL_NOTEBOOK))
    except FileNotFoundError:
        return
    except ValueError:  # not JSON (cut short), not UTF-8, or refused (a link, a FIFO, too big: RefusedFile)
        partial.unlink(missing_ok=True)
        return
    os.replace(partial, cell_dir / "run_cell.ipynb")


@contextlib.contextmanager
def disk_full_named(path: Path) -> Iterator[None]:
    """Turn a full disk met in the block into ResultsDiskFull naming `path`."""
    try:
        yield
    except OSError as e:
        if is_disk_full(e):
            raise ResultsDiskFull(str(path), e) from e
        raise
