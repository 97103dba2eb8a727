"""What every executor of a sweep shares: the plan (experiment, results dir, tasks, cache, options), the
outcome of each cell, the sweep's result and its progress bar, and the run order (the results dir's setup is in
`promptlab.sweeps.results_dir`, what a process that runs cells is given in `promptlab.sweeps.cell_process`).

The progress bar counts finished runs (a cell's tasks x replicates each; its time estimate is tqdm's, from the
runs finished so far), and shows the cells done / failed / skipped and, over the cells run in this sweep, the
calls, the tokens and cost actually spent (`Run.totals`: cache hits add none) and the cache hits. Each finished
cell adds the exact figures of its runs (and the runs not yet counted); the inline executor also counts each
call and each finished run as it happens. `progress_bar` makes the bar (the CLI, notebook 02 and scripts/demo
use the same one).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..events import Event, EventHandler
from ..llm.spending.tally import Tally
from ..record import Run, Task
from .cells import Cell
from .experiment import Experiment

if TYPE_CHECKING:
    from ..llm.call.settings import Settings
    from ..llm.spending.cap import SpendingCap
    from ..results.store import Results


def spent_by(runs: list[Run]) -> Tally:
    """The summed `Run.totals` of runs."""
    total = Tally()
    for run in runs:
        total.merge(run.totals)
    return total


def bar_figures(t: Tally) -> dict[str, str]:
    """The progress bar's figures of a tally."""
    cost = "unknown" if t.cost_usd is None else f"${t.cost_usd:.4f}"
    return {"calls": str(t.calls), "tokens": str(t.tokens), "cost": cost, "hits": str(t.cache_hits)}


@dataclass
class CellOutcome:
    """What happened to one cell in this sweep."""

    cell_id: str
    params: dict[str, Any]
    status: Literal["ok", "failed", "cut", "skipped"]
    """ok: ran and finished; failed: ran and failed; cut: stopped by the spending cap (max_cost); skipped:
    already finished before."""
    error: str | None = None
    wall_time_s: float = 0.0
    spend: Tally = field(default_factory=Tally)
    """What the cell's runs spent in this sweep (zero for a skipped cell)."""


@dataclass
class SweepResult:
    """The outcome of `sweep`: one CellOutcome per cell, counts, what was spent and wall time."""

    experiment: str
    out_dir: Path
    executor: str
    cells: list[CellOutcome] = field(default_factory=list)
    wall_time_s: float = 0.0
    max_cost: float | None = None
    """The spending cap in USD (None: none)."""
    spent_usd: float | None = None
    """Under a cap: USD paid in the results dir so far, over every sweep (its ledger), when the sweep ended."""

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
    def cut(self) -> int:
        """Cells the spending cap stopped in this sweep (a sweep with a higher cap resumes them)."""
        return self.count("cut")

    @property
    def skipped(self) -> int:
        """Cells skipped because they had finished before (cached)."""
        return self.count("skipped")

    @property
    def spend(self) -> Tally:
        """Calls, spent tokens and cost, and cache hits of the cells run in this sweep (the bar's figures)."""
        total = Tally()
        for c in self.cells:
            total.merge(c.spend)
        return total

    def load(self) -> Results:
        """The results dir's frames (`promptlab.results.load`)."""
        from ..results.store import load

        return load(self.out_dir)

    def __str__(self) -> str:
        s = bar_figures(self.spend)
        text = (
            f"sweep {self.experiment} ({self.executor}): {len(self.cells)} cells: {self.done} done, "
            f"{self.failed} failed, {self.skipped} skipped (finished before) in {self.wall_time_s:.2f} s; "
            f"{s['calls']} calls ({s['hits']} cached), {s['tokens']} tokens, cost {s['cost']}; "
            f"results in {self.out_dir}"
        )
        if self.max_cost is not None:
            text += (
                f"\n{self.cut} cell(s) cut by max_cost={self.max_cost:g} USD; {self.spent_usd or 0.0:.6g} "
                f"USD paid in this results dir so far"
                + (" (re-run with a higher max_cost to resume them)" if self.cut else "")
            )
        for c in self.cells:
            if c.status in ("failed", "cut") or c.error:  # an ok cell whose runs recorded errors too
                text += f"\n  {c.status} {c.cell_id} {json.dumps(c.params)}: {c.error}"
        return text


