"""The executors of a sweep, by name: `EXECUTORS["inline" | "papermill" | "dask"]`.

An executor runs the pending cells of a `SweepPlan` and records each one's outcome with `plan.record` (which
advances the progress bar); every cell writes its own results atomically, status.json last. The module of an
executor is imported only when it runs, so a sweep never imports papermill or dask it does not use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..registry import Registry
from .cells import Cell
from .plan import SweepPlan

Run = Callable[[list[Cell], SweepPlan], None]
"""An executor's entry point: run these cells of the plan, recording each outcome."""


@dataclass(frozen=True)
class ExecutorSpec:
    """A named way to run a sweep's cells."""

    name: str
    target: str
    """"module:function" of the executor's `Run`, imported when it runs."""
    options: frozenset[str] = frozenset()
    """The sweep options this executor takes, of those not every executor does (settings, template, scheduler)."""
    description: str = ""
    check: str | None = None
    """"module:function" called with the sweep's options before anything is written (e.g. that a scheduler
    answers), or None."""

    def load(self) -> Run:
        """The executor's entry point (imports its module)."""
        module, _, name = self.target.partition(":")
        fn: Run = getattr(importlib.import_module(module), name)
        return fn

    def precheck(self, options: dict[str, Any]) -> None:
        """Run the executor's `check` (if any) on the sweep's options; it raises what is wrong."""
        if self.check is not None:
            module, _, name = self.check.partition(":")
            getattr(importlib.import_module(module), name)(**options)


EXECUTORS: Registry[ExecutorSpec] = Registry("executor", "promptlab.executors")
"""Executor name -> its spec: promptlab's three, those installed packages declare under the `promptlab.executors`
entry-point group (an ExecutorSpec, or a module that registers some) and any registered since."""


def register_executor(spec: ExecutorSpec) -> ExecutorSpec:
    """Add (or replace) an executor by its name."""
    return EXECUTORS.register(spec.name, spec)


def get_executor(name: str) -> ExecutorSpec:
    """The executor of this name; an unknown name raises ConfigError listing the known ones."""
    found = EXECUTORS.find(name)
    if found is None:
        raise ConfigError(f"executor: {name!r} is not a known executor; known: {', '.join(sorted(EXECUTORS))}")
    return found


register_executor(
    ExecutorSpec(
        "inline",
        "promptlab.sweeps.inline:run_inline",
        frozenset({"settings"}),
        "cells run concurrently in this process (asyncio); works inside a notebook",
    )
)
register_executor(
    ExecutorSpec(
        "papermill",
        "promptlab.sweeps.papermill:run_papermill",
        frozenset({"settings", "template"}),
        "one run_cell notebook kernel per cell, the executed notebook kept",
    )
)
register_executor(
    ExecutorSpec(
        "dask",
        "promptlab.sweeps.dask:run_dask",
        frozenset({"settings", "scheduler"}),
        "cells as tasks on a distributed cluster (a LocalCluster or a scheduler address)",
        check="promptlab.sweeps.dask:check_options",
    )
)
