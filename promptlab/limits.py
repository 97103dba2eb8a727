"""Calls in flight per model and event loop, each call under the limit of its own settings.

A call waits until fewer than ITS OWN limit are in flight, so a call allowed 16 at once is not held to
the 4 of a call that came first (nor the other way round). Waiters are woken in arrival order among those
whose limit allows them in, one per freed place: a release wakes one waiter, not all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import weakref
from collections import deque
from collections.abc import AsyncIterator


class Limiter:
    """The calls in flight for one model in one event loop."""

    def __init__(self) -> None:
        self.active = 0
        self._order = itertools.count()
        self._waiting: dict[int, deque[tuple[int, asyncio.Future[None]]]] = {}
        """Waiters by their limit, each queue in arrival order: (arrival number, future)."""

    @contextlib.asynccontextmanager
    async def slot(self, limit: int) -> AsyncIterator[None]:
        """Hold one place among the calls in flight, entering once fewer than `limit` are in flight."""
        await self._acquire(max(1, limit))
        try:
            yield
        finally:
            self.active -= 1
            self._wake()

    async def _acquire(self, limit: int) -> None:
        if self.active < limit and not self._waiting.get(limit):
            self.active += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (next(self._order), future)
        self._waiting.setdefault(limit, deque()).append(entry)
        self._wake()
        try:
            await future  # the waker counted this call in flight before waking it
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.active -= 1  # woken and cancelled before it ran: give the place on
                self._wake()
            else:
                with contextlib.suppress(ValueError):
                    self._waiting[limit].remove(entry)
            raise

    def _wake(self) -> None:
        """Let in the earliest waiters whose limit is above the number in flight."""
        while True:
            heads = [(q[0][0], limit) for limit, q in self._waiting.items() if q and limit > self.active]
            if not heads:
                break
            _, limit = min(heads)
            _, future = self._waiting[limit].popleft()
            if not future.done():
                self.active += 1
                future.set_result(None)
        for limit in [k for k, q in self._waiting.items() if not q]:
            del self._waiting[limit]


_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Limiter]] = weakref.WeakKeyDictionary()


def slot(model: str, limit: int) -> contextlib.AbstractAsyncContextManager[None]:
    """A place among `model`'s calls in flight in the running event loop, under `limit`."""
    per_loop = _limiters.setdefault(asyncio.get_running_loop(), {})
    limiter = per_loop.get(model)
    if limiter is None:
        limiter = per_loop[model] = Limiter()
    return limiter.slot(limit)


__all__ = ["Limiter", "slot"]