@dataclass
class SweepPlan:
    """What a sweep's executors share: the experiment, results dir, tasks, cache, options, progress and outcomes."""

    exp: Experiment
    out: Path
    tasks: list[Task]
    cache_dir: str
    """The call cache every cell uses: an absolute directory or a URL (redis://host:port/db)."""
    on_event: EventHandler | None
    cell_concurrency: int | None
    """Runs at once inside a cell; None: as many as its models take calls at once, worked out by the process that
    runs the cell (`promptlab.sweeps.cells.runs_in_flight`)."""
    result: SweepResult
    bar: Any
    workers: int = 2
    settings: Settings | None = None
    """Call settings of every cell (None: the defaults); executors hand them to their cells' processes."""
    template: Path | None = None
    """The run_cell notebook (papermill executor only)."""
    scheduler: str | None = None
    """A Dask scheduler address (dask executor only; None: a LocalCluster)."""
    spending_cap: SpendingCap | None = None
    """The spending cap every cell runs under (None: none); executors hand it to their cells."""
    runs_per_cell: int = 1
    """Runs in each cell (tasks x replicates): what the bar advances by when a cell ends."""
    on_cell: Callable[[CellOutcome], None] | None = None
    """Called in this (the driver's) process with each cell's outcome once it is recorded, skipped cells included,
    whichever executor ran it (e.g. live MLflow logging, `promptlab.exports.mlflow_live`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    live: dict[str, Tally] = field(default_factory=dict)
    """Per running cell, the calls seen so far (inline executor); replaced by its runs' totals when it ends."""
    runs_seen: dict[str, int] = field(default_factory=dict)
    """Per running cell, the runs already counted on the bar (inline executor: from `run_finished` events)."""
    _shown: float = 0.0

    def record(self, outcome: CellOutcome) -> None:
        """Add a cell's outcome to the result and advance the progress bar by its runs not yet counted
        (thread-safe)."""
        with self.lock:
            self.result.cells.append(outcome)
            self.live.pop(outcome.cell_id, None)
            self.bar.update(max(0, self.runs_per_cell - self.runs_seen.pop(outcome.cell_id, 0)))
            self.bar.set_postfix(self._postfix())
        if self.on_cell is not None:
            self.on_cell(outcome)

    def run_finished(self, cell_id: str) -> None:
        """Count one finished run of a running cell on the bar (at most the cell's runs)."""
        with self.lock:
            seen = self.runs_seen.get(cell_id, 0)
            if seen < self.runs_per_cell:
                self.runs_seen[cell_id] = seen + 1
                self.bar.update(1)

    def watch(self, cell_id: str) -> EventHandler:
        """An event handler for one cell: counts its model calls on the bar, then passes the event on."""

        def handler(event: Event) -> None:
            if event.kind == "model_call":
                d = event.data
                with self.lock:
                    self.live.setdefault(cell_id, Tally()).count(
                        hit=bool(d.get("cache_hit")),
                        input_tokens=int(d.get("input_tokens") or 0),
                        output_tokens=int(d.get("output_tokens") or 0),
                        cost_usd=d.get("cost_usd"),
                    )
                    now = time.monotonic()
                    if now - self._shown > 0.5:
                        self._shown = now
                        self.bar.set_postfix(self._postfix())
            elif event.kind == "run_finished":
                self.run_finished(cell_id)
            if self.on_event is not None:
                self.on_event(event)

        return handler

    def _postfix(self) -> dict[str, str]:
        total = self.result.spend
        for spend in self.live.values():
            total.merge(spend)
        cut = {"cut": str(self.result.cut)} if self.spending_cap is not None else {}
        return {
            "done": str(self.result.done),
            "failed": str(self.result.failed),
            **cut,
            "skipped": str(self.result.skipped),
            **bar_figures(total),
        }


def progress_bar(name: str, cells: int, runs_per_cell: int, *, disable: bool = False) -> Any:
    """The sweep's progress bar: finished runs out of `cells` x `runs_per_cell`, as text (on stdout in a Jupyter
    kernel, where stderr is drawn as an error; on stderr elsewhere). Not tqdm's widget: showing one makes
    JupyterLab exchange widget messages with the kernel, and their status replies turn its status bar to "Idle"
    while the sweep's cell still runs (jupyterlab#10701), so a user could not tell the sweep was running."""
    import sys

    from tqdm import tqdm

    kernel = sys.modules.get("ipykernel.kernelapp")  # a process that only launched kernels imports ipykernel too
    out = sys.stdout if kernel is not None and kernel.IPKernelApp.initialized() else sys.stderr
    return tqdm(total=cells * runs_per_cell, desc=f"sweep {name}", unit="run", disable=disable, file=out)


def schedule(cells: list[Cell]) -> list[Cell]:
    """Run order: the loops interleaved (round robin), each loop's cells in expansion order.

    Cells of one loop that differ only in a stopping rule (threshold, cap) make the same first calls;
    run one after another they answer them from the cache, while concurrent workers take other loops."""
    by_loop: dict[str, list[Cell]] = {}
    for cell in cells:
        by_loop.setdefault(cell.loop, []).append(cell)
    queues = list(by_loop.values())
    order: list[Cell] = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order
