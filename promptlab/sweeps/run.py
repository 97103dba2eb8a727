"""Run an experiment's cells, skipping finished ones: inline (asyncio), one papermill notebook per cell,
or as tasks on a Dask cluster.

    result = sweep("experiments/demo.yaml", "results/demo", executor="papermill", workers=2)

A cell is finished when its status.json says "ok" (see `promptlab.results`): such cells are skipped,
failed or missing ones are run (again). Before running, the results dir gets `experiment.yaml` (the
experiment with its task selection applied) and `tasks.jsonl` (the selected tasks), so it is
self-contained; a results dir that holds cells of another experiment is refused.

Executors (`EXECUTORS`, by name; the package's modules: `plan` what executors share, `cell` one cell,
`inline`, `papermill`, `dask` the executors, `notebook` the run_cell notebook):
- "inline": cells run concurrently in this process (at most `workers` at once; inside a cell its
  tasks x replicates run concurrently too, at most `cell_concurrency`). Works inside a notebook.

Runs in flight: a cell runs `cell_concurrency` of its tasks x replicates at once, by default (None) as many as the
most limited of its models takes calls at once in the process that runs it (`promptlab.sweeps.cells.runs_in_flight`:
`--max-concurrency MODEL=N`, else the alias's `max_concurrency`, else `Settings.max_concurrency`, 4; a papermill
kernel's or local Dask worker's share of it; a local model at most its PROMPTLAB_LOCAL_INSTANCES). Raising a model's
limit thus raises the runs in flight too; a `cell_concurrency` given wins. The calls in flight stay bounded by each
model's limit in every case: cells run at once (`workers`) share it.
- "papermill": each cell executes the run_cell notebook in its own kernel (`workers` at once); the
  notebook writes the cell's results itself, and the executed notebook is kept as
  cells/<cell_id>/run_cell.ipynb. Each kernel gets PROMPTLAB_LOCAL_THREADS = cores // workers,
  PROMPTLAB_LIMIT_SHARE = the number of kernels at once and, given `settings`, PROMPTLAB_SETTINGS (their JSON).
- "dask": each cell is a task on a `distributed` cluster (a LocalCluster of `workers` processes, or the
  scheduler at `scheduler`); the task writes the cell's results itself into the results dir, which
  every worker must reach at the same absolute path (see docs/many-machines.md); `settings` go with each task.

The progress bar counts finished runs (cells x tasks x replicates; tqdm's time estimate follows from them) and shows
cells done / failed / skipped and, for the cells run in this sweep, the calls, the tokens and cost spent and the
cache hits (also on `SweepResult.spend`).

One cell can be run by hand (params_json is optional when cell_id and experiment_path are given;
`promptlab sweep EXPERIMENT --list` prints the cell ids)::

    papermill notebooks/run_cell.ipynb out.ipynb -p experiment_path experiments/demo.yaml \\
        -p cell_id <id> -p results_dir results/x

Cells start with the loops interleaved (round robin, each loop's cells in expansion order): cells of
one loop that differ only in a stopping rule make the same first model calls, so run one after the
other they answer them from the call cache while concurrent workers take other loops.

Every cell is checked first (`promptlab.sweeps.cells.preflight_cells`): every model (its name, its API key
in the environment, a local file that exists), and each loop's config against every task (e.g. score_source
'grounded' on a task without examples): a problem raises ConfigError listing them all before anything is
written or any model is called.

A cell whose code raises is recorded as failed (status.json error: kind SweepCellError, message,
notebook, cell_index, ename, evalue) and the sweep goes on. An infrastructure failure (a provider error
after retries, a missing key, a run left incomplete by one, `Run.incomplete`, or a lost Dask worker) fails its cell with
kind "infrastructure", never "ok": the next sweep runs it again, its successful calls replayed from the
cache. A model failure (an unparseable reply) is research data: its cell is ok. Under a spending cap
(`max_cost`, `promptlab.llm.spending_cap`) a cell whose model call the cap refused is "cut" (status.json status "cut",
error kind "spending_cap"): counted apart (`SweepResult.cut`), re-run by a sweep with a higher cap. Ctrl-C stops scheduling, lets running
writes finish (every file is written atomically) and re-raises KeyboardInterrupt; run again to resume.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..events import EventHandler
from ..llm.ledger_file import ledger_in
from ..llm.spending_cap import SpendingCap
from .cells import Cell, preflight_cells
from .dirlock import hold_results_dir
from .executors import EXECUTORS, get_executor
from .experiment import Experiment, load_experiment
from .plan import (
    CellOutcome,
    SweepPlan,
    SweepResult,
    frozen_heap,
    keep_notebook,
    prepare_results_dir,
    progress_bar,
    schedule,
)

if TYPE_CHECKING:
    from ..llm.settings import Settings

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
            the cell's models takes calls at once (see "Runs in flight" above).
        template: the run_cell notebook for the papermill executor.
        settings: how calls are made (retries, timeouts, deadline, concurrency per model), in every cell: a
            papermill kernel gets them in PROMPTLAB_SETTINGS, a Dask task as an argument; each process that
            runs cells takes its share of a concurrency limit (PROMPTLAB_LIMIT_SHARE).
        scheduler: a Dask scheduler address (e.g. tcp://10.0.0.5:8786) for the dask executor; None starts a
            LocalCluster of `workers` processes.
        max_cost: a cap in USD on what model calls pay in this results dir, over every sweep of it (default:
            the experiment's `max_cost`; see `promptlab.llm.spending_cap`): a request that would pass it is not made and
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
    from ..llm.cache.location import cache_location, default_cache_location, open_cache
    from ..results.store import cell_status

    spec = get_executor(executor)
    given = {"settings": settings, "template": template, "scheduler": scheduler}
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
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment)
    if out_dir is not None and not str(out_dir).strip():
        raise ConfigError("out_dir (--out): an empty path would write the results into the working directory")
    out = Path(out_dir if out_dir is not None else Path("results") / exp.name).resolve()
    tasks = exp.load_tasks()
    cells = exp.cells(tasks)
    cap = max_cost if max_cost is not None else exp.max_cost
    spending_cap = SpendingCap(ledger_in(out), cap) if cap is not None else None
    models = preflight_cells(cells, tasks, priced=spending_cap is not None)
    if settings is not None:  # a concurrency override for a model no cell calls is a typo, not a no-op
        settings.check_models(models, "per_model_concurrency (--max-concurrency)")
    where = cache_location(cache)  # the same cache for every worker: an absolute directory or a URL
    open_cache(where, origin="the cache argument" if cache else default_cache_location()[1])  # fails before any cell
    spec.precheck(given)  # e.g. a scheduler that does not answer: before the results dir is written
    with hold_results_dir(out):  # one sweep at a time per results dir: a second stops here, naming this one
        prepare_results_dir(out, exp, tasks, cells)
        t0 = time.perf_counter()
        result = SweepResult(exp.name, out, executor, max_cost=cap)
        pending: list[Cell] = []
        finished: list[CellOutcome] = []
        for cell in cells:
            keep_notebook(out / "cells" / cell.cell_id)
            status = cell_status(out, cell.cell_id)
            if status is not None and status.get("status") == "ok":
                finished.append(
                    CellOutcome(
                        cell.cell_id, cell.params, "skipped", wall_time_s=float(status.get("wall_time_s") or 0.0)
                    )
                )
            else:
                pending.append(cell)
        runs_per_cell = len(tasks) * exp.replicates
        bar = progress_bar(exp.name, len(cells), runs_per_cell, disable=not progress)
        plan = SweepPlan(
            exp,
            out,
            tasks,
            where,
            on_event,
            cell_concurrency,
            result,
            bar,
            workers=workers,
            settings=settings,
            template=Path(template) if template else None,
            scheduler=scheduler,
            spending_cap=spending_cap,
            runs_per_cell=runs_per_cell,
            on_cell=on_cell,
        )
        for outcome in finished:
            plan.record(outcome)
        try:
            if pending:
                with (
                    frozen_heap()
                ):  # full GC passes walk only what the sweep makes, not every imported module's objects
                    spec.load()(schedule(pending), plan)
        except KeyboardInterrupt:
            result.wall_time_s = round(time.perf_counter() - t0, 3)
            bar.close()  # its last state before this line, not drawn again under it
            print(
                f"\ninterrupted: {result.done} cells done, {result.failed} failed, "
                f"{len(cells) - len(result.cells)} not finished; finished cells are saved in {out}; "
                "run the same sweep again to resume",
                file=sys.stderr,
                flush=True,
            )
            raise
        finally:
            bar.close()
            if spending_cap is not None:
                result.spent_usd = spending_cap.spent()
        order = {c.cell_id: i for i, c in enumerate(cells)}
        result.cells.sort(key=lambda c: order[c.cell_id])
        result.wall_time_s = round(time.perf_counter() - t0, 3)
        return result


__all__ = ["Executor", "sweep"]
