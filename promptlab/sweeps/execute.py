"""One sweep cell, shared by every executor: running its tasks x replicates, writing its results, the
error of a failed cell, the outcome a sweep reports, and `run_cell_by_id`, the importable entry point that
runs one cell in another process (the papermill notebook, a Dask task).

A cell whose code raises is recorded as failed (kind SweepCellError); an infrastructure failure (a provider
error after retries, a missing key, a lost worker) fails it with kind "infrastructure", so the next sweep
runs it again. A cell in which the sweep's spending cap refused a model call (`promptlab.llm.spending.cap`) is "cut"
(kind "spending_cap"), however its loop handled the refusal: a sweep with a higher cap runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, ResultsDiskFull, SpendingCapExceeded, SweepCellError
from ..events import EventHandler
from ..llm.spending.cap import SpendingCap, charges
from ..llm.spending.ledger import ledger_in
from ..llm.spending.tally import Tally
from ..record import Run, Task
from ..results.status import SPENDING_CAP_KIND
from .cell_process import frozen_heap
from .cells import Cell, config_models, preflight_cells, runs_in_flight
from .experiment import load_experiment
from .plan import CellOutcome, SweepPlan, spent_by
from .results_dir import experiment_provenance, prepare_results_dir

if TYPE_CHECKING:
    from ..llm.call.settings import Settings


async def arun_cell(
    cell: Cell,
    tasks: list[Task],
    replicates: int,
    *,
    cache: str | None = None,
    on_event: EventHandler | None = None,
    concurrency: int | None = None,
    settings: Settings | None = None,
    provenance: dict[str, Any] | None = None,
) -> tuple[list[Run], BaseException | None]:
    """Run a cell's tasks x replicates, at most `concurrency` at once (None: as many as its models take calls at
    once, `runs_in_flight`); returns the finished runs (in task, sample order) and the first exception raised, if
    any. `provenance` (e.g. {"experiment_hash": ...}) is added to every run's `Run.provenance`."""
    from ..loops.registry import get_loop
    from ..loops.runtime.provenance import provenance_scope

    spec = get_loop(cell.loop)
    config = spec.config_cls.model_validate(cell.config)
    at_once = concurrency if concurrency is not None else runs_in_flight(config_models(config), settings)
    sem = asyncio.Semaphore(max(1, at_once))
    full: list[ResultsDiskFull] = []  # once the results disk is full, no run starts: its paid calls would go uncounted

    async def one(task: Task, sample: int) -> Run:
        async with sem:
            if full:
                raise full[0]
            try:
                if settings is None:
                    return await spec.arun(task, config, sample=sample, on_event=on_event, cache=cache)
                return await spec.arun(task, config, sample=sample, on_event=on_event, cache=cache, settings=settings)
            except ResultsDiskFull as e:
                full.append(e)
                raise

    with provenance_scope(provenance or {}):
        jobs = [one(t, s) for t in tasks for s in range(replicates)]
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
    runs = [o for o in outcomes if isinstance(o, Run)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    for e in errors:
        if not isinstance(e, Exception):  # cancellation, Ctrl-C: not a cell failure
            raise e
    return runs, (full[0] if full else errors[0] if errors else None)


INFRASTRUCTURE_ERRORS = frozenset({"ProviderError", "MissingKeyError", "CacheUnavailableError"})
"""Exception names that mean an outage, not a bug (a kernel reports only the name)."""


def cell_error(
    cell: Cell,
    exc: BaseException | None = None,
    *,
    notebook: str | None = None,
    cell_index: int | None = None,
    ename: str | None = None,
    evalue: str | None = None,
    infrastructure: bool = False,
) -> dict[str, Any]:
    """The error dict of a failed cell, for status.json (`infrastructure`: an outage, e.g. a lost worker)."""
    ename = ename or (type(exc).__name__ if exc is not None else None)
    evalue = evalue if evalue is not None else (str(exc) if exc is not None else None)
    err = SweepCellError(
        cell.cell_id,
        cell.params,
        f"{ename}: {evalue}",
        notebook=notebook,
        cell_index=cell_index,
        ename=ename,
        evalue=evalue,
    )
    infrastructure = infrastructure or bool(getattr(exc, "infrastructure", False)) or ename in INFRASTRUCTURE_ERRORS
    kind = (
        SPENDING_CAP_KIND
        if isinstance(exc, SpendingCapExceeded) or ename == SpendingCapExceeded.__name__
        else "infrastructure"
        if infrastructure
        else "SweepCellError"
    )
    return {
        "kind": kind,
        "message": str(err),
        "notebook": notebook,
        "cell_index": cell_index,
        "ename": ename,
        "evalue": evalue,
    }


async def aexecute_cell(
    out: Path,
    cell: Cell,
    tasks: list[Task],
    replicates: int,
    *,
    cache: str | None = None,
    on_event: EventHandler | None = None,
    concurrency: int | None = None,
    notebook: str | None = None,
    settings: Settings | None = None,
    spending_cap: SpendingCap | None = None,
) -> tuple[dict[str, Any], BaseException | None]:
    """Run a cell and write its results (failed, with the error, when a run raised; cut when `spending_cap`, the
    sweep's spending cap, refused one of its model calls, even where the loop recorded the refusal and went on)."""
    from ..results.store import cell_status, write_cell

    t0 = time.perf_counter()
    scope: contextlib.AbstractContextManager[list[SpendingCapExceeded]] = (
        spending_cap.scope() if spending_cap is not None else contextlib.nullcontext([])
    )
    with scope as refused, charges() as paid:  # what the cell paid, runs the cap stopped included
        try:
            runs, exc = await arun_cell(
                cell,
                tasks,
                replicates,
                cache=cache,
                on_event=on_event,
                concurrency=concurrency,
                settings=settings,
                provenance=experiment_provenance(out),
            )
        except Exception as e:  # noqa: BLE001 -- any failure to start the cell's runs fails the cell
            runs, exc = [], e
    if isinstance(exc, ResultsDiskFull):  # not the cell's failure: the sweep stops, named, and resumes later
        raise exc
    if refused and not isinstance(exc, SpendingCapExceeded):
        exc = refused[0]
    error = cell_error(cell, exc, notebook=notebook) if exc is not None else None
    wall = round(time.perf_counter() - t0, 4)
    spent = (paid.tokens, paid.cost_usd) if spending_cap is not None else None  # else: its runs' own figures
    await asyncio.to_thread(
        write_cell, out, cell.cell_id, cell.params, runs, error=error, wall_time_s=wall, spent=spent
    )
    return (cell_status(out, cell.cell_id) or {"cell_id": cell.cell_id, "status": "failed"}), exc


def cell_outcome(plan: SweepPlan, cell: Cell, wall: float) -> CellOutcome:
    """A ran cell's outcome, read from its status.json (failed when none was written) and its runs.jsonl."""
    from ..results.store import cell_status, read_runs

    status = cell_status(plan.out, cell.cell_id) or {}
    ok = status.get("status") == "ok"
    err = status.get("error") or {}
    errors = int(status.get("n_errors") or 0)
    message = str(err.get("message") or "no status.json was written") if not ok else None
    message = message or (f"{errors} error(s) recorded in its runs (run.errors)" if errors else None)
    spend = spent_by(read_runs(plan.out, cell.cell_id)) if status else Tally()
    outcome: Literal["ok", "failed", "cut"] = "ok" if ok else "cut" if status.get("status") == "cut" else "failed"
    return CellOutcome(cell.cell_id, cell.params, outcome, message, float(status.get("wall_time_s") or wall), spend)


def cell_spending_cap(
    results_dir: str | Path, max_cost: float | None = None, default: float | None = None
) -> SpendingCap | None:
    """The spending cap a cell process runs under, on the results dir's ledger: `max_cost` when given (a
    Dask task gets it as an argument), else the one a sweep handed over in the environment (a papermill
    kernel: `SpendingCap.from_env`), else `default` (the experiment file's max_cost), else None."""
    if max_cost is None:
        handed = SpendingCap.from_env()
        if handed is not None or default is None:
            return handed
        max_cost = default
    return SpendingCap(ledger_in(results_dir), max_cost)


def _checked_parameters(results_dir: Any, params_json: Any, concurrency: Any) -> dict[str, Any] | None:
    """The cell's params from `params_json` (None when empty), once the notebook parameters are checked.

    Raises:
        ConfigError: naming the parameter (an empty results_dir, params_json that is not a JSON object,
            concurrency that is not a whole number >= 1).
    """
    if not isinstance(results_dir, (str, os.PathLike)) or not str(results_dir).strip():
        raise ConfigError(f"results_dir: {results_dir!r} is not a results directory (an empty path is refused)")
    if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
        raise ConfigError(f"concurrency: {concurrency!r} is not a whole number >= 1")
    if not params_json:
        return None
    try:
        params = json.loads(params_json)
    except (TypeError, ValueError, RecursionError) as e:
        raise ConfigError(f"params_json: {str(params_json)[:80]!r} is not JSON ({e})") from None
    if not isinstance(params, dict):
        raise ConfigError(f"params_json: {str(params_json)[:80]!r} is not a JSON object of the cell's params")
    return params


def run_cell_by_id(
    results_dir: str,
    cell_id: str = "",
    params_json: str = "",
    experiment_path: str = "",
    cache_dir: str = "",
    notebook_path: str = "",
    concurrency: int | None = None,
    max_cost: float | None = None,
    settings_json: str = "",
) -> tuple[Cell, dict[str, Any], BaseException | None]:
    """Find a cell in the experiment, run it and write its results; returns (cell, status, exception).

    The experiment is `experiment_path`, else `<results_dir>/experiment.yaml`; the results dir is prepared
    (experiment.yaml, tasks.jsonl) if it is not yet. The cell runs under a spending cap (`cell_spending_cap`):
    `max_cost`, else the one the sweep handed over in the environment, else the experiment file's. Its calls
    follow the settings in `settings_json` (a Dask task's argument), else those the sweep handed over in
    PROMPTLAB_SETTINGS (a papermill kernel), else the defaults; a bad value raises ConfigError naming it. Its runs
    go `concurrency` at once (None: as many as its models take calls at once in this process, `runs_in_flight`)."""
    from ..aio import run_sync
    from ..llm.call.settings import settings_from_env, settings_from_json

    settings = settings_from_json(settings_json, "settings_json") if settings_json else settings_from_env()
    params = _checked_parameters(results_dir, params_json, concurrency)
    out = Path(results_dir).resolve()
    exp = load_experiment(experiment_path or out / "experiment.yaml")
    tasks = exp.load_tasks()
    cell = exp.find_cell(cell_id, params)
    spending_cap = cell_spending_cap(out, max_cost, default=exp.max_cost)
    preflight_cells([cell], tasks, priced=spending_cap is not None)
    if not (out / "experiment.yaml").is_file():
        prepare_results_dir(out, exp, tasks, exp.cells(tasks))
    with frozen_heap():  # as a sweep in this process does: full GC passes walk only what the cell makes
        status, exc = run_sync(
            aexecute_cell(
                out,
                cell,
                tasks,
                exp.replicates,
                cache=cache_dir or None,
                concurrency=concurrency,
                notebook=notebook_path or None,
                spending_cap=spending_cap,
                settings=settings,
            )
        )
    return cell, status, exc


def run_notebook_cell(
    results_dir: str,
    cell_id: str = "",
    params_json: str = "",
    experiment_path: str = "",
    cache_dir: str = "",
    notebook_path: str = "",
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Run one cell from the run_cell notebook (`run_cell_by_id`); with neither `cell_id` nor `params_json`,
    the experiment's first cell.

    Returns the cell's status plus "litellm_imported" (whether this process imported litellm). Raises
    SweepCellError after recording a failed cell, so papermill marks the notebook failed.
    """
    if not cell_id and not params_json:
        exp = load_experiment(experiment_path or Path(results_dir) / "experiment.yaml")
        cell_id = exp.cells()[0].cell_id
    cell, status, exc = run_cell_by_id(
        results_dir, cell_id, params_json, experiment_path, cache_dir, notebook_path, concurrency
    )
    if exc is not None:
        raise SweepCellError(
            cell.cell_id,
            cell.params,
            f"{type(exc).__name__}: {exc}",
            notebook=notebook_path or None,
            ename=type(exc).__name__,
            evalue=str(exc),
        ) from exc
    return {**status, "litellm_imported": "litellm" in sys.modules}
