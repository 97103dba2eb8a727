"""Run an experiment's cells, skipping finished ones: inline (asyncio), one papermill notebook per cell,
or as tasks on a Dask cluster. `sweep` validates its options, plans (preflight, cache, results dir, which
cells are finished) and runs the pending cells on the executor. See docs/sweeps.md ("How a sweep runs").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..events import EventHandler
from ..llm.spending.cap import SpendingCap
from ..llm.spending.ledger import ledger_in
from .cell_process import frozen_heap
from .cells import Cell, preflight_cells
from .dirlock import hold_results_dir
from .executors import EXECUTORS, ExecutorSpec, get_executor
from .experiment import Experiment, load_experiment
from .plan import CellOutcome, SweepPlan, SweepResult, progress_bar, schedule
from .results_dir import keep_notebook, prepare_results_dir

if TYPE_CHECKING:
    from ..llm.call.settings import Settings
    from ..record import Task

Executor = str
"""An executor's name: a key of `EXECUTORS` ("inline", "papermill", "dask")."""


def sweep(
    experiment: str | Path | Experiment,
    out_dir: str | Path | None = None,
    *,
    executor: Executor = "inline",
    workers: int = 2,
    on_event: EventHandler | None = None,
    progress: bool = True,
    cache: str | Path | None = None,
    cell_concurrency: int | None = None,
    template: str | Path | None = None,
    settings: Settings | None = None,
    scheduler: str | None = None,
    max_cost: float | None = None,
    on_cell: Callable[[CellOutcome], None] | None = None,
) -> SweepResult:
    """Run every unfinished cell of an experiment and write its results.

    Args:
        experiment: an experiment YAML path or an `Experiment`.
        out_dir: the results dir (default results/<experiment name>).
        executor: "inline" (in this process), "papermill" (one notebook kernel per cell) or "dask" (tasks on
            a distributed cluster); see `EXECUTORS`.
        workers: cells at once (dask: the LocalCluster's worker processes, one thread each).
        on_event: receives every loop event (inline executor only).
        progress: show a text tqdm bar (also in a notebook; `plan.progress_bar`) of cells done / failed /
            skipped, calls, tokens, cost and cache hits.
        cache: the call cache, a directory or a URL such as redis://host:6379/0 (default `$PROMPTLAB_CACHE`,
            else `$PROMPTLAB_CACHE_DIR` or ./.promptlab/cache).
        cell_concurrency: runs (tasks x replicates) at once inside a cell; None: as many as the most limited of
            the cell's models takes calls at once (docs/sweeps.md, "Runs in flight").
        template: the run_cell notebook for the papermill executor.
        settings: how calls are made (retries, timeouts, deadline, concurrency per model), in every cell: a
            papermill kernel gets them in PROMPTLAB_SETTINGS, a Dask task as an argument; each process that
            runs cells takes its share of a concurrency limit (PROMPTLAB_LIMIT_SHARE).
        scheduler: a Dask scheduler address (e.g. tcp://10.0.0.5:8786) for the dask executor; None starts a
            LocalCluster of `workers` processes.
        max_cost: a cap in USD on what model calls pay in this results dir, over every sweep of it (default:
            the experiment's `max_cost`; see `promptlab.llm.spending.cap`): a request that would pass it is not made and
            its cell is "cut"; a sweep with a higher cap resumes the cut cells.
        on_cell: called in this process with each cell's outcome once it is recorded (skipped cells included), on
            every executor; e.g. `promptlab.exports.LiveMlflow(out).cell_finished` logs each cell's runs to MLflow.

    Returns:
        A SweepResult with each cell's outcome and what was spent.

    Raises:
        ConfigError: a bad experiment, an unknown executor, an option the executor does not take, a results
            dir holding another experiment's cells, or a cap with a model whose price is unknown.
        KeyboardInterrupt: on Ctrl-C, after running writes finished (run again to resume).
    """
    given = {"settings": settings, "template": template, "scheduler": scheduler}
    spec = _check_options(executor, given, on_event=on_event, workers=workers, cell_concurrency=cell_concurrency)
    exp, out, tasks, cells = _experiment_cells(experiment, out_dir)
    cap, spending_cap = _spending_cap(exp, out, max_cost)
    where = _preflight(cells, tasks, spending_cap, settings, cache)
    spec.precheck(given)  # e.g. a scheduler that does not answer: before the results dir is written
    with hold_results_dir(out):  # one sweep at a time per results dir: a second stops here, naming this one
        prepare_results_dir(out, exp, tasks, cells)
        t0 = time.perf_counter()
        result = SweepResult(exp.name, out, executor, max_cost=cap)
        runs_per_cell = len(tasks) * exp.replicates
        plan = SweepPlan(
            exp,
            out,
            tasks,
            where,
            on_event,
            cell_concurrency,
            result,
            progress_bar(exp.name, len(cells), runs_per_cell, disable=not progress),
            workers=workers,
            settings=settings,
            template=Path(template) if template else None,
            scheduler=scheduler,
            spending_cap=spending_cap,
            runs_per_cell=runs_per_cell,
            on_cell=on_cell,
        )
        return _run_pending(spec, plan, cells, t0)


