"""One sweep cell, shared by both executors (`promptlab.sweep` inline, `promptlab.papermill_cells`): running
its tasks x replicates, writing its results, the error of a failed cell, and the outcome a sweep reports.

A cell whose code raises is recorded as failed (kind SweepCellError); an infrastructure failure (a provider
error after retries, a missing key) fails it with kind "infrastructure", so the next sweep runs it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import SweepCellError
from .events import EventHandler
from .experiments import Cell, Experiment
from .record import Run, Task

if TYPE_CHECKING:
    from .call import Settings
    from .results import Results


@dataclass
class CellOutcome:
    """What happened to one cell in this sweep."""

    cell_id: str
    params: dict[str, Any]
    status: Literal["ok", "failed", "skipped"]
    """ok: ran and finished; failed: ran and failed; skipped: already finished before."""
    error: str | None = None
    wall_time_s: float = 0.0


@dataclass
class SweepResult:
    """The outcome of `sweep`: one CellOutcome per cell, counts and wall time."""

    experiment: str
    out_dir: Path
    executor: str
    cells: list[CellOutcome] = field(default_factory=list)
    wall_time_s: float = 0.0

    def count(self, status: str) -> int:
        """Cells with this outcome."""
        return sum(c.status == status for c in self.cells)

    @property
    def done(self) -> int:
        """Cells run to an ok status in this sweep."""
        return self.count("ok")

    @property
    def failed(self) -> int:
        """Cells that failed in this sweep."""
        return self.count("failed")

    @property
    def skipped(self) -> int:
        """Cells skipped because they had finished before (cached)."""
        return self.count("skipped")

    def load(self) -> Results:
        """The results dir's frames (`promptlab.results.load`)."""
        from .results import load

        return load(self.out_dir)

    def __str__(self) -> str:
        text = (f"sweep {self.experiment} ({self.executor}): {len(self.cells)} cells: {self.done} done, "
                f"{self.failed} failed, {self.skipped} skipped (finished before) in {self.wall_time_s:.1f} s; "
                f"results in {self.out_dir}")
        for c in self.cells:
            if c.status == "failed":
                text += f"\n  failed {c.cell_id} {json.dumps(c.params)}: {c.error}"
        return text


@dataclass
class SweepPlan:
    """What a sweep's executors share: the experiment, results dir, tasks, cache, progress bar and outcomes."""

    exp: Experiment
    out: Path
    tasks: list[Task]
    cache_dir: str
    on_event: EventHandler | None
    cell_concurrency: int
    result: SweepResult
    bar: Any
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, outcome: CellOutcome) -> None:
        """Add a cell's outcome to the result and advance the progress bar (thread-safe)."""
        with self.lock:
            self.result.cells.append(outcome)
            self.bar.update(1)
            counts = {"done": self.result.done, "failed": self.result.failed, "cached": self.result.skipped}
            self.bar.set_postfix(counts)


def experiment_provenance(out: Path) -> dict[str, Any]:
    """{"experiment_hash": sha256 of the results dir's experiment.yaml}, or {} before it is written; the
    inline and papermill executors both read that one file, so their runs carry the same hash."""
    path = out / "experiment.yaml"
    return {"experiment_hash": hashlib.sha256(path.read_bytes()).hexdigest()} if path.is_file() else {}


def keep_notebook(cell_dir: Path) -> None:
    """Keep a cell's last executed notebook as run_cell.ipynb: a sweep killed while papermill wrote it
    leaves only .run_cell.partial.ipynb (a re-run of the cell replaces both)."""
    partial = cell_dir / ".run_cell.partial.ipynb"
    if partial.exists():
        os.replace(partial, cell_dir / "run_cell.ipynb")


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a temp file beside `path`, then os.replace it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


