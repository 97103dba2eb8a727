"""What a re-score may change about a logged candidate for the critic-bias probes (`promptlab.analysis.bias_asks`):
the candidate's text (a padded copy) and a previous score shown in the critic's context (the anchoring probe).

`rescoring_goal` appends ANCHOR_NOTE to the goal the critic is shown; `rescoring_iteration` is the scratch
iteration a re-score scores in, carrying the logged candidate's dev score and index (what a simulated critic
scores from) and the shown score (`metrics["anchor"]`, what a simulated critic with an anchoring weight is
pulled towards).

`define_rescore` makes a loop's re-score hook (`LoopSpec.rescore`) of the part that is its own: the body gets a
`Rescore` (the re-score's run context, the run's config, the scratch iteration, the goal and the candidate to
score) and returns the critics' scores.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Generic

from ...errors import ConfigError
from ...llm.call.entry import CacheArg
from ...llm.call.settings import Settings
from ...record import Iteration, Run, Score
from .config import LOGGED, C, goal_of
from .context import RunContext
from .define import rescore_sample

ANCHOR_NOTE = "\n\nFor reference, an earlier version of this prompt was scored {anchor:g} out of 10."
"""Appended to the goal when a re-score shows the critic a previous score."""


def rescoring_goal(goal: str, anchor: float | None) -> str:
    """The goal the critic is shown: with ANCHOR_NOTE when a previous score is shown."""
    return goal if anchor is None else goal + ANCHOR_NOTE.format(anchor=anchor)


def rescoring_iteration(scratch: Iteration, logged: Iteration, anchor: float | None) -> Iteration:
    """`scratch` made to stand for the logged iteration (its dev score and index) with the shown score."""
    scratch.grounded = logged.grounded
    scratch.index = logged.index
    if anchor is not None:
        scratch.metrics["anchor"] = anchor
    return scratch


@dataclass(frozen=True)
class Rescore(Generic[C]):
    """One re-score of a logged candidate, ready for the loop's critic(s)."""

    ctx: RunContext
    """The re-score's run context, drawing at `rescore_sample(run.sample, sample)`."""
    config: C
    """The logged run's config."""
    run: Run
    """The logged run."""
    iteration: Iteration
    """The scratch iteration the critics score in (`rescoring_iteration`: the logged one's index, dev score and
    the shown score)."""
    goal: str
    """The goal the critics are shown (`rescoring_goal`)."""
    candidate: str
    """The text to score: the logged candidate, or the replacement given."""


def define_rescore(
    loop: str, config_cls: type[C], *, models: Callable[[C], Iterable[str]] | None = None
) -> Callable[[Callable[[Rescore[C]], Awaitable[list[Score]]]], Callable[..., Awaitable[list[Score]]]]:
    """Make a loop's re-score hook of its body (see `LoopSpec`): the hook
    `async rescore(run, iteration, *, sample, cache=None, settings=None, candidate=None, anchor=None)`
    re-asks the run's critic(s) about iteration `iteration`'s candidate with the loop's prompt and schema, as
    re-score number `sample` (1, 2, ...; cached); `candidate` replaces its text and `anchor` shows a previous
    score (the bias probes). It draws at `rescore_sample(run.sample, sample)` (the body adds a critic's index),
    so no re-score is a cache hit of a logged call or of another re-score. It raises ConfigError for an
    iteration without a candidate or a re-score index below 1. Only the critics' models are checked before
    any call (the config's critic roles and `models`, the critics' models beyond them): a re-score calls no
    generator, so a run's generator need not be configured to re-ask its critic."""

    def wrap(body: Callable[[Rescore[C]], Awaitable[list[Score]]]) -> Callable[..., Awaitable[list[Score]]]:
        @functools.wraps(body)
        async def rescore(
            run: Run,
            iteration: int,
            *,
            sample: int,
            cache: CacheArg = None,
            settings: Settings | None = None,
            candidate: str | None = None,
            anchor: float | None = None,
        ) -> list[Score]:
            cfg = config_cls.model_validate(run.config, context=LOGGED)
            it = next((i for i in run.iterations if i.index == iteration), None)
            if it is None or it.candidate is None:
                raise ConfigError(f"iteration: run {run.run_id} has no candidate at iteration {iteration}")
            draw = rescore_sample(run.sample, sample)
            extra = models(cfg) if models is not None else ()
            ctx = RunContext(
                loop,
                run.task,
                cfg,
                sample=draw,
                cache=cache,
                settings=settings,
                models=extra,
                check_roles=cfg.CRITIC_ROLES,
            )
            scratch = rescoring_iteration(ctx.new_iteration(), it, anchor)  # what a simulated critic scores from
            goal = rescoring_goal(str(run.info.get("goal") or goal_of(run.task)), anchor)
            return await body(Rescore(ctx, cfg, run, scratch, goal, it.candidate if candidate is None else candidate))

        del rescore.__wrapped__  # the hook's own signature, not the body's
        return rescore

    return wrap


__all__ = ["ANCHOR_NOTE", "Rescore", "define_rescore", "rescoring_goal", "rescoring_iteration"]
