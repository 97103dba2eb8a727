"""Single-flight: at most one provider call per cache key at a time in a process; the others wait for it
and then find its result in the cache."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager


class KeyLocks:
    """One lock per key, for threads; a key's lock is dropped when nobody holds or awaits it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[bool]:
        """Hold the lock of `key` for the block; gives True when another thread held or awaited it."""
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield users > 0
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users <= 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


class AsyncKeyLocks:
    """One asyncio lock per key and event loop, dropped when nobody holds or awaits it."""

    def __init__(self) -> None:
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, tuple[asyncio.Lock, int]]]
        self._per_loop = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[bool]:
        """Hold the lock of `key` for the block (within the running event loop); gives True when another
        call held or awaited it (then it may have stored the result meanwhile)."""
        locks = self._per_loop.setdefault(asyncio.get_running_loop(), {})
        lock, users = locks.get(key, (asyncio.Lock(), 0))
        locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield users > 0
        finally:
            lock, users = locks[key]
            if users <= 1:
                del locks[key]
            else:
                locks[key] = (lock, users - 1)


THREAD_FLIGHTS = KeyLocks()
"""The process's single-flight locks for blocking calls."""
ASYNC_FLIGHTS = AsyncKeyLocks()
"""The process's single-flight locks for async calls."""
