"""What every loop shares: the config base, small helpers, provenance, the loop registry (`register_loop`),
and running a coroutine from sync code (also inside a Jupyter kernel). The run context that records steps
and events is `promptlab.loops.runtime.context.RunContext`; looking a loop up by name is `promptlab.loops.registry`."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...aio import run_sync
from ...critics.simulated import is_simulated
from ...errors import ConfigError
from ...llm.preflight import validate_model_name
from ...record import Iteration, Run, Score, Task

T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_GOAL = "Make the prompt clearer, more specific and more likely to get a useful answer."
"""The goal used when a task gives none (recorded in `Run.info['goal']`)."""


# The shared loop toolkit ------------------------------------------------------------------------------
def cut(text: Any, limit: int | None, *, count: bool = False) -> str:
    """`text` (JSON for any other value) stripped, and cut to `limit` characters with '...' when longer (None:
    never cut). With `count`, the first `limit` characters are kept and '... [N more characters]' says how
    much was left out (for a model that should know the text goes on)."""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, sort_keys=True, default=str)
    text = text.strip()
    if limit is None or len(text) <= limit:
        return text
    if count:
        return f"{text[:limit]}... [{len(text) - limit} more characters]"
    return text[: max(limit - 3, 0)].rstrip() + "..."


def goal_of(task: Task) -> str:
    """The task's goal, or `DEFAULT_GOAL` when it gives none."""
    return task.goal.strip() or DEFAULT_GOAL


def mean_present(values: Iterable[float | None]) -> float | None:
    """The mean of the present (not None) values, unrounded; None when none is present."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def by_average(it: Iteration) -> float | None:
    """Rank iterations by their average (loops whose router uses no score: PES, PCEE)."""
    return it.average


def by_decision_score(it: Iteration) -> float | None:
    """Rank iterations by the score their router used (`Iteration.decision_score`: P³RO, Creator/Critic)."""
    return it.decision_score


def best_iteration(
    iterations: Sequence[Iteration], key: Callable[[Iteration], float | None] = by_average
) -> Iteration | None:
    """The highest-scoring iteration with a candidate (by `key`, default the average); ties go to the
    earliest (a tie is no evidence that the later candidate is better)."""
    scored = [(v, i) for i in iterations if i.candidate is not None and (v := key(i)) is not None]
    return max(scored, key=lambda p: (p[0], -p[1].index))[1] if scored else None


def sync_twin(arun: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """The sync twin of an async loop runner: same arguments, runs it to completion (also in Jupyter)."""

    @functools.wraps(arun)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(arun(*args, **kwargs))  # type: ignore[arg-type]

    run.__doc__ = f"The sync twin of `{arun.__name__}` (same arguments; works inside Jupyter too)."
    return run


def text_hash(text: str) -> str:
    """sha256 (16 hex) of a text: how templates, prompts and tasks are identified in provenance."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_PROVENANCE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "promptlab_provenance", default=None
)


@contextlib.contextmanager
def provenance_scope(entries: dict[str, Any]) -> Iterator[None]:
    """Every run started inside the block (any loop) adds `entries` to its `Run.provenance`; the sweep uses
    it for `experiment_hash`."""
    token = _PROVENANCE.set({**(_PROVENANCE.get() or {}), **entries})
    try:
        yield
    finally:
        _PROVENANCE.reset(token)


