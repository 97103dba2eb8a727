"""Kernel ▸ Interrupt as a Stop button for a run the kernel is not executing a cell for.

A run started by a click is a task on the kernel's event loop; no cell is executing, and between cells
ipykernel ignores SIGINT (it installs `SIG_IGN` when it starts and restores it after each message it handles).
Kernel ▸ Interrupt would therefore do nothing. `sigint_calls(on_interrupt)` installs, for the duration of a
block, a SIGINT handler that schedules `on_interrupt` on the running event loop (never calls it inside the
signal handler, where it could interleave with a message being sent). ipykernel saves and restores it around
every message it handles, so it stays in force between cells. Outside the main thread (where Python allows no
signal handler) the block runs unchanged.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


@contextmanager
def sigint_calls(on_interrupt: Callable[[], None]) -> Iterator[None]:
    """While the block runs (inside a running event loop), SIGINT schedules `on_interrupt` on that loop.

    Afterwards the earlier handler is back, unless someone replaced this one meanwhile; should ipykernel put
    this handler back after the block (it restores what it saved), a late SIGINT goes to the earlier handler.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    active = True

    def handler(signum: int, frame: FrameType | None) -> Any:
        if active:
            loop.call_soon_threadsafe(on_interrupt)
        elif callable(previous):
            return previous(signum, frame)
        return None

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        active = False
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, previous)


__all__ = ["sigint_calls"]
