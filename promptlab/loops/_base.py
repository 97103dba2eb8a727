"""What every loop shares: the config base, the run context that records steps and events, the
loop registry, and running a coroutine from sync code (also inside a Jupyter kernel)."""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, ClassVar, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import providers
from ..aio import run_sync
from ..call import CacheArg, Settings, acomplete
from ..completion import Completion, account, account_failure
from ..errors import ConfigError, ParseError, PromptlabError, ProviderError
from ..events import Event, EventHandler
from ..providers import validate_model_name
from ..record import Iteration, ModelCall, Run, Score, Step, StepError, Task, Totals, run_id

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")

DEFAULT_GOAL = "Make the prompt clearer, more specific and more likely to get a useful answer."
"""The goal used when a task gives none (recorded in `Run.info['goal']`)."""


# The shared loop toolkit ------------------------------------------------------------------------------
def cut(text: str, limit: int | None) -> str:
    """`text` stripped, and cut to `limit` characters with '...' when longer (None: never cut)."""
    text = text.strip()
    return text if limit is None or len(text) <= limit else text[: max(limit - 3, 0)].rstrip() + "..."


def goal_of(task: Task) -> str:
    """The task's goal, or `DEFAULT_GOAL` when it gives none."""
    return task.goal.strip() or DEFAULT_GOAL


def mean_present(values: Iterable[float | None]) -> float | None:
    """The mean of the present (not None) values, unrounded; None when none is present."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def best_iteration(iterations: Sequence[Iteration],
                   key: Callable[[Iteration], float | None] = lambda i: i.average) -> Iteration | None:
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


def preflight_models(models: Iterable[str]) -> None:
    """The one place a run checks every model it will use before any call (names, keys, local files).

    Uses `promptlab.providers.preflight` where the installed promptlab has it (h8-core), else checks names."""
    check = getattr(providers, "preflight", None)
    if check is not None:
        check(models)
        return
    for m in dict.fromkeys(models):
        validate_model_name(m)


class LoopConfig(BaseModel):
    """Settings every loop takes; each loop's config adds its own fields.

    Roles are played by `generator_model` (proposing roles) and `critic_model` (judging roles), both
    defaulting to `model`; `role_models` overrides single roles by name.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    CRITIC_ROLES: ClassVar[frozenset[str]] = frozenset()
    ROLES: ClassVar[tuple[str, ...]] = ()

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

    def model_for(self, role: str) -> str:
        """The model that plays `role`."""
        if role in self.role_models:
            return self.role_models[role]
        if role in self.CRITIC_ROLES:
            return self.critic_model or self.model
        return self.generator_model or self.model


