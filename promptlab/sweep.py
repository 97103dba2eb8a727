"""Run an experiment's cells, skipping finished ones, inline (asyncio) or one papermill notebook per cell.

    result = sweep("experiments/demo.yaml", "results/demo", executor="papermill", workers=2)

A cell is finished when its status.json says "ok" (see `promptlab.results`): such cells are skipped,
failed or missing ones are run (again). Before running, the results dir gets `experiment.yaml` (the
experiment with its task selection applied) and `tasks.jsonl` (the selected tasks), so it is
self-contained; a results dir that holds cells of another experiment is refused.

Executors:
- "inline": cells run concurrently in this process (at most `workers` at once; inside a cell its
  tasks x replicates run concurrently too, at most `cell_concurrency`). Works inside a notebook.
- "papermill": each cell executes notebooks/run_cell.ipynb in its own kernel (`workers` at once); the
  notebook writes the cell's results itself, and the executed notebook is kept as
  cells/<cell_id>/run_cell.ipynb. Each kernel gets PROMPTLAB_LOCAL_THREADS = cores // workers.

One cell can be run by hand (params_json is optional when cell_id and experiment_path are given;
`promptlab sweep EXPERIMENT --list` prints the cell ids)::

    papermill notebooks/run_cell.ipynb out.ipynb -p experiment_path experiments/demo.yaml \\
        -p cell_id <id> -p results_dir results/x

Cells start with the loops interleaved (round robin, each loop's cells in expansion order): cells of
one loop that differ only in a stopping rule make the same first model calls, so run one after the
other they answer them from the call cache while concurrent workers take other loops.

Every cell is checked first (`promptlab.experiments.preflight_cells`): every model (its name, its API key
in the environment, a local file that exists), and each loop's config against every task (e.g. score_source
'grounded' on a task without examples): a problem raises ConfigError listing them all before anything is
written or any model is called.

A cell whose code raises is recorded as failed (status.json error: kind SweepCellError, message,
notebook, cell_index, ename, evalue) and the sweep goes on. An infrastructure failure (a provider error
after retries, a missing key, or a run left incomplete by one, `Run.incomplete`) fails its cell with
kind "infrastructure", never "ok": the next sweep runs it again, its successful calls replayed from the
cache. A model failure (an unparseable reply) is research data: its cell is ok. Ctrl-C stops scheduling, lets running
writes finish (every file is written atomically) and re-raises KeyboardInterrupt; run again to resume.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import ConfigError, SweepCellError
from .events import EventHandler
from .experiments import Cell, Experiment, load_experiment, preflight_cells
from .record import Task
from .sweep_cell import (
    INFRASTRUCTURE_ERRORS,
    CellOutcome,
    SweepPlan,
    SweepResult,
    aexecute_cell,
    arun_cell,
    cell_error,
    cell_outcome,
    experiment_provenance,
    keep_notebook,
    write_text_atomic,
)

if TYPE_CHECKING:
    from .call import Settings

Executor = Literal["inline", "papermill"]


def sweep(
    experiment: str | Path | Experiment,
    out_dir: str | Path | None = None,
    *,
    executor: Executor = "inline",
    workers: int = 2,
    on_event: EventHandler | None = None,
    progress: bool = True,
    cache: str | Path | None = None,
    cell_concurrency: int = 4,
    template: str | Path | None = None,
    settings: Settings | None = None,
) -> SweepResult:
    """Run every unfinished cell of an experiment and write its results.

    Args:
        experiment: an experiment YAML path or an `Experiment`.
        out_dir: the results dir (default results/<experiment name>).
        executor: "inline" (in this process) or "papermill" (one notebook kernel per cell).
        workers: cells at once.
        on_event: receives every loop event (inline executor only).
        progress: show a tqdm bar (notebook-aware) of cells done / failed / skipped.
        cache: the call cache, a directory or a URL such as redis://host:6379/0 (default `$PROMPTLAB_CACHE`,
            else `$PROMPTLAB_CACHE_DIR` or ./.promptlab/cache).
        cell_concurrency: runs (tasks x replicates) at once inside a cell.
        template: the run_cell notebook for the papermill executor.
        settings: how calls are made (retries, timeouts, deadline); inline executor only.

    Returns:
        A SweepResult with each cell's outcome.

    Raises:
        ConfigError: a bad experiment or a results dir holding another experiment's cells.
        KeyboardInterrupt: on Ctrl-C, after running writes finished (run again to resume).
    """
    if settings is not None and executor != "inline":
        raise ConfigError("settings: only the inline executor takes call settings")
    from tqdm.auto import tqdm

    from .cache import cache_location, default_cache_location, open_cache
    from .results import cell_status

    if executor not in ("inline", "papermill"):
        raise ConfigError(f"executor: {executor!r} is not one of 'inline', 'papermill'")
    if workers < 1:
        raise ConfigError(f"workers: {workers} must be at least 1")
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment)
    where = cache_location(cache)  # the same cache for every worker: an absolute directory or a URL
    open_cache(where, origin="the cache argument" if cache else default_cache_location()[1])  # fails before any cell
    out = Path(out_dir if out_dir is not None else Path("results") / exp.name).resolve()
    tasks = exp.load_tasks()
    cells = exp.cells(tasks)
    preflight_cells(cells, tasks)
    _prepare(out, exp, tasks, cells)
    t0 = time.perf_counter()
    result = SweepResult(exp.name, out, executor)
    pending: list[Cell] = []
    finished: list[CellOutcome] = []
    for cell in cells:
        keep_notebook(out / "cells" / cell.cell_id)
        status = cell_status(out, cell.cell_id)
        if status is not None and status.get("status") == "ok":
            finished.append(CellOutcome(cell.cell_id, cell.params, "skipped",
                                        wall_time_s=float(status.get("wall_time_s") or 0.0)))
        else:
            pending.append(cell)
    bar = tqdm(total=len(cells), desc=f"sweep {exp.name}", unit="cell", disable=not progress)
    plan = SweepPlan(exp, out, tasks, where,
                 on_event, cell_concurrency, result, bar)
    for outcome in finished:
        plan.record(outcome)
    pending = _schedule(pending)
    try:
        if executor == "inline":
            _run_inline(pending, plan, workers, settings)
        else:
            from .papermill_cells import run_papermill

            run_papermill(pending, plan, workers, Path(template) if template else None)
    except KeyboardInterrupt:
        result.wall_time_s = round(time.perf_counter() - t0, 3)
        print(f"\ninterrupted: {result.done} cells done, {result.failed} failed, "
              f"{len(cells) - len(result.cells)} not finished; finished cells are saved in {out}; "
              "run the same sweep again to resume", file=sys.stderr, flush=True)
        raise
    finally:
        bar.close()
    order = {c.cell_id: i for i, c in enumerate(cells)}
    result.cells.sort(key=lambda c: order[c.cell_id])
    result.wall_time_s = round(time.perf_counter() - t0, 3)
    return result


def _schedule(cells: list[Cell]) -> list[Cell]:
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


# preparing the results dir -------------------------------------------------------------------------
def _prepare(out: Path, exp: Experiment, tasks: list[Task], cells: list[Cell]) -> None:
    """Refuse a dir holding other cells; write experiment.yaml and tasks.jsonl (self-contained)."""
    known = {c.cell_id for c in cells}
    cells_dir = out / "cells"
    stale = sorted(p.name for p in cells_dir.iterdir() if p.is_dir() and p.name not in known) \
        if cells_dir.is_dir() else []
    if stale:
        raise ConfigError(
            f"out dir {out} already holds {len(stale)} cell(s) of a different experiment or config "
            f"(e.g. {stale[0]}); their results would mix with these: choose another out dir or remove it"
        )
    out.mkdir(parents=True, exist_ok=True)
    snapshot = exp.model_copy(update={"tasks": "tasks.jsonl", "task_ids": None, "limit": None})
    write_text_atomic(out / "tasks.jsonl", "".join(t.model_dump_json() + "\n" for t in tasks))
    write_text_atomic(out / "experiment.yaml", f"# written by promptlab sweep; tasks.jsonl holds the selected tasks\n"
                                           f"{snapshot.to_yaml()}")


def run_notebook_cell(results_dir: str, cell_id: str = "", params_json: str = "", experiment_path: str = "",
                      cache_dir: str = "", notebook_path: str = "", concurrency: int = 4) -> dict[str, Any]:
    """Run one cell from the run_cell notebook: find it in the experiment, run it, write its results.

    The experiment is `experiment_path`, else `<results_dir>/experiment.yaml`. Returns the cell's
    status plus "litellm_imported" (whether this process imported litellm). Raises SweepCellError
    after recording a failed cell, so papermill marks the notebook failed.
    """
    from .loops import run_sync

    out = Path(results_dir).resolve()
    exp = load_experiment(experiment_path or out / "experiment.yaml")
    tasks = exp.load_tasks()
    cell = exp.find_cell(cell_id, json.loads(params_json) if params_json else None)
    preflight_cells([cell], tasks)
    if not (out / "experiment.yaml").is_file():
        _prepare(out, exp, tasks, exp.cells(tasks))
    status, exc = run_sync(aexecute_cell(out, cell, tasks, exp.replicates, cache=cache_dir or None,
                                         concurrency=concurrency, notebook=notebook_path or None))
    if exc is not None:
        raise SweepCellError(cell.cell_id, cell.params, f"{type(exc).__name__}: {exc}",
                             notebook=notebook_path or None, ename=type(exc).__name__, evalue=str(exc)) from exc
    return {**status, "litellm_imported": "litellm" in sys.modules}


# the inline executor -------------------------------------------------------------------------------
def _run_inline(pending: list[Cell], plan: SweepPlan, workers: int, settings: Settings | None) -> None:
    async def main() -> None:
        sem = asyncio.Semaphore(workers)

        async def one(cell: Cell) -> None:
            async with sem:
                t0 = time.perf_counter()
                await aexecute_cell(plan.out, cell, plan.tasks, plan.exp.replicates, cache=plan.cache_dir,
                                    on_event=plan.on_event, concurrency=plan.cell_concurrency, settings=settings)
                plan.record(cell_outcome(plan, cell, time.perf_counter() - t0))

        await asyncio.gather(*(one(c) for c in pending))

    _run_interruptible(main)


def _run_interruptible(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a coroutine on a fresh event loop in a worker thread (so it works inside Jupyter too);
    Ctrl-C cancels it, waits for the cancellation (running writes finish) and re-raises."""
    box: dict[str, Any] = {}
    ready = threading.Event()

    async def wrapper() -> None:
        box["loop"], box["task"] = asyncio.get_running_loop(), asyncio.current_task()
        ready.set()
        await main()

    def target() -> None:
        try:
            asyncio.run(wrapper())
        except BaseException as e:  # noqa: BLE001 -- re-raised in the caller's thread
            box["error"] = e
        finally:
            ready.set()

    thread = threading.Thread(target=target, name="promptlab-sweep", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.1)
    except KeyboardInterrupt:
        ready.wait()
        if "task" in box:
            box["loop"].call_soon_threadsafe(box["task"].cancel)
        thread.join()
        raise
    err = box.get("error")
    if err is not None and not isinstance(err, asyncio.CancelledError):
        raise err


__all__ = ["INFRASTRUCTURE_ERRORS", "CellOutcome", "Executor", "SweepResult", "aexecute_cell", "arun_cell", "cell_error",
           "experiment_provenance", "keep_notebook", "run_notebook_cell", "sweep"]