async def arun_cell(
    cell: Cell,
    tasks: list[Task],
    replicates: int,
    *,
    cache: str | None = None,
    on_event: EventHandler | None = None,
    concurrency: int = 4,
    settings: Settings | None = None,
    provenance: dict[str, Any] | None = None,
) -> tuple[list[Run], BaseException | None]:
    """Run a cell's tasks x replicates (concurrently, bounded); returns the finished runs (in task,
    sample order) and the first exception raised, if any. `provenance` (e.g. {"experiment_hash": ...})
    is added to every run's `Run.provenance`."""
    from .loops import get_loop, provenance_scope

    spec = get_loop(cell.loop)
    config = spec.config_cls.model_validate(cell.config)
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(task: Task, sample: int) -> Run:
        async with sem:
            if settings is None:
                return await spec.arun(task, config, sample=sample, on_event=on_event, cache=cache)
            return await spec.arun(task, config, sample=sample, on_event=on_event, cache=cache, settings=settings)

    with provenance_scope(provenance or {}):
        jobs = [one(t, s) for t in tasks for s in range(replicates)]
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
    runs = [o for o in outcomes if isinstance(o, Run)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    for e in errors:
        if not isinstance(e, Exception):  # cancellation, Ctrl-C: not a cell failure
            raise e
    return runs, (errors[0] if errors else None)


INFRASTRUCTURE_ERRORS = frozenset({"ProviderError", "MissingKeyError", "CacheUnavailableError"})
"""Exception names that mean an outage, not a bug (a kernel reports only the name)."""


def cell_error(cell: Cell, exc: BaseException | None = None, *, notebook: str | None = None,
               cell_index: int | None = None, ename: str | None = None, evalue: str | None = None) -> dict[str, Any]:
    """The error dict of a failed cell, for status.json."""
    ename = ename or (type(exc).__name__ if exc is not None else None)
    evalue = evalue if evalue is not None else (str(exc) if exc is not None else None)
    err = SweepCellError(cell.cell_id, cell.params, f"{ename}: {evalue}", notebook=notebook,
                         cell_index=cell_index, ename=ename, evalue=evalue)
    infrastructure = bool(getattr(exc, "infrastructure", False)) or ename in INFRASTRUCTURE_ERRORS
    return {"kind": "infrastructure" if infrastructure else "SweepCellError", "message": str(err), "notebook": notebook, "cell_index": cell_index,
            "ename": ename, "evalue": evalue}


async def aexecute_cell(out: Path, cell: Cell, tasks: list[Task], replicates: int, *, cache: str | None = None,
                        on_event: EventHandler | None = None, concurrency: int = 4,
                        notebook: str | None = None,
                        settings: Settings | None = None) -> tuple[dict[str, Any], BaseException | None]:
    """Run a cell and write its results (failed, with the error, when a run raised)."""
    from .results import cell_status, write_cell

    t0 = time.perf_counter()
    try:
        runs, exc = await arun_cell(cell, tasks, replicates, cache=cache, on_event=on_event, concurrency=concurrency,
                                    settings=settings, provenance=experiment_provenance(out))
    except Exception as e:  # noqa: BLE001 -- any failure to start the cell's runs fails the cell
        runs, exc = [], e
    error = cell_error(cell, exc, notebook=notebook) if exc is not None else None
    wall = round(time.perf_counter() - t0, 4)
    await asyncio.to_thread(write_cell, out, cell.cell_id, cell.params, runs, error=error, wall_time_s=wall)
    return (cell_status(out, cell.cell_id) or {"cell_id": cell.cell_id, "status": "failed"}), exc


def cell_outcome(plan: SweepPlan, cell: Cell, wall: float) -> CellOutcome:
    """A ran cell's outcome, read from its status.json (failed when none was written)."""
    from .results import cell_status

    status = cell_status(plan.out, cell.cell_id) or {}
    ok = status.get("status") == "ok"
    err = status.get("error") or {}
    message = None if ok else str(err.get("message") or "no status.json was written")
    return CellOutcome(cell.cell_id, cell.params, "ok" if ok else "failed", message,
                       float(status.get("wall_time_s") or wall))
