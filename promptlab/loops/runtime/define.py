"""How a loop is defined: `define_loop` turns a loop's own body into its public entry points.

A loop's body is `async def body(ctx, task, cfg) -> Run`: it gets the run context already open, the task and its
config, and keeps only what is its own. `define_loop(name, ConfigClass, description, ...)` makes of it:

- the async entry point, with the parameters every loop takes (`task`, `config`, and keyword-only `sample`,
  `on_event`, `cache`, `settings`, `provenance`; `LOOP_ARGS_DOC` documents them in its docstring) and a
  signature a type checker sees (`AsyncLoop[C]`);
- its sync twin (`.sync`), which also works inside Jupyter;
- its registration under `name` (`.spec`, a `LoopSpec` in `LOOPS`), so `run_loop(name, ...)` and sweeps find it.

Before the body runs, the task and config are read (`as_task`, `as_config`), the `check` hook refuses a bad task
with a ConfigError and names the models the run calls beyond its roles, and the run context is opened (which
checks every model before any call). A loop whose runs open their context elsewhere (PES: its agent opens one
per turn) uses `define_loop_runner`, whose body gets the common arguments (`RunArgs`) instead.
inspect_ai's `@solver` and `@scorer` are the model.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, fields
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, cast

from ...aio import run_sync
from ...errors import ConfigError
from ...events import EventHandler
from ...llm.call.entry import CacheArg
from ...llm.call.settings import Settings
from ...record import Iteration, Run, Score, Task
from ...registry import Registry
from .config import C, LoopConfig, as_config, as_task
from .context import RunContext
from .interrupt import INTERRUPTED, stop_requested
from .toolkit import best_iteration, by_average

T = TypeVar("T")
P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)
C_contra = TypeVar("C_contra", bound=LoopConfig, contravariant=True)

TaskArg = Task | str | dict[str, Any]
"""What an entry point takes as its task: a Task, a dict of its fields, or a bare prompt string."""


# The registry --------------------------------------------------------------------------------------
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
    check: Callable[[Task, Any], Iterable[str]] | None = None
    """The loop's config check against a task (`define_loop(check=...)`): refuses a bad task or config with a
    ConfigError naming the field, and returns the models the run calls beyond its roles. A sweep runs it for every
    cell x task before anything runs (`promptlab.sweeps.checks`)."""


def spec_of(obj: Any) -> LoopSpec:
    """The LoopSpec of a loop's entry point (`define_loop`'s `.spec`), or the LoopSpec itself."""
    spec = getattr(obj, "spec", obj)
    if not isinstance(spec, LoopSpec):
        raise TypeError(f"{obj!r} is neither a loop made by define_loop nor a LoopSpec")
    return spec


LOOPS: Registry[LoopSpec] = Registry("loop", "promptlab.loops", adopt=spec_of)
"""Every loop by name: promptlab's own (`promptlab.plugins`), those of installed packages (the `promptlab.loops`
entry-point group: a module that defines loops, or a loop's entry point) and any defined since."""


def register_loop(spec: LoopSpec) -> LoopSpec:
    """Register a loop by name (a later registration of the same name replaces it)."""
    return LOOPS.register(spec.name, spec)