def _experiment_cells(
    experiment: str | Path | Experiment, out_dir: str | Path | None
) -> tuple[Experiment, Path, list[Task], list[Cell]]:
    """The experiment (loaded from its file), its results dir, its tasks and its cells."""
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment)
    tasks = exp.load_tasks()
    return exp, _results_dir(exp, out_dir), tasks, exp.cells(tasks)


def _spending_cap(exp: Experiment, out: Path, max_cost: float | None) -> tuple[float | None, SpendingCap | None]:
    """The cap in USD (`max_cost`, else the experiment's) and the spending cap over the results dir's ledger."""
    cap = max_cost if max_cost is not None else exp.max_cost
    return cap, SpendingCap(ledger_in(out), cap) if cap is not None else None


def _results_dir(exp: Experiment, out_dir: str | Path | None) -> Path:
    """The sweep's results dir: `out_dir`, or results/<experiment name>; an empty path is refused."""
    if out_dir is not None and not str(out_dir).strip():
        raise ConfigError("out_dir (--out): an empty path would write the results into the working directory")
    return Path(out_dir if out_dir is not None else Path("results") / exp.name).resolve()


def _run_pending(spec: ExecutorSpec, plan: SweepPlan, cells: list[Cell], t0: float) -> SweepResult:
    """Record the cells already finished, run the rest, and return the result in the experiment's cell order."""
    pending, finished = _split_finished(plan.out, cells)
    for outcome in finished:
        plan.record(outcome)
    _run(spec, plan, pending, len(cells), t0)
    result = plan.result
    order = {c.cell_id: i for i, c in enumerate(cells)}
    result.cells.sort(key=lambda c: order[c.cell_id])
    result.wall_time_s = round(time.perf_counter() - t0, 3)
    return result


def _check_options(
    executor: str,
    given: Mapping[str, object],
    *,
    on_event: EventHandler | None,
    workers: int,
    cell_concurrency: int | None,
) -> ExecutorSpec:
    """The executor named, once each option given is one it takes and the counts are at least 1."""
    spec = get_executor(executor)
    for name, value in given.items():
        if value is not None and name not in spec.options:
            takes = [s.name for s in EXECUTORS.values() if name in s.options]
            raise ConfigError(f"{name}: only the {' or '.join(takes)} executor takes {name}, not {executor!r}")
    if on_event is not None and executor != "inline":
        raise ConfigError(f"on_event: only the inline executor sends loop events, not {executor!r}")
    if workers < 1:
        raise ConfigError(f"workers: {workers} must be at least 1")
    if cell_concurrency is not None and cell_concurrency < 1:
        raise ConfigError(f"cell_concurrency: {cell_concurrency} must be at least 1")
    return spec


def _preflight(
    cells: list[Cell],
    tasks: list[Task],
    spending_cap: SpendingCap | None,
    settings: Settings | None,
    cache: str | Path | None,
) -> str:
    """Check every cell's models and configs, the settings' models and the cache before anything is written;
    returns the cache's location (the same for every worker: an absolute directory or a URL)."""
    from ..llm.cache.location import cache_location, default_cache_location, open_cache

    models = preflight_cells(cells, tasks, priced=spending_cap is not None)
    if settings is not None:  # a concurrency override for a model no cell calls is a typo, not a no-op
        settings.check_models(models, "per_model_concurrency (--max-concurrency)")
    where = cache_location(cache)
    open_cache(where, origin="the cache argument" if cache else default_cache_location()[1])  # fails before any cell
    return where


def _split_finished(out: Path, cells: list[Cell]) -> tuple[list[Cell], list[CellOutcome]]:
    """Plan: the cells still to run, and the outcomes of those already "ok" (skipped)."""
    from ..results.store import cell_status

    pending: list[Cell] = []
    finished: list[CellOutcome] = []
    for cell in cells:
        keep_notebook(out / "cells" / cell.cell_id)
        status = cell_status(out, cell.cell_id)
        if status is not None and status.get("status") == "ok":
            wall = float(status.get("wall_time_s") or 0.0)
            finished.append(CellOutcome(cell.cell_id, cell.params, "skipped", wall_time_s=wall))
        else:
            pending.append(cell)
    return pending, finished


def _run(spec: ExecutorSpec, plan: SweepPlan, pending: list[Cell], n_cells: int, t0: float) -> None:
    """Run the pending cells on the executor; on Ctrl-C say what is saved and re-raise."""
    result, bar = plan.result, plan.bar
    try:
        if pending:
            with frozen_heap():  # full GC passes walk only what the sweep makes, not every imported module's objects
                spec.load()(schedule(pending), plan)
    except KeyboardInterrupt:
        result.wall_time_s = round(time.perf_counter() - t0, 3)
        bar.close()  # its last state before this line, not drawn again under it
        print(
            f"\ninterrupted: {result.done} cells done, {result.failed} failed, "
            f"{n_cells - len(result.cells)} not finished; finished cells are saved in {plan.out}; "
            "run the same sweep again to resume",
            file=sys.stderr,
            flush=True,
        )
        raise
    finally:
        bar.close()
        if plan.spending_cap is not None:
            result.spent_usd = plan.spending_cap.spent()


__all__ = ["Executor", "sweep"]
