"""The papermill executor of a sweep: each cell runs the run_cell notebook in its own kernel.

`workers` threads each drive one papermill run at a time; the notebook writes the cell's results itself
(status.json last) and the executed notebook is kept as cells/<cell_id>/run_cell.ipynb. A notebook that
raises, or a kernel that dies, is recorded as a failed cell (cell index, ename, evalue) and the sweep
goes on; a full results disk is not a cell's failure: it stops the sweep (ResultsDiskFull, naming the file) once the
cells running have finished their calls, as the inline executor stops. Each kernel gets PROMPTLAB_LOCAL_THREADS = cores // workers so workers share the cores, and
PROMPTLAB_LIMIT_SHARE = the number of kernels at once, so each takes its share of a model's limits. The
sweep's call settings (e.g. `--max-concurrency`) reach each kernel as JSON in PROMPTLAB_SETTINGS
(`promptlab.llm.call.settings`), a concurrency limit of theirs divided by the share too. Under a spending cap each kernel
gets PROMPTLAB_MAX_COST and PROMPTLAB_SPENDING_LEDGER (`promptlab.llm.spending.cap`). A cache location that holds a secret
(a Redis URL with a password) reaches the kernels as PROMPTLAB_CACHE, never as a notebook parameter, so no
executed notebook holds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ResultsDiskFull, is_disk_full
from ..llm.cache.backend import CACHE_URL_ENV, holds_secret
from .cell_process import cell_process_env, env_defaults, env_set, settings_env
from .cells import Cell
from .execute import cell_error, cell_outcome
from .notebook import TEMPLATE
from .plan import CellOutcome, SweepPlan
from .results_dir import PARTIAL_NOTEBOOK, disk_full_named, keep_notebook

KERNEL_ARGS = ["--log-level=CRITICAL"]
"""Arguments of each papermill cell's kernel (quiet: its warnings would repeat once per cell)."""
KERNEL_START_TIMEOUT_S = 300
"""Seconds a cell's kernel may take to start before its cell fails (papermill's own default, 60 s, was passed on a
busy machine starting several kernels at once; the cell then failed with "Kernel didn't respond")."""


def run_papermill(pending: list[Cell], plan: SweepPlan) -> None:
    """`plan.workers` daemon threads each run one papermill cell at a time. On Ctrl-C (or SIGTERM) no further
    cell starts, every running kernel is ended (`end_kernels`: no request of it reaches a provider once the sweep
    has exited) and the interrupt is raised; a cell it was running is re-run by the next sweep."""
    import queue

    nb = plan.template or TEMPLATE
    todo: queue.SimpleQueue[Cell] = queue.SimpleQueue()
    for cell in pending:
        todo.put(cell)
    stop = threading.Event()
    errors: list[BaseException] = []
    started: list[Any] = []  # the kernel managers of the cells, as their kernels start
    manager = kernel_manager_class(started)

    def worker() -> None:
        while not stop.is_set():
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            try:
                plan.record(_papermill_cell(cell, plan, nb, manager, stop))
            except BaseException as e:  # noqa: BLE001 -- a runner bug (not a cell failure): stop and re-raise
                errors.append(e)
                stop.set()

    kernels = min(plan.workers, len(pending))
    threads = [threading.Thread(target=worker, name=f"promptlab-cell-{i}", daemon=True) for i in range(kernels)]
    handed = {**(plan.spending_cap.env() if plan.spending_cap else {}), **settings_env(plan.settings)}
    if holds_secret(plan.cache_dir):  # a password reaches the kernels in their environment, never the notebook
        handed[CACHE_URL_ENV] = plan.cache_dir
    tidy_notebooks(plan.out)  # a sweep killed while papermill wrote left them
    with env_defaults(cell_process_env(plan.workers, kernels)), env_set(handed):
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except KeyboardInterrupt:
            stop.set()
            end_kernels(started)
            tidy_notebooks(plan.out)
            raise
    if errors:
        raise errors[0]


def kernel_manager_class(kernels: list[Any]) -> type:
    """jupyter_client's AsyncKernelManager (nbclient's) that appends itself to `kernels` as its kernel starts."""
    from jupyter_client.manager import AsyncKernelManager

    class SweepKernelManager(AsyncKernelManager):  # type: ignore[misc]
        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
            kernels.append(self)
            await super().start_kernel(**kw)

    return SweepKernelManager


