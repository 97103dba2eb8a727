"""What a process that runs cells is given: its environment (call settings, its share of the cores and of each
model's limits, variables set for its children and restored after) and a heap whose long-lived objects the garbage
collector leaves out of its passes."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..llm.call.settings import Settings


def settings_env(settings: Settings | None) -> dict[str, str]:
    """The environment that hands call settings to a papermill kernel (PROMPTLAB_SETTINGS); {} for None."""
    from ..llm.call.settings import SETTINGS_ENV

    return {SETTINGS_ENV: settings.to_json()} if settings is not None else {}


def cell_process_env(workers: int, at_once: int) -> dict[str, str]:
    """The environment of each process that runs cells (a papermill kernel, a local Dask worker): its share
    of the cores (PROMPTLAB_LOCAL_THREADS) and of each model's limits (PROMPTLAB_LIMIT_SHARE)."""
    return {
        "PROMPTLAB_LOCAL_THREADS": str(max(1, (os.cpu_count() or 1) // max(1, workers))),
        "PROMPTLAB_LIMIT_SHARE": str(max(1, at_once)),
    }


@contextlib.contextmanager
def env_set(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables (child processes inherit them: a kernel's spending cap), whatever they were;
    restore after."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def env_defaults(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables (child processes inherit them) that the user did not set; restore after."""
    added = [name for name in values if name not in os.environ]
    for name in added:
        os.environ[name] = values[name]
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave the objects alive now out of the garbage collector's passes while the block runs (`gc.freeze`), then
    give them back to it (`gc.unfreeze`).

    A process that has imported litellm holds some 400,000 objects that live as long as it does, and every full
    collection walks them all: 0.2 s on the sweep benchmark's machine, during which the event loop, and every call
    in flight, waits. A sweep starts one every ~100,000 objects it keeps (records, calls in flight); frozen, such a
    pass walks only what the sweep made. A process that froze objects itself is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
