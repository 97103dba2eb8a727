"""The inline executor of a sweep: cells run concurrently in this process, on an asyncio loop in a thread.

At most `workers` cells at once; inside a cell its tasks x replicates run concurrently too (at most
`cell_concurrency`, by default what the cell's models allow: `promptlab.sweeps.cells.runs_in_flight`). The loop runs in a worker thread, so this works inside Jupyter; Ctrl-C cancels it,
lets running writes finish and re-raises. Each model call updates the progress bar as it happens.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..results.store import load_writer
from .cells import Cell
from .execute import aexecute_cell, cell_outcome
from .plan import SweepPlan


def run_inline(pending: list[Cell], plan: SweepPlan) -> None:
    """Run the cells in this process, `plan.workers` at once."""

    async def main() -> None:
        sem = asyncio.Semaphore(plan.workers)
        # the results writer's pyarrow (~0.15 s to import) loads while the first calls wait on the network
        writer = asyncio.create_task(asyncio.to_thread(load_writer))

        stopped: list[BaseException] = []  # a cell raised (a full results disk): no other cell starts

        async def one(cell: Cell) -> None:
            async with sem:
                if stopped:
                    return
                t0 = time.perf_counter()
                try:
                    await aexecute_cell(
                        plan.out,
                        cell,
                        plan.tasks,
                        plan.exp.replicates,
                        cache=plan.cache_dir,
                        on_event=plan.watch(cell.cell_id),
                        concurrency=plan.cell_concurrency,
                        settings=plan.settings,
                        spending_cap=plan.spending_cap,
                    )
                except BaseException as e:
                    stopped.append(e)
                    raise
                plan.record(cell_outcome(plan, cell, time.perf_counter() - t0))

        await asyncio.gather(*(one(c) for c in pending))
        await writer

    run_interruptible(main)


def run_interruptible(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
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
