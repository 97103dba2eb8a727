"""A sweep's config checks: each cell's loop config against every selected task, before anything runs.

A loop refuses some configs only in the light of a task: the prompt-search baselines (OPRO, APE, ProTeGi,
resample, GEPA) refuse a task without examples (`promptlab.loops.runtime.search.check_search_loop`); P³RO and
Creator/Critic refuse `score_source: grounded` on one, and `score_mode: expected` with a critic whose model
returns no token log-probabilities (`promptlab.loops.runtime.grounding.check_prompt_loop`). Left to the runs, every cell of a sweep
would fail on its own; `promptlab.sweeps.cells.preflight_cells` runs `check_config` for every cell x task up
front (`check_configs`) and raises one ConfigError listing every problem, naming the cell's params, the task and the field.

A loop's check is registered by loop name (`register_config_check`); a loop without one has nothing to check
against its tasks. A check returns the models the run will call beyond its roles' (the target model, a judge
scorer's model), so that the preflight covers them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..loops.creator_critic.config import CreatorCriticConfig
from ..loops.p3ro.config import P3ROConfig
from ..loops.registry import get_loop
from ..loops.runtime.grounding import check_prompt_loop
from ..loops.runtime.search import SearchConfig, check_search_loop
from ..record import Task

ConfigCheck = Callable[[Task, Any], list[str]]
"""(task, validated loop config) -> the extra models the run will call; raises ConfigError naming the field."""
CONFIG_CHECKS: dict[str, ConfigCheck] = {}
MAX_LISTED = 20
"""Problems listed in one error at most (the rest are counted)."""
SEARCH_LOOPS = ("opro", "ape", "protegi", "resample", "gepa")
"""The prompt-search baselines, which need a grounded task (`promptlab.loops.runtime.search`)."""


def register_config_check(loop: str, check: ConfigCheck) -> ConfigCheck:
    """Register the config check of the loop called `loop` (a later registration replaces it)."""
    CONFIG_CHECKS[loop] = check
    return check


def check_p3ro(task: Task, cfg: P3ROConfig) -> list[str]:
    """P³RO's check: its evaluator is the critic."""
    return check_prompt_loop(task, cfg, [cfg.model_for("evaluator")])


def check_creator_critic(task: Task, cfg: CreatorCriticConfig) -> list[str]:
    """Creator/Critic's check: every critic's model."""
    return check_prompt_loop(task, cfg, [model for _, model in cfg.critics()])


def check_search(loop: str) -> ConfigCheck:
    """The check of a prompt-search baseline (opro, ape, protegi, resample, gepa): a grounded task, a target that
    is a model."""

    def check(task: Task, cfg: SearchConfig) -> list[str]:
        return check_search_loop(task, cfg, loop)

    return check


register_config_check("p3ro", check_p3ro)
register_config_check("creator_critic", check_creator_critic)
for _loop in SEARCH_LOOPS:
    register_config_check(_loop, check_search(_loop))


def check_config(loop: str, config: dict[str, Any], task: Task) -> list[str]:
    """Run the config check of `loop` (a cell's config fields) against `task`; a loop without one passes.

    Returns:
        The models the run will call beyond its roles' (the target model, a judge scorer's model).

    Raises:
        ConfigError: naming the field (e.g. "score_mode: 'expected' needs token log-probabilities ...").
    """
    check = CONFIG_CHECKS.get(loop)
    if check is None:
        return []
    return check(task, get_loop(loop).config_cls.model_validate(config))


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


__all__ = [
    "CONFIG_CHECKS",
    "MAX_LISTED",
    "SEARCH_LOOPS",
    "ConfigCheck",
    "check_config",
    "check_configs",
    "check_creator_critic",
    "check_p3ro",
    "check_search",
    "register_config_check",
]
