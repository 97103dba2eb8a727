"""Running a coroutine from sync code, also inside a running event loop (a Jupyter kernel).

It lives below both the loops and `evaluate`, so each sync twin uses the same rule without an import cycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also where an event loop already runs
    (a Jupyter kernel): then it runs on a fresh loop in a worker thread.

    It returns as soon as the coroutine is done: unlike `asyncio.run`, it does not wait for the loop's worker
    threads, where a blocking call the coroutine gave up on (a model call of a delegation that timed out) may
    still be running; that call ends on its own and its result is dropped."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_on_new_loop(coro)
    ctx = contextvars.copy_context()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(ctx.run, run_on_new_loop, coro).result()
    finally:
        pool.shutdown(wait=False)


def run_on_new_loop(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` without waiting for the default executor's threads at the end (see `run_sync`)."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()  # shuts the default executor down without joining its threads


__all__ = ["run_on_new_loop", "run_sync"]