class RunContext:
    """Records one run as it goes: model calls through the core path, steps, errors, events, totals."""

    def __init__(
        self,
        loop: str,
        task: Task,
        config: LoopConfig,
        *,
        sample: int = 0,
        on_event: EventHandler | None = None,
        cache: CacheArg = None,
        settings: Settings | None = None,
        id_extra: dict[str, Any] | None = None,
        provenance: dict[str, Any] | None = None,
        models: Iterable[str] = (),
    ) -> None:
        """Check every model the run will use (the roles' and `models`) before any call, then open the record.

        `provenance` adds entries to `Run.provenance` (e.g. the sweep's `experiment_hash`)."""
        cfg = config.model_dump(mode="json")
        roles = config.ROLES or ()
        preflight_models([*(config.model_for(r) for r in roles), *models])
        self.config = config
        self.cache = cache
        self.settings = settings
        self.on_event = on_event
        self.t0 = time.perf_counter()
        self.run = Run(
            run_id=run_id(loop, task, cfg, sample, id_extra), loop=loop, task=task, config=cfg, sample=sample,
            models={r: config.model_for(r) for r in roles}, started_at=time.time(),
        )
        self.run.provenance = base_provenance(task) | dict(provenance or {})

    # events -----------------------------------------------------------------------------------
    def emit(self, kind: Any, message: str = "", *, iteration: int | None = None, phase: str | None = None,
             role: str | None = None, **data: Any) -> None:
        """Send an event to the callback, if any (a failing callback never stops the run)."""
        if self.on_event is None:
            return
        event = Event(kind=kind, run_id=self.run.run_id, loop=self.run.loop, iteration=iteration,
                      phase=phase, role=role, message=message, data=data)
        try:
            self.on_event(event)
        except Exception as e:  # the run is worth more than the display
            import logging

            logging.getLogger("promptlab").warning("on_event callback failed: %s", e)

    # prompts ----------------------------------------------------------------------------------
    def prompt(self, role: str, default: str, **fields: Any) -> str:
        """The role's prompt (an override from the config, else `default`) with `fields` filled in."""
        template = self.config.prompts.get(role, default)
        self.run.provenance.setdefault("prompt_hashes", {})[role] = text_hash(template)
        try:
            return template.format(**fields)
        except (KeyError, IndexError) as e:
            raise ConfigError(f"prompts.{role}: the template uses a field {e} that this role does not "
                              f"provide; available fields: {sorted(fields)}") from e

    # model calls ------------------------------------------------------------------------------
    @overload
    async def call(self, role: str, phase: str, prompt: str, *, schema: type[M], iteration: Iteration | None = ...,
                   system: str | None = ..., sample_offset: int = ..., model: str | None = ...,
                   judge: str | None = ..., token_type: str | None = ..., keep_raw: bool = ...,
                   ) -> tuple[M | None, Step]: ...

    @overload
    async def call(self, role: str, phase: str, prompt: str, *, schema: None = ...,
                   iteration: Iteration | None = ..., system: str | None = ..., sample_offset: int = ...,
                   model: str | None = ..., judge: str | None = ..., token_type: str | None = ...,
                   keep_raw: bool = ...) -> tuple[str | None, Step]: ...

    async def call(
        self,
        role: str,
        phase: str,
        prompt: str,
        *,
        schema: type[BaseModel] | None = None,
        iteration: Iteration | None = None,
        system: str | None = None,
        sample_offset: int = 0,
        model: str | None = None,
        judge: str | None = None,
        token_type: str | None = None,
        keep_raw: bool = False,
    ) -> tuple[Any, Step]:
        """Make one role's model call and record it as a step of `iteration` (or of setup/final).

        With `keep_raw`, the reply's raw text is kept on the step (`Step.raw`). With `token_type`, the reply
        is streamed and each piece is emitted as a `token` event with data {"token_type": token_type,
        "text": piece} (a cache hit sends its whole text as one piece).

        Returns (parsed object or text, step): a parsed reply has the schema's type. On a ParseError or
        ProviderError the first item is None, the step carries the error (with the raw output), and the
        run's `errors` lists it.
        """
        c, step = await self.completion(role, phase, prompt, schema=schema, iteration=iteration, system=system,
                                        sample_offset=sample_offset, model=model, judge=judge,
                                        token_type=token_type, keep_raw=keep_raw)
        if c is None:
            return None, step
        return (c.parsed if schema is not None else c.text), step

    async def completion(
        self,
        role: str,
        phase: str,
        prompt: str,
        *,
        schema: type[BaseModel] | None = None,
        iteration: Iteration | None = None,
        system: str | None = None,
        sample_offset: int = 0,
        model: str | None = None,
        judge: str | None = None,
        token_type: str | None = None,
        keep_raw: bool = False,
        place: bool = True,
        temperature: float | None = None,
        max_tokens: int | None = None,
        logprobs: bool = False,
    ) -> tuple[Completion | None, Step]:
        """`call`, returning the whole Completion (None on failure). `place=False` leaves the step for
        the caller to place (concurrent calls recorded in a fixed order); `temperature` and `max_tokens`
        override the config's; `logprobs` asks for token log-probabilities (20 alternatives)."""
        model = model or self.config.model_for(role)
        it = iteration.index if iteration is not None else None
        self.emit("phase", f"{role} ({model})", iteration=it, phase=phase, role=role)
        step = Step(iteration=it, phase=phase, role=judge or role, model=model)
        on_token = None
        if token_type is not None and self.on_event is not None:
            def on_token(piece: str) -> None:
                self.emit("token", piece, iteration=it, phase=phase, role=role, token_type=token_type, text=piece)
        extra: dict[str, Any] = {"logprobs": True, "top_logprobs": 20} if logprobs else {}
        try:
            c: Completion = await acomplete(
                model, prompt, schema=schema, system=system,
                temperature=self.config.temperature if temperature is None else temperature,
                max_tokens=self.config.max_tokens if max_tokens is None else max_tokens,
                sample=self.run.sample + sample_offset, cache=self.cache, settings=self.settings,
                on_token=on_token, **extra,
            )
        except (ParseError, ProviderError) as e:
            raw = e.raw if isinstance(e, ParseError) else None
            attempts = len(e.attempts) if isinstance(e, ParseError) else e.attempts
            step.call = ModelCall(model=model, attempts=attempts)
            self.fail(step, e, raw=raw).infrastructure = isinstance(e, ProviderError)
            account_failure(self.run.totals)
            if place:
                self.place(step, iteration)
            return None, step
        step.call = ModelCall(model=model, cache_hit=c.cache_hit, input_tokens=c.input_tokens,
                              output_tokens=c.output_tokens, cost_usd=c.cost_usd, latency_s=round(c.latency_s, 6),
                              attempts=c.attempts)
        account(self.run.totals, c)
        self._reported(judge or role, model, c)
        if keep_raw:
            step.raw = c.text
        if c.parsed is not None:
            step.output = c.parsed.model_dump(mode="json")
        else:
            step.output = {"text": c.text}
        self.emit("model_call", f"{model} {'(cached)' if c.cache_hit else ''}".strip(), iteration=it, phase=phase,
                  role=role, cache_hit=c.cache_hit, input_tokens=c.input_tokens, output_tokens=c.output_tokens,
                  cost_usd=c.cost_usd)
        if place:
            self.place(step, iteration)
        return c, step

    def _reported(self, role: str, model: str, c: Completion) -> None:
        """Provenance: per role, the model requested, the id the provider reported and the endpoint."""
        roles = self.run.provenance.setdefault("models", {})
        if role not in roles:
            roles[role] = {"requested": model, "reported": c.response_model, "endpoint": c.endpoint}

    def fail(self, step: Step, error: BaseException, *, raw: str | None = None) -> StepError:
        """Record an error on a step and on the run, and emit it."""
        err = StepError(iteration=step.iteration, phase=step.phase, role=step.role,
                        kind=type(error).__name__, message=str(error), raw=raw)
        step.error = err
        self.run.errors.append(err)
        self.emit("error", f"{err.kind}: {err.message}", iteration=step.iteration, phase=step.phase,
                  role=step.role, raw=raw)
        return err

    def place(self, step: Step, iteration: Iteration | None) -> None:
        """Append a step to `iteration` (or to the run's setup or final steps)."""
        if iteration is not None:
            iteration.steps.append(step)
        elif self.run.iterations:
            self.run.final.append(step)
        else:
            self.run.setup.append(step)

    # iterations -------------------------------------------------------------------------------
    def new_iteration(self) -> Iteration:
        """Start the next iteration (appended to the run)."""
        it = Iteration(index=len(self.run.iterations) + 1)
        self.run.iterations.append(it)
        self.emit("phase", f"iteration {it.index}", iteration=it.index, phase="iteration")
        return it

    def score(self, it: Iteration, scores: list[Score], average: float | None | EllipsisType = ...) -> None:
        """Set an iteration's scores and average (the mean of present scores unless given, None included)
        and emit them."""
        it.scores = scores
        it.average = mean_present(s.score for s in scores) if isinstance(average, EllipsisType) else average
        self.emit("score", f"average {it.average}" if it.average is not None else "score missing",
                  iteration=it.index, average=it.average, scores=[s.model_dump() for s in scores])

    def decide(self, it: Iteration, decision: str, reason: str) -> None:
        """Record and emit an iteration's decision."""
        it.decision, it.reason = decision, reason
        self.emit("decision", f"{decision}: {reason}", iteration=it.index, decision=decision)

    def finish(self, stop_reason: str, final_output: str | None) -> Run:
        """Close the run: stop reason, output, best iteration, wall time; emits run_finished."""
        r = self.run
        r.stop_reason, r.final_output = stop_reason, final_output
        scored = [it for it in r.iterations if it.average is not None]
        if scored:
            best = max(scored, key=lambda it: (it.average, -it.index))
            r.best_iteration, r.best_score = best.index, best.average
        r.totals.wall_time_s = round(time.perf_counter() - self.t0, 4)
        self.emit("run_finished", f"stopped: {stop_reason}", stop_reason=stop_reason, best_score=r.best_score)
        return r