def end_kernels(kernels: list[Any], wait_s: float = 10.0) -> None:
    """Kill each kernel's process group (jupyter_client starts a kernel in a session of its own, where Ctrl-C
    does not reach it) and wait for it to exit. Without this a kernel went on with its cell, and its requests,
    until nbclient's graceful shutdown at exit, or its parent poller, ended it: after the sweep had exited if a
    second Ctrl-C or SIGTERM cut that shutdown short."""
    for km in list(kernels):
        process = getattr(km.provisioner, "process", None)
        if process is None or process.poll() is not None:
            continue
        try:
            os.killpg(os.getpgid(process.pid), signal.SIGKILL)
        except ProcessLookupError:
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait_s)


def tidy_notebooks(out: Path) -> None:
    """Keep or remove every cell's `.run_cell.partial.ipynb` (`keep_notebook`): what a sweep interrupted, or killed,
    while papermill wrote leaves behind; the papermill executor calls it as it starts and as it stops."""
    for partial in (out / "cells").glob(f"*/{PARTIAL_NOTEBOOK}"):
        keep_notebook(partial.parent)


def _papermill_cell(cell: Cell, plan: SweepPlan, template: Path, manager: type, stop: threading.Event) -> CellOutcome:
    """Run one cell's notebook (its kernel by `manager`) and return its outcome; a full results disk, met by the
    kernel (its results) or here (the executed notebook, the cell's folder), raises ResultsDiskFull naming the file,
    after removing a notebook cut short, so the sweep stops as the inline executor's does. Once `stop` is set (the
    sweep ended the kernel) the cell is not recorded: KeyboardInterrupt is raised."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from ..results.store import cell_status, write_cell

    cell_dir = plan.out / "cells" / cell.cell_id
    final = cell_dir / "run_cell.ipynb"
    with disk_full_named(cell_dir):
        cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "status.json").unlink(missing_ok=True)  # a failed earlier attempt; ok cells never get here
    t0 = time.perf_counter()
    error: dict[str, Any] | None = None
    full: ResultsDiskFull | None = None
    try:
        pm.execute_notebook(
            str(template),
            str(cell_dir / PARTIAL_NOTEBOOK),
            parameters=_parameters(cell, plan, final),
            progress_bar=False,
            log_output=False,
            cwd=os.getcwd(),
            extra_arguments=KERNEL_ARGS,
            start_timeout=KERNEL_START_TIMEOUT_S,
            kernel_manager_class=manager,
        )
    except PapermillExecutionError as e:
        full = ResultsDiskFull.reported(e.evalue) if e.ename == ResultsDiskFull.__name__ else None
        error = cell_error(cell, notebook=str(final), cell_index=e.cell_index, ename=e.ename, evalue=e.evalue)
    except Exception as e:  # noqa: BLE001 -- a dead kernel, a kernel that did not start: the cell failed
        full = ResultsDiskFull(str(final), e) if is_disk_full(e) else None  # papermill writing the notebook
        error = cell_error(cell, e, notebook=str(final))
    finally:
        keep_notebook(cell_dir)  # a notebook papermill could not write whole is removed, not kept
    if stop.is_set():  # not a failure of the cell: the sweep is stopping and ended its kernel
        raise KeyboardInterrupt
    if full is not None:
        raise full
    wall = round(time.perf_counter() - t0, 4)
    if cell_status(plan.out, cell.cell_id) is None:  # the notebook did not record the cell itself
        error = error or cell_error(
            cell, notebook=str(final), ename="MissingStatus", evalue="the notebook finished without writing status.json"
        )
        write_cell(plan.out, cell.cell_id, cell.params, [], error=error, wall_time_s=wall)
    return cell_outcome(plan, cell, wall)


def _parameters(cell: Cell, plan: SweepPlan, notebook: Path) -> dict[str, Any]:
    """The run_cell notebook's parameters for this cell."""
    return {
        "results_dir": str(plan.out),
        "cell_id": cell.cell_id,
        "params_json": json.dumps(cell.params),
        "experiment_path": str(plan.out / "experiment.yaml"),
        "cache_dir": "" if holds_secret(plan.cache_dir) else plan.cache_dir,  # "": PROMPTLAB_CACHE
        "notebook_path": str(notebook),
        "concurrency": plan.cell_concurrency,
    }
