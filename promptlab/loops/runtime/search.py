"""What the prompt-search baselines share (`opro`, `ape`, `protegi`, `resample`): every candidate is an iteration
measured on the dev split, and the run returns its incumbent.

More in docs/baselines.md, section "promptlab.loops.runtime.search".
"""

from __future__ import annotations

import functools
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ...critics.simulated import simulated_critic
from ...errors import ConfigError
from ...eval.tasks import check_task, examples_of, input_text
from ...record import GroundedScore, Iteration, Run, Step, Task
from .budget import phase_tokens, rough_tokens
from .context import RunContext
from .decision import Decision
from .define import AsyncLoop, define_loop
from .grounding import GroundedConfig, grounded_decision_score, measure, measure_test
from .role_call import RoleCall
from .search_router import Action, route
from .toolkit import by_decision_score

DRAWS_PER_RUN = 1000
"""Room for the draws of one request within a run: the k-th sending of a request is sample `run.sample x
DRAWS_PER_RUN + k` (configs keep k below it)."""


class Instruction(BaseModel):
    """A reply that proposes one instruction (OPRO's optimizer, APE's proposer)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})
    instruction: str = Field(json_schema_extra={"maxLength": 500})
    """The instruction (a prompt; an example's input is appended unless it names a placeholder)."""


class Rewrite(BaseModel):
    """A reply that rewrites a prompt in other words (the paraphrase step of APE, ProTeGi and resample)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})
    prompt: str = Field(json_schema_extra={"maxLength": 500})
    """The rewritten prompt."""


class SearchConfig(GroundedConfig):
    """Settings every prompt-search baseline takes (and `GroundedConfig`'s): candidates are measured on the dev
    split by `target_model`, and every incumbent also on the test split."""

    test_incumbents: bool = True
    """Measure every candidate that was ever the incumbent on the test split after the loop (outside the
    budget), so that `analysis.equal_budget` gives exact test scores at every budget."""


def check_search_loop(task: Task, cfg: SearchConfig, loop: str) -> list[str]:
    """Refuse a task without examples (and a bad task or target) with a ConfigError naming it, before any call;
    returns the models the run will call beyond its roles (the target, a judge scorer's model)."""
    if not task.grounded:
        raise ConfigError(
            f"task {task.id!r} has no examples: {loop} scores every candidate on the dev split of a "
            "grounded task: pick one of data/grounded_tasks.jsonl, or give the task examples, a scorer and a split"
        )
    check_task(task, where=f"task {task.id!r}")
    judge = (task.scorer or {}).get("model")
    for field, model in (("target_model", cfg.target()), ("scorer.model", judge)):
        if simulated_critic(model) is not None:
            raise ConfigError(f"{field}: {model!r} is a simulated critic; {loop} has no critic role")
    return [cfg.target(), *([judge] if isinstance(judge, str) else [])]


def dev_score(it: Iteration | None) -> float | None:
    """An iteration's dev score (None without a measurement)."""
    return it.grounded.score if it is not None and it.grounded is not None else None


class Search:
    """One run's search state: its candidates by text, its incumbent, its draws and the cost estimates."""

    def __init__(self, ctx: RunContext, cfg: SearchConfig) -> None:
        self.ctx, self.cfg = ctx, cfg
        self.task = ctx.run.task
        self.dev = examples_of(self.task, "dev")
        self.by_text: dict[str, Iteration] = {}
        self.incumbent: Iteration | None = None
        self.draws: dict[str, int] = {}
        self.measured = 0
        """Dev examples run so far (what the per-example cost estimate divides by)."""

    @classmethod
    def begin(cls, ctx: RunContext, cfg: SearchConfig) -> Search:
        """Record the run's target model, announce the run (`run_started`) and open its search state."""
        ctx.run.models["target"] = cfg.target()
        task = ctx.run.task
        ctx.emit("run_started", f"{ctx.run.loop} on task {task.id}", task=task.id, models=ctx.run.models)
        return cls(ctx, cfg)

    # randomness and draws -------------------------------------------------------------------------
    def rng(self, *parts: Any) -> random.Random:
        """A generator seeded by the loop, the run's sample and `parts` (what is drawn, the round, ...)."""
        return random.Random(":".join(str(p) for p in (self.ctx.run.loop, self.ctx.run.sample, *parts)))

    def fresh_sample(self, prompt: str) -> int:
        """The sample of the next sending of `prompt` in this run (see the module docstring)."""
        k = self.draws.get(prompt, 0)
        self.draws[prompt] = k + 1
        return self.ctx.run.sample * DRAWS_PER_RUN + k % DRAWS_PER_RUN

    async def write(
        self, role: str, phase: str, prompt: str, schema: type[BaseModel], it: Iteration | None
    ) -> tuple[Any, Step]:
        """One writing call (a fresh draw of `prompt`), recorded as a step of `it`: (parsed reply or None, step)."""
        c, step = await self.ctx.ask(
            RoleCall(
                role, phase, prompt, schema=schema, iteration=it, sample=self.fresh_sample(prompt), token_type=role
            )
        )
        return (c.parsed if c is not None else None), step

    # budget -----------------------------------------------------------------------------------------
    def write_cost(self, phase: str, prompt: str, calls: int = 1) -> tuple[int, int]:
        """(calls, tokens) expected of `calls` writing calls of `phase` with this prompt."""
        return calls, phase_tokens(self.ctx, phase, calls, rough_tokens(prompt))

    def dev_cost(self, prompt: str, n: int | None = None) -> tuple[int, int]:
        """(calls, tokens) expected of running `prompt` on `n` dev examples (default all): per example, what
        the run's dev examples have cost so far, else one call (two with a judge scorer) of about the prompt
        and an input's length (`rough_tokens`)."""
        n = len(self.dev) if n is None else n
        tally = self.ctx.spent_by_phase.get("score_dev")
        if tally is not None and self.measured:
            return round(tally.calls * n / self.measured), round(tally.tokens * n / self.measured)
        judged = (self.task.scorer or {}).get("kind") == "judge"
        text = prompt + (input_text(self.dev[0].input) if self.dev else "")
        return n * (1 + judged), n * (1 + judged) * rough_tokens(text)

    def stop(self, *costs: tuple[int, int]) -> str | None:
        """Why the next step, whose parts cost `costs`, must not start (its spend would pass a budget), or None."""
        return self.ctx.budget_stop(sum(c for c, _ in costs), sum(t for _, t in costs))

    def next_step(self, left: int, *costs: tuple[int, int]) -> Decision[Action]:
        """The router's decision before a step whose parts cost `costs`, with `left` planned steps left
        (`promptlab.loops.runtime.search_router.route`)."""
        return route(left, self.stop(*costs))

    # candidates ---------------------------------------------------------------------------------------
    async def measure(self, it: Iteration, indices: list[int] | None = None) -> GroundedScore:
        """Run `it`'s candidate on the dev split (or the dev examples at `indices`) and emit its score."""
        assert it.candidate is not None
        g = await measure(self.ctx, self.cfg, it.candidate, "dev", it, indices=indices)
        self.measured += len(self.dev) if indices is None else len(indices)
        return g

    def scored(self, it: Iteration, g: GroundedScore) -> None:
        """Set `it`'s dev measurement and decision score, and emit them."""
        it.grounded = g
        it.decision_score = grounded_decision_score(g.score)
        self.ctx.emit(
            "score",
            f"dev {g.score:.3f} (n={g.n})" if g.score is not None else "dev score missing",
            iteration=it.index,
            dev=g.score,
            n=g.n,
        )

    async def start(self) -> Decision[Action]:
        """Candidate 0: the starting prompt on the whole dev split (it is then the incumbent), and the router's
        decision on it (STOP 'budget' when the budget does not allow it)."""
        decision = self.next_step(1, self.dev_cost(self.task.prompt))
        if decision.stops:
            return decision
        it = self.ctx.new_iteration(0)
        it.candidate = self.task.prompt
        self.by_text[it.candidate] = it
        self.scored(it, await self.measure(it))
        self.incumbent = it
        self.decide(it, "START", "the starting prompt (candidate 0)" + self.dev_note(it))
        return decision

    async def take(self, it: Iteration, text: str | None, step: Step, origin: str) -> bool:
        """Record `text` (a written candidate, None when the call failed) as `it`'s candidate: measure it on dev
        (or reuse the measurement of an earlier candidate with the same text), update the incumbent and decide.
        Returns whether a new candidate was measured."""
        it.metrics["origin"] = origin
        text = text.strip() if text is not None else None
        if not text:
            if text is not None:
                self.ctx.fail(step, ValueError("the reply holds no prompt text"), raw=text)
            self.decide(it, "NO_CANDIDATE", "the call that writes a candidate gave none (see errors)")
            return False
        it.candidate = text
        earlier = self.by_text.get(text)
        if earlier is not None:
            if earlier.grounded is not None:
                self.scored(it, earlier.grounded)
            self.decide(it, "DUPLICATE", f"the same text as iteration {earlier.index}: not measured again")
            return False
        self.by_text[text] = it
        self.scored(it, await self.measure(it))
        self.consider(it)
        return True

    def consider(self, it: Iteration) -> None:
        """Make `it` the incumbent when its dev score beats the incumbent's (ties keep the earlier), and decide."""
        new, old = dev_score(it), dev_score(self.incumbent)
        if new is not None and (old is None or new > old):
            self.incumbent = it
            self.decide(it, "NEW_BEST", f"the best dev score so far{self.dev_note(it)}")
        else:
            best = f"iteration {self.incumbent.index}" if self.incumbent is not None else "none"
            self.decide(it, "NOT_BETTER", f"not above the best so far ({best}){self.dev_note(it)}")

    def decide(self, it: Iteration, decision: str, reason: str) -> None:
        """Decide `it`, stamping the run's spend and its incumbent."""
        self.ctx.decide(it, decision, reason, incumbent=self.incumbent.index if self.incumbent else None)

    @staticmethod
    def dev_note(it: Iteration) -> str:
        """': dev 0.650 (n=20)', or '' without a dev score."""
        g = it.grounded
        return f": dev {g.score:.3f} (n={g.n})" if g is not None and g.score is not None else ""

    # the end ---------------------------------------------------------------------------------------------
    async def finish(self, decision: Decision[Action], summary: str) -> Run:
        """Measure the start, the incumbent and (test_incumbents) every earlier incumbent on test, close the
        run with the incumbent as its output, the router's stop reason and `summary` (the last line adds the
        output and the stop). Raises ValueError for a decision that does not stop."""
        if decision.stop_reason is None:
            raise ValueError(f"finish needs the router's decision to stop, got {decision.action}")
        ctx, final, stop_reason = self.ctx, self.incumbent, decision.stop_reason
        ctx.run.info.update(
            final_iteration=final.index if final else None,
            dev_examples=len(self.dev),
            candidates=sum(it.candidate is not None and it.index > 0 for it in ctx.run.iterations),
        )
        await measure_test(ctx, self.cfg, final.candidate if final else None)
        run = ctx.finish(stop_reason, final.candidate if final else None)
        if final is not None:  # the loop's own choice (ProTeGi: its beam's head), whatever rank_by says
            run.best_iteration, run.best_score = final.index, final.average
        start = " (the starting prompt, candidate 0)" if final is not None and final.index == 0 else ""
        out = (
            f"Output: the prompt of iteration {final.index}{start}{self.dev_note(final)}."
            if final
            else "No candidate was measured."
        )
        run.summary = f"{summary}\n{out}\nStopped: {stop_reason}."
        return run


S = TypeVar("S", bound=SearchConfig)
SearchBody = Callable[[Search, Task, S], Awaitable[Run]]
"""A search loop's own code: the run's `Search` (its context is `search.ctx`), the task and the config."""

SEARCH_RAISES = """

    Raises:
        ConfigError: a bad config, or a task without examples, before any call.
"""


def define_search_loop(
    name: str, config_cls: type[S], description: str, *, check: Callable[[S], None] | None = None
) -> Callable[[SearchBody[S]], AsyncLoop[S]]:
    """`define_loop` for a prompt-search baseline: the task must be grounded (`check_search_loop`, before any
    call), the run's best iteration is by decision score (its dev score), and the body gets the run's `Search`,
    opened by `Search.begin`, in place of its context. `check` refuses a bad config of the loop's own with a
    ConfigError, before any call too."""

    def checked(task: Task, cfg: S) -> list[str]:
        if check is not None:
            check(cfg)
        return check_search_loop(task, cfg, name)

    def wrap(body: SearchBody[S]) -> AsyncLoop[S]:
        @functools.wraps(body)
        async def opened(ctx: RunContext, task: Task, cfg: S) -> Run:
            return await body(Search.begin(ctx, cfg), task, cfg)

        opened.__doc__ = (body.__doc__ or "").rstrip() + SEARCH_RAISES
        define = define_loop(
            name,
            config_cls,
            description,
            check=checked,
            rank_by=by_decision_score,
        )
        return define(opened)

    return wrap


# Shared role prompt (each loop's `prompts` may override it under its role's name; field: prompt) -------------
PARAPHRASE_PROMPT = """Rewrite the instruction below in other words. Keep its meaning and everything it asks \
for; change only the wording.

Instruction:
{prompt}

Reply with JSON only: an object whose "prompt" field is the rewritten instruction."""

__all__ = [
    "DRAWS_PER_RUN",
    "Instruction",
    "PARAPHRASE_PROMPT",
    "Rewrite",
    "Search",
    "SearchConfig",
    "check_search_loop",
    "define_search_loop",
    "dev_score",
]