def sync_twin(arun: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """The sync twin of an async loop runner: same arguments, runs it to completion (also in Jupyter)."""

    @functools.wraps(arun)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(arun(*args, **kwargs))  # type: ignore[arg-type]

    run.__doc__ = f"The sync twin of `{arun.__name__}` (same arguments; works inside Jupyter too)."
    return run


# Re-scores -----------------------------------------------------------------------------------------
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


# Defining a loop -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunArgs:
    """The keyword arguments every loop's entry point takes beside its task and config."""

    sample: int = 0
    on_event: EventHandler | None = None
    cache: CacheArg = None
    settings: Settings | None = None
    provenance: dict[str, Any] | None = None

    def options(self) -> dict[str, Any]:
        """The arguments by name (for a call that takes them as keywords: `RunContext`, `PESAgent.arun_task`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def open(
        self,
        loop: str,
        task: Task,
        config: LoopConfig,
        *,
        models: Iterable[str] = (),
        rank_by: Callable[[Iteration], float | None] = by_average,
    ) -> RunContext:
        """The run context of one run of `loop` with these arguments (see `RunContext`)."""
        return RunContext(loop, task, config, **self.options(), models=models, rank_by=rank_by)


LOOP_ARGS_DOC = """Args:
    task: a Task, a dict of its fields, or a bare prompt string.
    config: a {config}, a dict of its fields, or None for the defaults.
    sample: replicate index (independent cached draws).
    on_event: called with each Event as the run goes.
    cache: the call cache (None: default, False: none, or a directory).
    settings: retries, structured re-asks, timeouts.
    provenance: extra entries for `Run.provenance` (the sweep's `experiment_hash`)."""
"""The Args section every entry point's docstring shares (`{config}`: the loop's config class)."""


class LoopEntry(Protocol[C_contra, R_co]):
    """An entry point's signature, the same for every loop (`R_co`: a Run, or a coroutine of one)."""

    def __call__(
        self,
        task: TaskArg,
        config: C_contra | dict[str, Any] | None = None,
        *,
        sample: int = 0,
        on_event: EventHandler | None = None,
        cache: CacheArg = None,
        settings: Settings | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> R_co: ...


class AsyncLoop(LoopEntry[C_contra, Coroutine[Any, Any, Run]], Protocol[C_contra]):
    """A loop's async entry point (`arun_<name>`), with its sync twin and its registration."""

    @property
    def sync(self) -> LoopEntry[C_contra, Run]:
        """The sync twin (`run_<name>`)."""

    @property
    def spec(self) -> LoopSpec:
        """The loop's registration."""


Body = Callable[[RunContext, Task, C], Awaitable[Run]]
"""A loop's own code: the run context (open), the task and the config, to the finished Run."""
Runner = Callable[[Task, C, RunArgs], Awaitable[Run]]
"""A loop that opens its run context itself: the task, the config and the common arguments, to the Run."""
Check = Callable[[Task, C], Iterable[str]]
"""Refuses a bad task or config with a ConfigError before any call; returns the models the run calls beyond
its roles (a target model, a judge scorer's model, several critics), which are checked before any call too."""


@dataclass(frozen=True)
class _Definition(Generic[C]):
    """What `define_loop` and `define_loop_runner` were given: the loop's name, config class, line and hook."""

    name: str
    config_cls: type[C]
    description: str
    rescore: Callable[..., Awaitable[list[Score]]] | None
    check: Check[C] | None = None

    def entry(self, runner: Runner[C], like: Callable[..., Any]) -> AsyncLoop[C]:
        """The entry points and registration of `runner`, named and documented after the body `like`."""
        cls, read = self.config_cls, functools.partial(as_config, self.config_cls)

        async def arun(
            task: TaskArg,
            config: C | dict[str, Any] | None = None,
            *,
            sample: int = 0,
            on_event: EventHandler | None = None,
            cache: CacheArg = None,
            settings: Settings | None = None,
            provenance: dict[str, Any] | None = None,
        ) -> Run:
            args = RunArgs(sample, on_event, cache, settings, provenance)
            return await runner(as_task(task), read(config), args)

        arun.__name__, arun.__qualname__, arun.__module__ = like.__name__, like.__qualname__, like.__module__
        arun.__doc__ = entry_doc(like.__doc__, cls)
        arun.__annotations__ = {**arun.__annotations__, "config": cls | dict[str, Any] | None}
        run = sync_twin(arun)
        run.__name__ = run.__qualname__ = like.__name__.removeprefix("a")
        spec = register_loop(LoopSpec(self.name, cls, arun, self.description, self.rescore, self.check))
        arun.sync, arun.spec = run, spec  # type: ignore[attr-defined]
        return cast("AsyncLoop[C]", arun)


def define_loop(
    name: str,
    config_cls: type[C],
    description: str,
    *,
    check: Check[C] | None = None,
    rank_by: Callable[[Iteration], float | None] = by_average,
    rescore: Callable[..., Awaitable[list[Score]]] | None = None,
) -> Callable[[Body[C]], AsyncLoop[C]]:
    """Make a loop of its body: the async entry point (returned), its sync twin (`.sync`) and its registration.

    Args:
        name: the loop's name (`Run.loop`, `run_loop(name, ...)`, a sweep's `loop`).
        config_cls: the loop's config class (a `LoopConfig`).
        description: one line for the registry.
        check: refuses a bad task or config before any call and names the models the run calls beyond its
            roles (see `Check`); None: no check beyond the config's own.
        rank_by: how the run's `best_iteration` is chosen (`by_decision_score` where the router uses a score).
        rescore: the loop's re-score hook (see `LoopSpec`), for critic-bearing loops.

    The body's docstring becomes the entry point's, with the shared Args section (`LOOP_ARGS_DOC`) put before
    its first section (Returns, Raises).
    """
    definition = _Definition(name, config_cls, description, rescore, check)

    def wrap(body: Body[C]) -> AsyncLoop[C]:
        async def runner(task: Task, cfg: C, args: RunArgs) -> Run:
            models = check(task, cfg) if check is not None else ()
            ctx = args.open(name, task, cfg, models=models, rank_by=rank_by)
            return await until_stopped(ctx, body(ctx, task, cfg))

        return definition.entry(runner, body)

    return wrap


async def until_stopped(ctx: RunContext, work: Awaitable[Run]) -> Run:
    """The Run `work` returns; when its task is cancelled while a Stop is asked (`stop_scope`'s flag is set:
    the explorer's Stop, Kernel ▸ Interrupt), the run closed at once with what it recorded: stop reason
    `interrupted`, the best iteration so far (by the loop's own `rank_by`) as its output, and none of the phases
    after the loop (no polish, no test-split measurement: `Run.final_test` stays None; `measure_stopped` takes it
    later). The call in flight is abandoned (its reply, should it come, may still fill the call cache, whose
    writes are atomic). A cancellation without a Stop is passed on."""
    try:
        return await work
    except asyncio.CancelledError:
        if not stop_requested():
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # the cancellation is answered here: the task goes on to return the record
    best = best_iteration(ctx.run.iterations, key=ctx.rank_by)
    ctx.run.info.update(stopped_at_once=True, final_iteration=best.index if best else None)
    ctx.emit("phase", "stopped: the call in flight was cancelled; no polish, no test measurement", phase="stop")
    return ctx.finish(INTERRUPTED, best.candidate if best else None)


def define_loop_runner(
    name: str,
    config_cls: type[C],
    description: str,
    *,
    rescore: Callable[..., Awaitable[list[Score]]] | None = None,
) -> Callable[[Runner[C]], AsyncLoop[C]]:
    """`define_loop` for a loop that opens its run context itself: its body gets the task, the config and the
    common arguments (`RunArgs`; `RunArgs.open` opens a context with them)."""
    definition = _Definition(name, config_cls, description, rescore)
    return lambda runner: definition.entry(runner, runner)


def entry_doc(doc: str | None, config_cls: type[LoopConfig]) -> str:
    """A body's docstring with the shared Args section put before its first section (or at its end)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    at = next((k for k, line in enumerate(lines) if line.rstrip() in ("Returns:", "Raises:")), len(lines))
    args = LOOP_ARGS_DOC.format(config=config_cls.__name__).splitlines()
    return "\n".join([*lines[:at], *([""] if at == len(lines) else []), *args, "", *lines[at:]]).rstrip() + "\n"


__all__ = [
    "LOOPS",
    "LOOP_ARGS_DOC",
    "AsyncLoop",
    "Body",
    "Check",
    "LoopEntry",
    "LoopSpec",
    "RESCORE_BASE",
    "RESCORE_STRIDE",
    "RunArgs",
    "Runner",
    "TaskArg",
    "define_loop",
    "define_loop_runner",
    "entry_doc",
    "register_loop",
    "rescore_sample",
    "spec_of",
    "sync_twin",
    "until_stopped",
]