def scoped_provenance() -> dict[str, Any]:
    """The entries of the enclosing `provenance_scope` blocks ({} outside any)."""
    return dict(_PROVENANCE.get() or {})


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
    on the test split does not (`promptlab.loops.runtime.context.BUDGET_FREE_PHASES`)."""
    budget_tokens: int | None = Field(None, ge=1)
    """As `budget_calls`, in tokens (input + output, as the original call reported them, cache hits included)."""

    @field_validator("model", "generator_model", "critic_model")
    @classmethod
    def _known_model(cls, v: str | None) -> str | None:
        if v is not None:
            validate_model_name(v)
        return v

    @field_validator("role_models")
    @classmethod
    def _known_role_models(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = [r for r in v if cls.ROLES and r not in cls.ROLES]
        if unknown:
            raise ValueError(f"unknown role(s) {unknown}; this loop's roles are {list(cls.ROLES)}")
        for name in v.values():
            validate_model_name(name)
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
            if is_simulated(model) and not (self.SIMULATED_CRITICS and role in self.CRITIC_ROLES):
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

    def model_for(self, role: str) -> str:
        """The model that plays `role`."""
        if role in self.role_models:
            return self.role_models[role]
        if role in self.CRITIC_ROLES:
            return self.critic_model or self.model
        return self.generator_model or self.model


@functools.cache  # reading the metadata takes ~2 ms, and every run records two versions
def package_version(distribution: str) -> str | None:
    """The installed version of a distribution (None when it is not installed), read once per process."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def base_provenance(task: Task) -> dict[str, Any]:
    """What a run records before any call: versions and a hash of the task (examples and split included)."""
    task_json = task.model_dump_json(exclude={"examples_source"})
    return {
        "promptlab_version": package_version("promptlab-loops"),
        "litellm_version": package_version("litellm"),
        "task_hash": text_hash(task_json),
        "prompt_hashes": {},
        "models": {},
    }


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


RESCORE_BASE = 1_000_000
"""Re-score `s` of a run draws at sample `RESCORE_BASE * s + RESCORE_STRIDE * run.sample` (plus the loop's
per-call offsets), far above any sample a run logs (its `sample` plus small per-call offsets)."""
RESCORE_STRIDE = 1_000
"""Room per run sample inside one re-score index: per-call offsets (a critic's index) stay below it."""


def rescore_sample(run_sample: int, s: int) -> int:
    """The RunContext sample of re-score `s` (1, 2, ...) of a run logged at sample `run_sample`.

    Every re-score is a new draw: disjoint from every logged call of any run (samples below RESCORE_BASE),
    from the other re-scores of the same run (each `s` has its own block) and from those of the run's
    replicates (each run sample has its own RESCORE_STRIDE-wide slot), with per-critic offsets below
    RESCORE_STRIDE. Raises ConfigError for s < 1 or a run sample outside 0..RESCORE_BASE/RESCORE_STRIDE - 1.
    """
    if s < 1:
        raise ConfigError(f"sample: re-score index must be 1 or more (0 is the logged score), got {s}")
    if not 0 <= run_sample < RESCORE_BASE // RESCORE_STRIDE:
        raise ConfigError(
            f"sample: cannot re-score a run logged at sample {run_sample} "
            f"(re-scores support run samples 0..{RESCORE_BASE // RESCORE_STRIDE - 1})"
        )
    return RESCORE_BASE * s + RESCORE_STRIDE * run_sample


@dataclass(frozen=True)
class LoopSpec:
    """A registered loop: its name, config class and async runner, and (for critic-bearing loops) `rescore`:
    `async rescore(run, iteration, *, sample, cache=None, settings=None) -> list[Score]`, which re-asks the
    run's critic(s) about that iteration's candidate with the same prompt and schema as re-score number
    `sample` (1, 2, ...; cached; used by `promptlab.analysis.consistency`). A hook draws at
    `rescore_sample(run.sample, sample)` so a re-score is never a cache hit of a logged call."""

    name: str
    config_cls: type[LoopConfig]
    arun: Callable[..., Awaitable[Run]]
    description: str
    rescore: Callable[..., Awaitable[list[Score]]] | None = None


LOOPS: dict[str, LoopSpec] = {}


def register_loop(spec: LoopSpec) -> LoopSpec:
    """Register a loop by name (a later registration of the same name replaces it)."""
    LOOPS[spec.name] = spec
    return spec


__all__ = [
    "DEFAULT_GOAL",
    "LOOPS",
    "LoopConfig",
    "LoopSpec",
    "RESCORE_BASE",
    "RESCORE_STRIDE",
    "as_config",
    "as_task",
    "base_provenance",
    "best_iteration",
    "by_average",
    "by_decision_score",
    "cut",
    "goal_of",
    "mean_present",
    "provenance_scope",
    "register_loop",
    "rescore_sample",
    "scoped_provenance",
    "sync_twin",
    "text_hash",
]
