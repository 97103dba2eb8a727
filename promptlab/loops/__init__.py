"""The refinement loops: each a plain async function with a sync twin, registered by name."""

from ._base import (
    LOOPS,
    LoopConfig,
    LoopSpec,
    arun_loop,
    get_loop,
    provenance_scope,
    register_loop,
    run_loop,
    run_sync,
)
from ._context import RunContext

__all__ = ["LOOPS", "LoopConfig", "LoopSpec", "RunContext", "arun_loop", "get_loop", "provenance_scope",
           "register_loop", "run_loop", "run_sync"]
