"""A sweep's config checks: each cell's loop config against every selected task, before anything runs.

A loop refuses some configs only in the light of a task: the prompt-search baselines (OPRO, APE, ProTeGi,
resample, GEPA) refuse a task without examples (`promptlab.loops.runtime.search.check_search_loop`); P³RO and
Creator/Critic refuse `score_source: grounded` on one, and `score_mode: expected` with a critic whose model
returns no token log-probabilities (`promptlab.loops.runtime.grounding.check_prompt_loop`). Left to the runs,
every cell of a sweep would fail on its own; `promptlab.sweeps.cells.preflight_cells` runs `check_config` for
every cell x task up front (`check_configs`) and raises one ConfigError listing every problem, naming the cell's
params, the task and the field.

A loop's check is the one it was defined with (`define_loop(check=...)`, kept as `LoopSpec.check`), the same
check a run makes before its first call: there is no second copy to drift. A loop without one has nothing to
check against its tasks. A check returns the models the run will call beyond its roles' (the target model, a
judge scorer's model), so that the preflight covers them too.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..loops.registry import get_loop
from ..record import Task

MAX_LISTED = 20
"""Problems listed in one error at most (the rest are counted)."""


def check_config(loop: str, config: dict[str, Any], task: Task) -> list[str]:
    """Run the config check of `loop` (a cell's config fields) against `task`; a loop without one passes.

    Returns:
        The models the run will call beyond its roles' (the target model, a judge scorer's model).

    Raises:
        ConfigError: naming the field (e.g. "score_mode: 'expected' needs token log-probabilities ...").
    """
    spec = get_loop(loop)
    if spec.check is None:
        return []
    return list(spec.check(task, spec.config_cls.model_validate(config)))


def check_configs(configs: list[tuple[str, str, dict[str, Any]]], tasks: list[Task]) -> list[str]:
    """`check_config` for every (label, loop, config) x task, e.g. every cell of a sweep.

    Returns:
        The extra models the runs will call, each once.

    Raises:
        ConfigError: listing every problem at once (at most `MAX_LISTED`, the rest counted), each as
            "- <label>, task '<id>': <field>: <problem>".
    """
    problems: list[str] = []
    extra: list[str] = []
    for label, loop, config in configs:
        for task in tasks:
            try:
                extra += check_config(loop, config, task)
            except ConfigError as e:
                problems.append(f"- {label}, task {task.id!r}: {e}")
    if problems:
        more = f"\n... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise ConfigError(
            f"{len(problems)} config problem(s), found before any call:\n" + "\n".join(problems[:MAX_LISTED]) + more
        )
    return list(dict.fromkeys(extra))


__all__ = ["MAX_LISTED", "check_config", "check_configs"]