def base_provenance(task: Task) -> dict[str, Any]:
    """What a run records before any call: versions and a hash of the task (examples and split included)."""
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    try:
        litellm_version: str | None = version("litellm")
    except PackageNotFoundError:
        litellm_version = None
    task_json = task.model_dump_json(exclude={"examples_source"})
    return {"promptlab_version": __version__, "litellm_version": litellm_version, "task_hash": text_hash(task_json),
            "prompt_hashes": {}, "models": {}}


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


@dataclass(frozen=True)
class LoopSpec:
    """A registered loop: its name, config class and async runner, and (for critic-bearing loops) `rescore`:
    `async rescore(run, iteration, *, sample, cache=None, settings=None) -> list[Score]`, which re-asks the
    run's critic(s) about that iteration's candidate with the same prompt and schema at sample index
    `sample` (cached; used by `promptlab.analysis.reliability`)."""

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


def get_loop(name: str) -> LoopSpec:
    """The registered loop called `name`; an unknown name lists the known ones."""
    from . import _registry  # noqa: F401  (imports the built-in loops)

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


__all__ = ["DEFAULT_GOAL", "base_provenance", "best_iteration", "cut", "goal_of", "mean_present",
           "preflight_models", "sync_twin", "text_hash", "LoopConfig", "RunContext", "LoopSpec", "LOOPS", "register_loop", "get_loop", "run_loop",
           "arun_loop", "run_sync", "as_task", "as_config", "Totals", "PromptlabError"]
