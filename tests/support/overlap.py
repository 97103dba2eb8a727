"""Waiting for what happened rather than for a time: calls in flight held until `n` overlap, and a state polled.

A test of a concurrency limit used to sleep inside each call and hope the others entered meanwhile: on a busy
machine a thread can start after the first one's sleep ended, and the peak came out lower than the limit allows.
`InFlight(n)` holds each call until `n` are in flight (then holds none), so the peak is what the limit allows
whatever the load, and a limit passed still shows as a higher peak; `timeout_s` is a hang guard only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class InFlight:
    """Calls in flight now, the most at once (`peak`), and the hold until `n` were in flight together."""

    def __init__(self, n: int, timeout_s: float = 60.0) -> None:
        self.n, self.timeout_s = n, timeout_s
        self.now = self.peak = 0
        self._changed = threading.Condition()

    @contextmanager
    def call(self) -> Iterator[None]:
        """One call in flight for the block; it starts once `n` calls have been in flight at once."""
        with self._changed:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self.peak >= self.n, self.timeout_s)
        try:
            yield
        finally:
            with self._changed:
                self.now -= 1


def eventually(holds: Callable[[], bool], within_s: float = 20.0) -> bool:
    """Whether `holds()` became true within `within_s` (polled): for a state another process reaches in its own
    time (a killed process reaped, a connection accepted), where a fixed short sleep fails on a busy machine.
    The bound is a hang guard: what the test proves is the state, not how soon it came."""
    deadline = time.monotonic() + within_s
    while not holds():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
