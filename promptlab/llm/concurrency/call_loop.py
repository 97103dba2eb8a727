"""The call loop: one daemon event loop thread per process on which blocking calls make their network requests.

`complete` must work in scripts and inside a running Jupyter event loop, so it never starts a loop in the
caller's thread. Its network requests still go over the async transports: they run here, on a loop of
their own, and the caller waits for the result. So both call paths share one implementation of each
transport (the same errors, the same reply checks, streamed or not), and the deadline of a request is
enforced the same way, by cancelling it (`asyncio.timeout`), which a blocking HTTP read cannot do.
Pieces of a streamed reply are handed back to the caller's thread, so `on_token` runs where the caller runs.
A forked child starts its own loop thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_END = object()


class LoopThread:
    """A process-wide daemon event loop thread, started on first use (again in a forked child)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = os.getpid()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop of this process's thread."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child has no loop thread: start its own
                self._loop, self._pid = None, os.getpid()
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self.name, daemon=True).start()
                if self._loop is None:
                    atexit.register(self.stop)
                self._loop = loop
            return self._loop

    def stop(self) -> None:
        """Close what the loop holds (its async generators: the HTTP sessions' closers) and stop it; at exit."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running() or self._pid != os.getpid():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_wind_down(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)

    def run(
        self,
        make: Callable[[Callable[[str], None] | None], Coroutine[Any, Any, T]],
        on_piece: Callable[[str], None] | None = None,
    ) -> T:
        """Run the coroutine `make(put)` on the loop thread and wait for its result in this thread.

        `put` is None without `on_piece`; else every `put(piece)` reaches `on_piece` in this thread, in order.
        Leaving early (an exception in `on_piece`, KeyboardInterrupt) cancels the coroutine.
        """
        pieces: queue.SimpleQueue[Any] | None = queue.SimpleQueue() if on_piece is not None else None
        future = asyncio.run_coroutine_threadsafe(make(pieces.put if pieces is not None else None), self.loop())
        try:
            if pieces is not None and on_piece is not None:
                future.add_done_callback(lambda _: pieces.put(_END))
                while (piece := pieces.get()) is not _END:
                    on_piece(piece)
            return future.result()
        except BaseException:
            future.cancel()
            raise


async def _wind_down() -> None:
    """Cancel the loop's other tasks (litellm's logging worker), then finalize its async generators."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


CALLS = LoopThread("promptlab-calls")
"""The loop of the blocking calls' network requests."""

__all__ = ["CALLS", "LoopThread"]
