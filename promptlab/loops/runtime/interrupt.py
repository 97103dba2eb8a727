"""Stopping a run from outside, between two of its steps: `stop_scope(flag)` around a run, `flag.set()` from a
Stop button (or any other thread).

Every loop asks `RunContext.budget_stop` before each step; while a flag is set, the answer is "interrupted", so
the loop stops the way it stops on a budget: nothing in flight is cancelled (the call cache stays consistent),
everything recorded so far is kept, and `RunContext.finish` gives the run the stop reason `interrupted`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

INTERRUPTED = "interrupted"
"""The stop reason of a run stopped by `stop_scope`'s flag."""

_STOP: ContextVar[threading.Event | None] = ContextVar("promptlab_stop", default=None)


@contextmanager
def stop_scope(flag: threading.Event) -> Iterator[threading.Event]:
    """Runs started inside the block (and the tasks they start) stop before their next step once `flag` is
    set."""
    token = _STOP.set(flag)
    try:
        yield flag
    finally:
        _STOP.reset(token)


def stop_requested() -> bool:
    """Whether the enclosing `stop_scope`'s flag is set (False outside any)."""
    flag = _STOP.get()
    return flag is not None and flag.is_set()


__all__ = ["INTERRUPTED", "stop_requested", "stop_scope"]
