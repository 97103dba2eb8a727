"""The Dask executor of a sweep: each cell is a task on a `distributed` cluster.

More in docs/many-machines.md, section "promptlab.sweeps.dask".
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MissingDependencyError, ResultsDiskFull
from .cell_process import cell_process_env
from .cells import Cell
from .execute import cell_error, cell_outcome, run_cell_by_id
from .plan import CellOutcome, SweepPlan

RETRIES = 2
"""Retries of a task that raised (not of a cell that failed: that is recorded and the task returns)."""
CONNECT_TIMEOUT = "10s"
"""How long to wait for a scheduler address to answer when dask's config leaves
distributed.comm.timeouts.connect at its shipped default (30 s): a mistyped address fails in seconds."""
CACHE_URL_ENV, CACHE_DIR_ENV = "PROMPTLAB_CACHE", "PROMPTLAB_CACHE_DIR"


def run_dask(pending: list[Cell], plan: SweepPlan) -> None:
    """Run one task per cell on a LocalCluster (or `plan.scheduler`) and record each as it finishes.

    A LocalCluster gets a cell per worker at a time, the next once one finishes: a cell never waits on a busy
    worker (where a worker that dies would take it down too), and a sweep that must stop (a full results disk,
    Ctrl-C) has no cell started behind the one that stopped it. A scheduler address gets every cell at once,
    for its own scheduling (an adaptive cluster scales to what is queued).

    On Ctrl-C the cells not yet finished are cancelled, the cluster (a LocalCluster) is closed and the
    interrupt re-raised; a cell a worker was running is re-run by the next sweep."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as e:
        raise MissingDependencyError("distributed", "'promptlab-loops[dask]'", "the dask executor") from e

    for cell in pending:  # a failed earlier attempt; ok cells never get here
        (plan.out / "cells" / cell.cell_id / "status.json").unlink(missing_ok=True)
    cluster: Any = None
    if plan.scheduler:
        timeout = connect_timeout()  # sweep() checked that the scheduler answers (check_options)
        try:
            client = Client(plan.scheduler, timeout=timeout)
        except (OSError, ValueError) as e:  # refused, timed out, a malformed address, not a scheduler
            raise unreachable(plan.scheduler, timeout, e) from e
        at_once = len(pending)
    else:
        at_once = min(plan.workers, len(pending))
        process_env = {k: v for k, v in cell_process_env(plan.workers, at_once).items() if k not in os.environ}
        with workers_ignore_ctrl_c():
            cluster = LocalCluster(
                n_workers=at_once,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
                env=process_env,
            )
        client = Client(cluster)
    futures: dict[Any, Cell] = {}
    waiting, running = iter(pending), as_completed()
    env = worker_env(plan.cache_dir)
    sweep_id = uuid.uuid4().hex[:8]  # two sweeps of one experiment on one scheduler must not share task keys

    def submit(cell: Cell) -> None:
        future = client.submit(
            run_cell_task,
            str(plan.out),
            cell.cell_id,
            json.dumps(cell.params),
            plan.cache_dir,
            plan.cell_concurrency,
            env,
            key=f"promptlab-cell-{cell.cell_id}-{sweep_id}",
            pure=False,
            retries=RETRIES,
            max_cost=plan.spending_cap.cap if plan.spending_cap else None,
            settings_json=plan.settings.to_json() if plan.settings is not None else "",
        )
        futures[future] = cell
        running.add(future)

    try:
        started = time.perf_counter()
        for cell in islice(waiting, at_once):
            submit(cell)
        for future in running:
            plan.record(_finished(future, futures[future], plan, time.perf_counter() - started))
            for cell in islice(waiting, max(0, at_once - running.count())):
                submit(cell)
    except (KeyboardInterrupt, ResultsDiskFull):
        client.cancel(list(futures))
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@contextmanager
def workers_ignore_ctrl_c() -> Iterator[None]:
    """Start a LocalCluster's worker processes with SIGINT ignored (a disposition a child keeps across exec).

    Ctrl-C in a terminal signals the whole foreground process group: without this each worker died of its own
    KeyboardInterrupt with a traceback, while this process, the one that handles Ctrl-C, closes the cluster.
    A Ctrl-C while the workers start is ignored. Only in the main thread (where signal handlers are set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def check_options(scheduler: str | None = None, **_: Any) -> None:
    """Before a dask sweep writes anything: a scheduler address must answer."""
    if scheduler:
        reach_scheduler(scheduler)


def reach_scheduler(address: str) -> str:
    """Check that a Dask scheduler answers at `address` (a ConfigError naming it if not) and return the
    connect timeout used. The sweep calls it before it writes anything to the results dir."""
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("distributed", "'promptlab-loops[dask]'", "the dask executor") from e
    timeout = connect_timeout()
    try:
        check_scheduler(address, timeout)
    except (OSError, ValueError) as e:  # refused, timed out, a malformed address, not a scheduler
        raise unreachable(address, timeout, e) from e
    return timeout


def unreachable(address: str, timeout: str, e: BaseException) -> ConfigError:
    """The error of a scheduler address that does not answer."""
    return ConfigError(
        f"scheduler: cannot reach the Dask scheduler at {address!r}: {str(e) or 'no Dask handshake'} "
        f"(waited {timeout}; is `dask scheduler` running there, on that port? the dask "
        "config distributed.comm.timeouts.connect sets how long to wait)"
    )


def connect_timeout() -> str:
    """The dask config's distributed.comm.timeouts.connect if it was set, else `CONNECT_TIMEOUT`."""
    import dask
    import distributed  # noqa: F401 -- registers its config defaults

    key = "distributed.comm.timeouts.connect"
    value = str(dask.config.get(key))
    shipped = {str(dask.config.get(key, None, config=dict(d))) for d in dask.config.defaults}
    return CONNECT_TIMEOUT if value in shipped else value


