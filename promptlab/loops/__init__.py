"""The refinement loops: each a plain async function with a sync twin, registered by name."""

from typing import TYPE_CHECKING, Any

from ._base import (
    LOOPS,
    LoopConfig,
    LoopSpec,
    as_config,
    as_task,
    provenance_scope,
    register_loop,
    rescore_sample,
    run_sync,
)
from ._context import RunContext

if TYPE_CHECKING:
    from ._registry import arun_loop, get_loop, run_loop

_BY_NAME = frozenset({"arun_loop", "get_loop", "run_loop"})


def __getattr__(name: str) -> Any:
    """`get_loop`, `arun_loop` and `run_loop` load `._registry` (every built-in loop) on first use."""
    if name in _BY_NAME:
        from . import _registry

        value = getattr(_registry, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'promptlab.loops' has no attribute {name!r}")


__all__ = ["LOOPS", "LoopConfig", "LoopSpec", "RunContext", "arun_loop", "as_config", "as_task", "get_loop",
           "provenance_scope", "register_loop", "rescore_sample", "run_loop", "run_sync"]
