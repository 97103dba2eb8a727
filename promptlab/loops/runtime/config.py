"""What a loop run takes in: the config base every loop's settings extend (`LoopConfig`), and the task and config
as a user may give them (`as_task`, `as_config`, `goal_of`)."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ...critics.simulated import simulated_critic
from ...errors import ConfigError
from ...llm.call.preflight import validate_model_name
from ...record import Task

LOGGED = {"check_models": False}
"""Validation context of a logged run's config (`Config.model_validate(run.config, context=LOGGED)`): its model
names are not checked against this process's models, since a re-score calls only the run's critics and checks
those itself (`promptlab.loops.runtime.rescoring`); a generator no longer registered does not stop it."""


def check_model_name(name: str, info: ValidationInfo) -> None:
    """`validate_model_name(name)`, unless the validation context is LOGGED."""
    if (info.context or {}).get("check_models", True):
        validate_model_name(name)


DEFAULT_GOAL = "Make the prompt clearer, more specific and more likely to get a useful answer."
"""The goal used when a task gives none (recorded in `Run.info['goal']`)."""


def goal_of(task: Task) -> str:
    """The task's goal, or `DEFAULT_GOAL` when it gives none."""
    return task.goal.strip() or DEFAULT_GOAL


class LoopConfig(BaseModel):
    """Settings every loop takes; each loop's config adds its own fields.

    Roles are played by `generator_model` (proposing roles) and `critic_model` (judging roles), both
    defaulting to `model`; `role_models` overrides single roles by name.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    CRITIC_ROLES: ClassVar[frozenset[str]] = frozenset()
    ROLES: ClassVar[tuple[str, ...]] = ()
    SIMULATED_CRITICS: ClassVar[bool] = False
    """Whether the loop's critic roles may be played by simulated critics (`sim/...`; P³RO, Creator/Critic)."""

    model: str = "local/smollm2"
    """Default model for every role."""
    generator_model: str | None = None
    """Model for the proposing roles (defaults to `model`)."""
    critic_model: str | None = None
    """Model for the judging roles (defaults to `model`)."""
    role_models: dict[str, str] = Field(default_factory=dict)
    """Per-role model overrides, by role name."""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature of every call."""
    max_tokens: int | None = Field(400, ge=1)
    """Cap on each reply's tokens."""
    max_iterations: int = Field(5, ge=1, le=100)
    """Iteration cap."""
    prompts: dict[str, str] = Field(default_factory=dict)
    """Role prompt overrides, by role name (`str.format` fields as in the module constants)."""
    budget_calls: int | None = Field(None, ge=1)
    """Stop the run (stop reason 'budget') when its next step would pass this many model calls (None: no cap).
    Every call the loop makes counts, cache hits and a candidate's dev-split evaluation included; measuring
    on the test split does not (`promptlab.loops.runtime.budget.BUDGET_FREE_PHASES`)."""
    budget_tokens: int | None = Field(None, ge=1)
    """As `budget_calls`, in tokens (input + output, as the original call reported them, cache hits included)."""

    @field_validator("model", "generator_model", "critic_model")
    @classmethod
    def _known_model(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None:
            check_model_name(v, info)
        return v

    @field_validator("role_models")
    @classmethod
    def _known_role_models(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        unknown = [r for r in v if cls.ROLES and r not in cls.ROLES]
        if unknown:
            raise ValueError(f"unknown role(s) {unknown}; this loop's roles are {list(cls.ROLES)}")
        for name in v.values():
            check_model_name(name, info)
        return v

    @field_validator("prompts")
    @classmethod
    def _known_prompt_roles(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = [r for r in v if cls.ROLES and r not in cls.ROLES]
        if unknown:
            raise ValueError(f"unknown role(s) {unknown}; this loop's roles are {list(cls.ROLES)}")
        return v

    @model_validator(mode="after")
    def _simulated_critics_only_judge(self) -> LoopConfig:
        """A simulated critic (`sim/...`) makes no model call: it can only play a critic role of a loop that
        measures its candidates (P³RO, Creator/Critic), never propose or run anything."""
        roles = self.ROLES or ("generator", "critic")
        for role in roles:
            model = self.model_for(role)
            if simulated_critic(model) is not None and not (self.SIMULATED_CRITICS and role in self.CRITIC_ROLES):
                field = (
                    f"role_models.{role}"
                    if role in self.role_models
                    else "critic_model"
                    if role in self.CRITIC_ROLES and self.critic_model
                    else "generator_model"
                    if self.generator_model
                    else "model"
                )
                where = "" if self.SIMULATED_CRITICS else " (this loop takes none)"
                raise ValueError(
                    f"{field}: {model!r} is a simulated critic, which can only play a critic role "
                    f"of P³RO or Creator/Critic{where}, not {role!r}"
                )
        return self

    def shown_to_critic(self, candidate: str) -> str:
        """The text of `candidate` the loop's critics are shown in their prompt (here all of it, stripped; a loop
        that cuts it says so: Creator/Critic's `history_chars`). What the critic-bias probes measure length by."""
        return candidate.strip()

    def model_for(self, role: str) -> str:
        """The model that plays `role`."""
        if role in self.role_models:
            return self.role_models[role]
        if role in self.CRITIC_ROLES:
            return self.critic_model or self.model
        return self.generator_model or self.model


def as_task(task: Task | str | dict[str, Any], goal: str = "") -> Task:
    """Accept a Task, a dict, or a bare prompt string."""
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        return Task(id="task", prompt=task, goal=goal)
    return Task.model_validate(task)


C = TypeVar("C", bound=LoopConfig)


def as_config(cls: type[C], config: C | dict[str, Any] | None) -> C:
    """Accept a config object, a dict of its fields, or None for the defaults."""
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    if isinstance(config, dict):
        return cls.model_validate(config)
    raise ConfigError(f"config must be a {cls.__name__} or a dict of its fields, got {type(config).__name__}")


__all__ = ["LOGGED", "check_model_name", "C", "DEFAULT_GOAL", "LoopConfig", "as_config", "as_task", "goal_of"]
