"""Limits on calls: in flight per endpoint and event loop, and requests/tokens per minute per process.

Concurrency: a call waits until fewer than ITS OWN limit are in flight, so a call allowed 16 at once is not
held to the 4 of a call that came first (nor the other way round). Waiters are woken in arrival order among
those whose limit allows them in, one per freed place: a release wakes one waiter, not all of them.

Rates (`rate_wait` / `arate_wait`, an alias's `rpm` and `tpm`): a leaky bucket from aiolimiter, chosen
because it is small, well kept, exact for asyncio (no polling: a waiter is woken when the bucket has
drained enough) and takes weighted acquisitions (a request's tokens). Its bucket belongs to one event loop,
so each (endpoint, kind, rate) bucket lives on one process-wide daemon loop thread, and both call paths
acquire there: `complete` waits on the future, `acomplete` awaits it. One rate per endpoint per process
then holds across threads, notebook event loops and the blocking path. A bucket holds one second's worth
(at least one request): bursts are at most that, and the pace is the rate. A different rate makes its own
bucket, so each call follows its own alias's rate. The tokens of a request are estimated before it is sent
as characters of the messages / 4 (rounded up) plus `max_tokens` (0 when unset): the reply's length is not
known beforehand, so set max_tokens for tpm to count it. An estimate larger than a bucket is taken in
bucket-sized parts (it waits as long as its tokens take at the rate).

`PROMPTLAB_LIMIT_SHARE=<k>` divides every limit (concurrency, rpm, tpm) by k, at least 1 (concurrency rounded
down): the papermill executor sets it so k kernels together keep one process's limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..providers.resolved import ResolvedModel

SHARE_ENV = "PROMPTLAB_LIMIT_SHARE"
"""Environment variable: divide every limit by this many processes (kernels) sharing it."""
BUCKET_S = 1.0
"""Seconds' worth of rate a bucket holds (the largest burst), at least one request."""


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


def slot(model: ResolvedModel, limit: int) -> contextlib.AbstractAsyncContextManager[None]:
    """A place among the calls in flight to `model`'s endpoint in the running event loop, under `limit`."""
    per_loop = _limiters.setdefault(asyncio.get_running_loop(), {})
    limiter = per_loop.get(model.endpoint)
    if limiter is None:
        limiter = per_loop[model.endpoint] = Limiter()
    return limiter.slot(limit)


def share() -> int:
    """How many processes share each limit (`PROMPTLAB_LIMIT_SHARE`, at least 1; a bad value is an error)."""
    raw = os.environ.get(SHARE_ENV)
    if not raw:
        return 1
    try:
        k = int(raw)
    except ValueError:
        from ...errors import ConfigError

        raise ConfigError(f"{SHARE_ENV}: {raw!r} is not a whole number of processes") from None
    return max(1, k)


def shared_concurrency(limit: int) -> int:
    """A concurrency limit divided among the sharing processes (at least 1)."""
    return max(1, int(limit) // share())


def shared_rate(rate: float) -> float:
    """A per-minute rate divided among the sharing processes (at least 1 per minute)."""
    return max(1.0, float(rate) / share())


def estimate_tokens(kwargs: dict[str, Any]) -> int:
    """A request's tokens before it is sent: characters of its messages / 4 (rounded up) + max_tokens."""
    chars = 0
    for m in kwargs.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif content is not None:
            chars += len(str(content))
    return math.ceil(chars / 4) + int(kwargs.get("max_tokens") or 0)


class _RateLoop:
    """The process's daemon event loop that owns every rate bucket."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid = os.getpid()
        self.buckets: dict[tuple[str, str, float], Any] = {}

    def get(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.pid != os.getpid():  # a forked child has no loop thread: start its own, fresh buckets
                self.loop, self.pid, self.buckets = None, os.getpid(), {}
            if self.loop is None or self.loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="promptlab-rates", daemon=True).start()
                self.loop = loop
            return self.loop

    def bucket(self, endpoint: str, kind: str, per_minute: float) -> Any:
        from aiolimiter import AsyncLimiter

        key = (endpoint, kind, per_minute)
        with self.lock:
            limiter = self.buckets.get(key)
            if limiter is None:
                size = max(1.0, per_minute / 60.0 * BUCKET_S)
                limiter = self.buckets[key] = AsyncLimiter(size, size * 60.0 / per_minute)
            return limiter


_rates = _RateLoop()


async def _take(limiters: list[tuple[Any, float]]) -> None:
    for limiter, amount in limiters:
        while amount > 0:
            part = min(amount, limiter.max_rate)
            await limiter.acquire(part)
            amount -= part


def _submit(endpoint: str, rpm: float | None, tpm: float | None, kwargs: dict[str, Any]) -> Future[None] | None:
    loop = _rates.get()
    wanted: list[tuple[Any, float]] = []
    if rpm:
        wanted.append((_rates.bucket(endpoint, "rpm", shared_rate(rpm)), 1.0))
    if tpm:
        wanted.append((_rates.bucket(endpoint, "tpm", shared_rate(tpm)), float(estimate_tokens(kwargs))))
    if not wanted:
        return None
    return asyncio.run_coroutine_threadsafe(_take(wanted), loop)


def rate_wait(endpoint: str, rpm: float | None, tpm: float | None, kwargs: dict[str, Any]) -> None:
    """Block until one request (`kwargs`, litellm's arguments) fits `endpoint`'s rpm and tpm."""
    future = _submit(endpoint, rpm, tpm, kwargs)
    if future is not None:
        future.result()


async def arate_wait(endpoint: str, rpm: float | None, tpm: float | None, kwargs: dict[str, Any]) -> None:
    """Wait (async) until one request fits `endpoint`'s rpm and tpm; cancelling it gives the place up."""
    future = _submit(endpoint, rpm, tpm, kwargs)
    if future is not None:
        await asyncio.wrap_future(future)


__all__ = [
    "BUCKET_S",
    "SHARE_ENV",
    "Limiter",
    "arate_wait",
    "estimate_tokens",
    "rate_wait",
    "share",
    "shared_concurrency",
    "shared_rate",
    "slot",
]
