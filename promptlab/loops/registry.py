"""Finding or running a loop by name. The loops themselves are found by the registry (`LOOPS`, a
`promptlab.registry.Registry`): promptlab's own (`promptlab.plugins`) and those installed packages declare under the
`promptlab.loops` entry-point group are imported on the first lookup, so importing the package (or one loop) does
not import every loop.
"""

from __future__ import annotations

from typing import Any

from ..aio import run_sync
from ..record import Run, Task
from .runtime.config import as_config
from .runtime.define import LOOPS, LoopSpec


def get_loop(name: str) -> LoopSpec:
    """The registered loop called `name`; an unknown name raises ConfigError listing the known ones."""
    return LOOPS[name]


async def arun_loop(name: str, task: Task | str | dict[str, Any], config: Any = None, **kwargs: Any) -> Run:
    """Run the loop called `name` (async)."""
    spec = get_loop(name)
    return await spec.arun(task, as_config(spec.config_cls, config), **kwargs)


def run_loop(name: str, task: Task | str | dict[str, Any], config: Any = None, **kwargs: Any) -> Run:
    """Run the loop called `name`; keyword arguments as the loop's own function takes them."""
    return run_sync(arun_loop(name, task, config, **kwargs))


__all__ = ["arun_loop", "get_loop", "run_loop"]