def check_scheduler(address: str, timeout: str) -> None:
    """Open and close one connection to `address`, raising OSError unless a Dask scheduler answers within
    `timeout`: dask's Client waits forever for the handshake of a server that is not one (the dashboard's
    port, say). Runs on an event loop of its own, so it works under a running loop (a notebook)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from dask.utils import parse_timedelta
    from distributed.comm import connect

    seconds = parse_timedelta(timeout, default="seconds")

    async def handshake() -> None:
        comm = await asyncio.wait_for(connect(address, timeout=seconds), seconds)
        await comm.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, handshake()).result()


def worker_env(cache: str) -> dict[str, str]:
    """What a worker needs to reach the sweep's cache: the location by its kind, and $PROMPTLAB_CACHE."""
    env = {CACHE_URL_ENV: os.environ[CACHE_URL_ENV]} if os.environ.get(CACHE_URL_ENV) else {}
    env[CACHE_URL_ENV if "://" in cache else CACHE_DIR_ENV] = cache
    return env


def run_cell_task(
    results_dir: str,
    cell_id: str,
    params_json: str,
    cache: str,
    concurrency: int | None,
    env: dict[str, str],
    max_cost: float | None = None,
    settings_json: str = "",
) -> dict[str, Any] | ResultsDiskFull:
    """Run one cell on a worker and write its results (the Dask task); returns its status. `max_cost` is the
    sweep's spending cap, on the ledger in the results dir that every worker shares (`promptlab.llm.spending.cap`);
    `settings_json` the sweep's call settings (`Settings.to_json`; "" for the defaults).

    A cell that fails is recorded as failed and returned, not raised (raising would make Dask retry a
    deterministic failure); so is a full results disk, returned as the ResultsDiskFull it raised (a retry could
    pay for calls the full disk cannot count). Raises ConfigError when the results dir cannot be reached from
    this worker.

    A cell that already has a status.json is not run again: its status is returned. run_dask removed every
    pending cell's status before the sweep started, so that status is this task's own outcome, and the task
    runs again only because Dask recomputes a finished task whose result was lost with its worker (a re-run
    would rewrite the cell's files, and a cluster closing mid-way would leave them incomplete)."""
    from ..results.store import cell_status

    os.environ.update(env)
    if not (Path(results_dir) / "experiment.yaml").is_file():
        raise ConfigError(
            f"results dir {results_dir} is not reachable from worker {socket.gethostname()} "
            f"(pid {os.getpid()}): give a results dir on a path every worker shares, as an absolute "
            "path that is the same on every machine"
        )
    done = cell_status(results_dir, cell_id)
    if done is not None:
        return done
    try:
        _, status, _ = run_cell_by_id(
            results_dir,
            cell_id,
            params_json,
            cache_dir=cache,
            concurrency=concurrency,
            max_cost=max_cost,
            settings_json=settings_json,
        )
    except ResultsDiskFull as e:
        return e
    return status


def _finished(future: Any, cell: Cell, plan: SweepPlan, wall: float) -> CellOutcome:
    """A finished task's outcome; a task that failed (after its retries) fails its cell as infrastructure,
    unless the cell recorded its own outcome first (its worker died after the cell was done, before Dask heard
    back): run_dask removed every pending cell's status.json, and a cell writes it last, so one that is there
    now is this sweep's complete outcome of that cell (ok, failed by its own error, or cut by the cap).

    Raises:
        ResultsDiskFull: the task met a full results disk (it returns that error rather than raising it).
    """
    from ..results.store import cell_status, write_cell

    try:
        returned = future.result()
    except Exception as e:  # noqa: BLE001 -- KilledWorker, a task that raised: recorded, the sweep goes on
        if cell_status(plan.out, cell.cell_id) is None:
            error = cell_error(cell, e, infrastructure=True)
            write_cell(plan.out, cell.cell_id, cell.params, [], error=error, wall_time_s=round(wall, 4))
    else:
        if isinstance(returned, ResultsDiskFull):
            raise returned
    return cell_outcome(plan, cell, wall)
