"""Sync inside async: GEPA's optimizer is synchronous, promptlab's loops are async.

`Bridge` runs the optimizer in a worker thread of its own (like `asyncio.to_thread`, so the event loop stays
free, but outside the loop's default executor, whose threads the model calls may need: a Jupyter
kernel's loop keeps answering widgets, a sweep's other cells keep running) and sends every coroutine the
optimizer needs (a model call, a dev evaluation, a record update) back to the run's own event loop
(`asyncio.run_coroutine_threadsafe`), where promptlab's call path, cache, rate limits and run record live. The
worker thread only ever waits on those futures; it never touches the record itself.

Halting. `halt(reason)` makes every later request from the optimizer raise `Halted`: GEPA's stop callback
(`Bridge.stopper`) then ends the optimization before its next iteration, and a request already in GEPA's
iteration ends it at once. The loop asks for a halt when its budget does not allow the next piece of work, on a
Stop (`promptlab.loops.runtime.interrupt`), and when the loop's own task is cancelled (a kernel interrupt, a
sweep shutting down): then the requests in flight are cancelled too, and the loop waits for the thread to end
before it goes on, so nothing of the run is left running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from gepa.utils import StopperProtocol

T = TypeVar("T")


class Halted(Exception):
    """Raised inside the optimizer's thread once the run is halted (budget spent, Stop, cancellation); GEPA's
    engine either re-raises it (`raise_on_exception`) or, where it catches a failed reflection, goes on to its
    stop callback, which ends the optimization."""


class Bridge:
    """One run's link between the optimizer's worker thread and the run's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reason: str | None = None
        """Why the run was halted (None while it runs)."""
        self._lock = threading.Lock()
        self._inflight: set[concurrent.futures.Future[Any]] = set()

    @classmethod
    def here(cls) -> Bridge:
        """A bridge to the running event loop."""
        return cls(asyncio.get_running_loop())

    def halt(self, reason: str) -> None:
        """Halt the run (the first reason is kept)."""
        with self._lock:
            if self.reason is None:
                self.reason = reason

    def check(self) -> None:
        """Raise `Halted` when the run is halted."""
        if self.reason is not None:
            raise Halted(self.reason)

    def call(self, coro: Coroutine[Any, Any, T], *, always: bool = False) -> T:
        """Run `coro` on the run's event loop and wait for it (from the optimizer's thread). Raises `Halted`
        when the run is halted before it starts (unless `always`: a record update) or cancelled while it
        runs."""
        if self.reason is not None and not always:
            coro.close()
            raise Halted(self.reason)
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self._lock:
            self._inflight.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise Halted(self.reason or "cancelled") from None
        finally:
            with self._lock:
                self._inflight.discard(future)

    def cancel(self, reason: str) -> None:
        """Halt the run and cancel the requests in flight (the loop's task was cancelled)."""
        self.halt(reason)
        with self._lock:
            inflight = list(self._inflight)
        for future in inflight:
            future.cancel()

    def stopper(self, *checks: Callable[[], Coroutine[Any, Any, str | None]]) -> StopperProtocol:
        """GEPA's stop callback: True once the run is halted, or when a check (a coroutine function, run on the
        event loop) gives a reason, which then halts the run."""

        def should_stop(gepa_state: Any) -> bool:
            if self.reason is not None:
                return True
            for check in checks:
                reason = self.call(check())
                if reason is not None:
                    self.halt(reason)
                    return True
            return False

        return should_stop

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` (the optimizer) in a worker thread of its own, with the caller's context variables (as
        `asyncio.to_thread`, but never in the event loop's default executor: the model calls it waits for may
        need that executor's threads, and a sweep's concurrent runs would fill it with waiting optimizers).
        Cancelled, it halts the run, cancels the requests in flight, waits for the thread to end and re-raises
        the cancellation."""
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="promptlab-gepa")
        task = self.loop.run_in_executor(pool, contextvars.copy_context().run, fn)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.cancel("cancelled")
            await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            pool.shutdown(wait=False)


__all__ = ["Bridge", "Halted"]
