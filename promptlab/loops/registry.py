"""The built-in loops, imported so that they register themselves, and finding or running a loop by name.

`promptlab.loops` loads this module on the first use of `get_loop`, `arun_loop` or `run_loop`, so importing
the package (or one loop) does not import every loop.
"""

from __future__ import annotations

from typing import Any

from ..aio import run_sync
from ..errors import ConfigError
from ..record import Run, Task
from .ape import loop as ape_loop
from .creator_critic import loop as creator_critic_loop
from .gepa import loop as gepa_loop
from .opro import loop as opro_loop
from .p3ro import loop as p3ro_loop
from .pcee import loop as pcee_loop
from .pes import agent as pes_agent
from .protegi import loop as protegi_loop
from .resample import loop as resample_loop
from .runtime.config import as_config
from .runtime.define import LOOPS, LoopSpec

BUILTIN = (
    ape_loop,
    creator_critic_loop,
    gepa_loop,
    opro_loop,
    p3ro_loop,
    pcee_loop,
    pes_agent,
    protegi_loop,
    resample_loop,
)
"""The built-in loops' modules: importing them registers each loop."""


def get_loop(name: str) -> LoopSpec:
    """The registered loop called `name`; an unknown name lists the known ones."""
    if name not in LOOPS:
        raise ConfigError(f"unknown loop {name!r}; known loops: {', '.join(sorted(LOOPS))}")
    return LOOPS[name]


async def arun_loop(name: str, task: Task | str | dict[str, Any], config: Any = None, **kwargs: Any) -> Run:
    """Run the loop called `name` (async)."""
    spec = get_loop(name)
    return await spec.arun(task, as_config(spec.config_cls, config), **kwargs)


def run_loop(name: str, task: Task | str | dict[str, Any], config: Any = None, **kwargs: Any) -> Run:
    """Run the loop called `name`; keyword arguments as the loop's own function takes them."""
    return run_sync(arun_loop(name, task, config, **kwargs))


__all__ = ["arun_loop", "get_loop", "run_loop"]
