"""The explorer's numeric controls: what each allows (`RANGES`), the check of an initial value (`check_value`),
and a critic's default score mode."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..llm.providers.resolved import resolve_model

RANGES: dict[str, tuple[float, float]] = {
    "finish_threshold": (1.0, 10.0),
    "max_iterations": (1, 10),
    "min_criteria": (0, 6),
    "max_tokens": (1, 8192),
    "eval_max_tokens": (1, 8192),
    "budget_calls": (0, 1_000_000),
}
"""What each numeric control allows (min_criteria 0 and budget_calls 0 mean "the loop's default" and "none")."""

SCORE_MODES = ("expected", "sampled")


def check_value(name: str, value: Any) -> None:
    """ConfigError naming the field and its allowed range when `value` is not a number within RANGES[name]."""
    lo, hi = RANGES[name]
    whole = isinstance(lo, int)
    kind = "a whole number" if whole else "a number"
    ok = isinstance(value, int if whole else (int, float)) and not isinstance(value, bool)
    if not ok or not lo <= value <= hi:
        raise ConfigError(f"{name}: {value!r} is not allowed; give {kind} from {lo} to {hi}")


def default_score_mode(critic: str) -> str:
    """A local critic's default score: its expected (G-Eval) score; any other critic's: the one it writes."""
    try:
        return "expected" if resolve_model(critic).embedded else "sampled"
    except Exception:  # noqa: BLE001 -- an unknown name: the run says so, with the model's error
        return "sampled"


def check_initial(tasks: list[Any], task_id: str, score_mode: str, **values: Any) -> None:
    """ConfigError when the explorer has no task, `task_id` is not one of them, a numeric value is outside its
    range (`check_value`) or `score_mode` is unknown."""
    if not tasks:
        raise ConfigError("tasks: the explorer needs at least one task")
    ids = [t.id for t in tasks]
    if task_id and task_id not in ids:
        raise ConfigError(f"task_id: {task_id!r} is not one of the tasks: {', '.join(ids)}")
    for name, value in values.items():
        check_value(name, value)
    if score_mode and score_mode not in SCORE_MODES:
        raise ConfigError(f"score_mode: {score_mode!r} is not allowed; give one of {', '.join(SCORE_MODES)}")


def loop_config(loop: str, values: dict[str, Any]) -> dict[str, Any]:
    """The config of a run of `loop` from the explorer's control values: the roles' models, the cap and reply
    caps always; `model` and `budget_calls` when set; the loop-specific fields (`eval_max_tokens`,
    `finish_threshold`, `min_criteria`, `score_mode`) only when the loop has them; P³RO's `max_criteria` raised
    to `min_criteria` when that asks for more."""
    from ..loops.registry import get_loop

    always = ("generator_model", "critic_model", "max_iterations", "max_tokens")
    config = {k: values[k] for k in always}
    config |= {k: values[k] for k in ("model", "budget_calls") if values.get(k)}
    fields = get_loop(loop).config_cls.model_fields
    config |= {
        k: v for k, v in values.items() if k not in config and k in fields and k not in ("model", "budget_calls")
    }
    if "max_criteria" in fields and "min_criteria" in config:  # asking for 6 criteria raises the cap with it
        config["max_criteria"] = max(config["min_criteria"], fields["max_criteria"].default)
    return config


__all__ = ["RANGES", "SCORE_MODES", "check_initial", "check_value", "default_score_mode", "loop_config"]
