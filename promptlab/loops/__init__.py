"""The refinement loops: each a plain async function with a sync twin, registered by name (`define_loop`).

`runtime/` is what every loop runs on (defining and registering a loop, the config base, the run context,
grounded scoring, budgets, the search loops' toolkit, tool steps); each loop is a subpackage: the design documents' `p3ro`, `creator_critic`,
`pes`, `pcee`, and the field's baselines `opro`, `ape`, `protegi` and the no-feedback control `resample`. `get_loop`, `arun_loop` and `run_loop` (in
`registry`) load every built-in loop on first use, so importing one loop does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .runtime.config import LoopConfig, as_config, as_task
from .runtime.context import RunContext
from .runtime.decision import Decision
from .runtime.define import LOOPS, LoopSpec, define_loop, register_loop, rescore_sample
from .runtime.provenance import provenance_scope
from .runtime.role_call import RoleCall

if TYPE_CHECKING:
    from .registry import arun_loop, get_loop, run_loop

_BY_NAME = frozenset({"arun_loop", "get_loop", "run_loop"})


def __getattr__(name: str) -> Any:
    """`get_loop`, `arun_loop` and `run_loop` load `.registry` (every built-in loop) on first use."""
    if name in _BY_NAME:
        from . import registry

        value = getattr(registry, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'promptlab.loops' has no attribute {name!r}")


__all__ = [
    "LOOPS",
    "Decision",
    "LoopConfig",
    "LoopSpec",
    "RoleCall",
    "RunContext",
    "arun_loop",
    "as_config",
    "as_task",
    "define_loop",
    "get_loop",
    "provenance_scope",
    "register_loop",
    "rescore_sample",
    "run_loop",
]
