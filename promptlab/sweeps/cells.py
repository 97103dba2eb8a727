"""The cells of a sweep: `Cell` (one loop config that runs every task x replicate), its stable id, the
models it calls, how many of its runs go at once by default (`runs_in_flight`) and the preflight that checks
every cell before a sweep writes or calls anything.

`promptlab.sweeps.experiment` expands an experiment into cells (`Experiment.cells`) and re-exports these names.

A cell id is 12 hex digits of sha256 over canonical JSON (sorted keys) of: the cell's params, the loop's base
config (validated values), a fingerprint of the selected tasks (`task_fingerprint`) and the replicate count,
and, when the experiment has model aliases, what they stand for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..llm.call.request import concurrency_limit
from ..llm.call.settings import DEFAULT_SETTINGS, Settings
from ..llm.providers.resolved import resolve_model
from ..record import Task

ID_LENGTH = 12
"""Hex digits of a cell id."""


@dataclass(frozen=True)
class Cell:
    """One configuration of a sweep: a loop with its config; it runs every task x replicate."""

    cell_id: str
    loop: str
    params: dict[str, Any]
    """Flat JSON scalars: "loop" plus the pairing and grid fields (become result columns)."""
    config: dict[str, Any]
    """The loop config fields: base config, per-loop fields, pairing and grid values."""


def cell_models(cell: Cell) -> list[str]:
    """Every model a cell's loop will call: the model of each role, then any other `*_model` field (a
    simulated critic, `sim/...`, makes no call and is not listed; its config field validated it)."""
    from ..loops.registry import get_loop

    return config_models(get_loop(cell.loop).config_cls.model_validate(cell.config))


def config_models(config: Any) -> list[str]:
    """Every model a loop run with this (validated) config will call: each role's, then any other `*_model`."""
    roles = config.ROLES or ("generator", "critic")
    models = [config.model_for(role) for role in roles]
    models += [
        v
        for k, v in config.model_dump().items()
        if k.endswith("_model") and k not in ("generator_model", "critic_model") and isinstance(v, str)
    ]
    return [m for m in dict.fromkeys(models) if resolve_model(m).makes_calls]


def runs_in_flight(models: Iterable[str], settings: Settings | None = None) -> int:
    """How many of a cell's runs go at once when the sweep does not say (`cell_concurrency=None`): as many as
    the most limited of its models takes calls at once (`promptlab.llm.call.request.concurrency_limit`: a
    `--max-concurrency` override, else an alias's max_concurrency, else `Settings.max_concurrency`, 4; this
    process's share of it), and no more runs than a local model decodes calls at once (`promptlab.llm.local.engine.capacity`:
    the batching engine's sequence slots, or the instance pool's instances): further runs would only wait for a
    call slot. With no model, the settings' max_concurrency."""
    limits = []
    for model in map(resolve_model, models):
        limit, own = concurrency_limit(model, settings), model.capacity
        limits.append(limit if own is None else min(limit, own))
    return min(limits, default=(settings or DEFAULT_SETTINGS).max_concurrency)


def preflight_cells(cells: list[Cell], tasks: list[Task] | None = None, *, priced: bool = False) -> list[str]:
    """Check every cell before anything is written or called: every model of every cell
    (`promptlab.llm.call.preflight.preflight`), then, given the tasks, each cell's loop config against every task
    (`promptlab.sweeps.checks`) and the models those checks add (target, judge scorer). With `priced` (a
    spending cap is set), every one of those models must have a known price (`promptlab.llm.spending.cap.check_prices`).

    Returns:
        Every model the cells will call, each once.

    Raises:
        ConfigError: listing every problem at once; a config problem names the cell's params, the task and
            the field.
    """
    from ..llm.call.preflight import preflight
    from .checks import check_configs

    models = [m for cell in cells for m in cell_models(cell)]
    preflight(models)
    labelled = [(f"cell {json.dumps(c.params)} ({c.cell_id})", c.loop, c.config) for c in cells]
    extra = check_configs(labelled, tasks or [])
    preflight(extra)
    if priced:
        from ..llm.spending.cap import check_prices

        check_prices(map(resolve_model, [*models, *extra]))
    return list(dict.fromkeys([*models, *extra]))


def task_fingerprint(tasks: list[Task]) -> str:
    """sha256 of the tasks' canonical JSON (ids, prompts, goals, and a grounded task's examples, scorer and
    split), in order."""
    blob = json.dumps([t.model_dump(mode="json") for t in tasks], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def cell_id(
    params: dict[str, Any],
    base_config: dict[str, Any],
    fingerprint: str,
    replicates: int,
    models: dict[str, Any] | None = None,
) -> str:
    """A cell's stable id: short sha256 of canonical JSON of params, base config, tasks and replicates (and,
    when the experiment has model aliases, what they stand for; without aliases the ids are as before)."""
    data: dict[str, Any] = {"params": params, "config": base_config, "tasks": fingerprint, "replicates": replicates}
    if models:
        data["models"] = models
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:ID_LENGTH]


__all__ = [
    "ID_LENGTH",
    "Cell",
    "cell_id",
    "cell_models",
    "config_models",
    "preflight_cells",
    "runs_in_flight",
    "task_fingerprint",
]
