"""P³RO (Plan, Probe, Polish, Reflect and Orient): criteria-driven prompt refinement.

PLAN: the decomposer turns the goal into 3-5 measurable criteria and the strategist writes an ordered
improvement plan. PROBE: each iteration the generator writes a full new prompt and the evaluator scores
it 1-10 on every criterion. REFLECT & ORIENT: the reflector distils the evaluation into one directive,
and `decide` (pure Python) picks FINISH, REVISE_STRATEGY (the strategist plans again, seeing the
history) or CONTINUE_PROBING. POLISH is pure Python, no model call: the highest-scoring prompt of the
whole history is the result (ties go to the earliest) and `Run.summary` tells the journey.

Missing scores are never invented: a criterion the evaluator did not score is `None`, an evaluator
failure leaves every criterion `None` and the iteration's average `None` (see `decide_with_reason`).
Calls stream with `token_type` = the role ("decomposer", "strategist", "generator", "evaluator",
"reflector").
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ..call import CacheArg, Settings
from ..events import EventHandler
from ..record import Iteration, Run, Score, Task
from ._base import LoopConfig, LoopSpec, RunContext, as_config, as_task, register_loop, run_sync
from ._p3ro_schemas import (
    EvaluationResult,
    GeneratedPrompt,
    ImprovementPlan,
    Reflection,
    decomposed_schema,
    evaluation_schema,
    match_scores,
    norm_criterion,
)

Decision = Literal["FINISH", "REVISE_STRATEGY", "CONTINUE_PROBING"]
DEFAULT_GOAL = "Make the prompt clearer, more specific and more likely to get a useful answer."
"""The goal used when a task gives none (recorded in `Run.info['goal']`)."""


class P3ROConfig(LoopConfig):
    """P³RO settings; `critic_model` plays the evaluator, `generator_model` every other role."""

    ROLES = ("decomposer", "strategist", "generator", "evaluator", "reflector")
    CRITIC_ROLES = frozenset({"evaluator"})

    finish_threshold: float = Field(8.5, ge=1, le=10)
    """FINISH once an iteration's average criterion score reaches this (1-10)."""
    max_iterations: int = Field(5, ge=1, le=100)
    """Probe iterations at most (FINISH when reached)."""
    min_criteria: int = Field(3, ge=1, le=6)
    """Fewest criteria the decomposer must give."""
    max_criteria: int = Field(5, ge=1, le=6)
    """Most criteria the decomposer may give (at most 6: a local model's reply holds at most 6 items)."""
    history_window: int = Field(3, ge=0, le=20)
    """Past attempts shown to the strategist and the generator."""
    history_chars: int = Field(600, ge=50, le=20000)
    """Each past prompt text is cut to this many characters in role prompts."""

    @model_validator(mode="after")
    def _criteria_bounds(self) -> P3ROConfig:
        if self.min_criteria > self.max_criteria:
            raise ValueError(f"min_criteria ({self.min_criteria}) must not exceed max_criteria "
                             f"({self.max_criteria})")
        return self


# The router (pure) ----------------------------------------------------------------------------------
def decide_with_reason(averages: list[float | None], config: P3ROConfig) -> tuple[Decision, str]:
    """The NextStepDecider: the next step after the last iteration, and why.

    Rules, in order: FINISH when the last average >= `finish_threshold` or `len(averages)` >=
    `max_iterations`; REVISE_STRATEGY when there are two or more iterations and the last average did not
    increase; CONTINUE_PROBING otherwise.

    A missing average (None: no candidate, or the evaluator failed) is never replaced by a number: it
    never finishes by threshold, and as the last average it counts as "did not increase". When the
    iteration just before has no average, the last one is compared with the most recent present average;
    if there is none, there is nothing to compare with and probing continues.

    Args:
        averages: the average score of every iteration so far, in order (None where missing).
        config: supplies `finish_threshold` and `max_iterations`.

    Raises:
        ValueError: `averages` is empty.
    """
    if not averages:
        raise ValueError("decide needs the averages of at least one iteration")
    n, last = len(averages), averages[-1]
    if last is not None and last >= config.finish_threshold:
        return "FINISH", f"average {last:g} >= threshold {config.finish_threshold:g}"
    if n >= config.max_iterations:
        return "FINISH", f"reached max_iterations {config.max_iterations}"
    if n < 2:
        if last is None:
            return "CONTINUE_PROBING", "first iteration has no score; nothing to compare with"
        return "CONTINUE_PROBING", f"first iteration (average {last:g}); nothing to compare with yet"
    if last is None:
        return "REVISE_STRATEGY", "average missing this iteration: counted as no improvement"
    earlier = [(i, a) for i, a in enumerate(averages[:-1], start=1) if a is not None]
    if not earlier:
        return "CONTINUE_PROBING", f"average {last:g}; no earlier average to compare with"
    idx, prev = earlier[-1]
    where = f"iteration {idx}" + ("" if idx == n - 1 else f"; iteration {n - 1} had no score")
    if last <= prev:
        return "REVISE_STRATEGY", f"average {last:g} did not increase over {prev:g} ({where})"
    return "CONTINUE_PROBING", f"average {last:g} increased over {prev:g} ({where})"


def decide(averages: list[float | None], config: P3ROConfig) -> Decision:
    """The next step only; see `decide_with_reason` for the rules."""
    return decide_with_reason(averages, config)[0]


# Helpers ------------------------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _numbered(criteria: list[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, start=1))


def _distinct(items: list[str]) -> list[str]:
    """Items in order without case-insensitive repeats."""
    seen: set[str] = set()
    out = []
    for item in items:
        if norm_criterion(item) not in seen:
            seen.add(norm_criterion(item))
            out.append(item)
    return out


def _mean(scores: list[Score]) -> float | None:
    present = [s.score for s in scores if s.score is not None]
    return round(sum(present) / len(present), 4) if present else None


def _score_line(it: Iteration) -> str:
    parts = [f"{_cut(s.criterion, 40)}: " + (f"{s.score:g}" if s.score is not None else "-")
             for s in it.scores]
    avg = f"average {it.average:g}" if it.average is not None else "no score"
    return f"{avg}; " + "; ".join(parts) if parts else avg


def _history(iterations: list[Iteration], config: P3ROConfig) -> str:
    tried = [it for it in iterations if it.candidate is not None]
    tried = tried[-config.history_window:] if config.history_window else []
    if not tried:
        return "(no attempts yet)"
    blocks = [f"Attempt {it.index} ({_score_line(it)}):\n{_cut(it.candidate or '', config.history_chars)}"
              + (f"\nLesson: {_cut(it.reflection, 300)}" if it.reflection else "") for it in tried]
    return "\n\n".join(blocks)


def _evaluation_text(scores: list[Score], result: EvaluationResult) -> str:
    lines = [f"- {_cut(s.criterion, 80)}: "
             + (f"{s.score:g}/10. {_cut(s.justification, 200)}" if s.score is not None else "not scored")
             for s in scores]
    return "\n".join(lines) + f"\nOverall feedback: {_cut(result.qualitative_feedback, 500) or '(none)'}"


def _missing(criteria: list[str], why: str, judge: str) -> list[Score]:
    return [Score(criterion=c, score=None, justification=why, judge=judge) for c in criteria]


# The phases ---------------------------------------------------------------------------------------
class _State:
    """What the phases share within one run."""

    def __init__(self, ctx: RunContext, cfg: P3ROConfig, task: Task) -> None:
        self.ctx, self.cfg, self.task = ctx, cfg, task
        self.goal = task.goal.strip() or DEFAULT_GOAL
        self.criteria: list[str] = []
        self.plan: str | None = None
        self.reflection: str | None = None

    def fields(self) -> dict[str, str]:
        return {"goal": self.goal, "criteria": _numbered(self.criteria)}


async def _formulate(s: _State, it: Iteration | None) -> str | None:
    """StrategyFormulator: a plan from the prompt, the criteria and (when revising) the history."""
    prompt = s.ctx.prompt(
        "strategist", STRATEGIST_PROMPT, **s.fields(), initial_prompt=_cut(s.task.prompt, 1200),
        previous_plan=_cut(s.plan, 800) if s.plan else "(none: this is the first plan)",
        history=_history([i for i in s.ctx.run.iterations if i is not it], s.cfg),
    )
    out, _ = await s.ctx.call("strategist", "plan", prompt, schema=ImprovementPlan, iteration=it,
                              token_type="strategist")
    return out.plan if out is not None else None


async def _probe(s: _State, it: Iteration) -> None:
    """PromptGenerator -> PromptEvaluator -> ReflectionSynthesizer for one iteration."""
    ctx, cfg = s.ctx, s.cfg
    judge = cfg.model_for("evaluator")
    earlier = [i for i in ctx.run.iterations if i is not it]
    latest = next((i for i in reversed(earlier) if i.candidate is not None), None)
    base_label = "the initial prompt" if latest is None else f"attempt {latest.index}, the latest"
    base = s.task.prompt if latest is None else latest.candidate or ""
    prompt = ctx.prompt(
        "generator", GENERATOR_PROMPT, **s.fields(),
        plan=_cut(s.plan, 1200) if s.plan else "(no plan: the strategist failed; follow the criteria)",
        reflection=_cut(s.reflection, 400) if s.reflection else "(none yet)",
        history=_history(earlier, cfg), base_label=base_label, base_prompt=_cut(base, 2 * cfg.history_chars),
    )
    retry = sum(i.candidate is None for i in earlier)  # the same prompt recurs after a failure: fresh draw
    gen, _ = await ctx.call("generator", "generate", prompt, schema=GeneratedPrompt, iteration=it,
                            sample_offset=retry, token_type="generator")
    if gen is None:
        ctx.score(it, _missing(s.criteria, "no candidate: the generator failed", judge))
        return
    it.candidate = gen.prompt_text
    prompt = ctx.prompt("evaluator", EVALUATOR_PROMPT, **s.fields(), prompt_text=_cut(it.candidate, 3000))
    ev, _ = await ctx.call("evaluator", "evaluate", prompt, schema=evaluation_schema(tuple(s.criteria)),
                            iteration=it, token_type="evaluator")
    if ev is None:
        ctx.score(it, _missing(s.criteria, "missing: the evaluator's reply was unusable", judge))
        it.metrics.update(criteria_scored=0, criteria_missing=len(s.criteria), unmatched_scores=0)
        return
    scores, unmatched = match_scores(s.criteria, ev, judge)
    if unmatched:
        kept = ctx.run.info.setdefault("unmatched_scores", [])
        kept.extend({"iteration": it.index, **u} for u in unmatched)
    ctx.score(it, scores, _mean(scores))
    scored = sum(x.score is not None for x in scores)
    it.metrics.update(criteria_scored=scored, criteria_missing=len(scores) - scored,
                      unmatched_scores=len(unmatched))
    prompt = ctx.prompt("reflector", REFLECTOR_PROMPT, **s.fields(), evaluation=_evaluation_text(scores, ev))
    refl, _ = await ctx.call("reflector", "reflect", prompt, schema=Reflection, iteration=it,
                             token_type="reflector")
    if refl is not None:
        it.reflection = s.reflection = refl.summary


def _best(iterations: list[Iteration]) -> Iteration | None:
    """The highest-scoring iteration with a candidate; ties go to the earliest."""
    scored = [i for i in iterations if i.average is not None and i.candidate is not None]
    return max(scored, key=lambda i: (i.average, -i.index)) if scored else None


def journey_summary(run: Run, criteria: list[str], best: Iteration | None, revisions: list[int]) -> str:
    """POLISH's account: the chosen prompt's score per criterion, the averages, the strategy revisions."""
    lines = [f"P³RO on task {run.task.id!r}: the goal was decomposed into {len(criteria)} criteria."]
    if best is None:
        lines.append("No attempt could be scored, so there is no chosen prompt.")
    else:
        lines.append(f"Chosen prompt: attempt {best.index} of {len(run.iterations)}, "
                     f"average {best.average:g}.")
        lines += [f"  {k}. {s.criterion.rstrip('.')}: "
                  + (f"{s.score:g}/10 ({_cut(s.justification, 120)})" if s.score is not None
                     else "not scored")
                  for k, s in enumerate(best.scores, start=1)]
    trail = " -> ".join(f"{i.average:g}" if i.average is not None else "missing" for i in run.iterations)
    lines.append(f"Average by attempt: {trail or '(no attempts)'}.")
    if revisions:
        before = ", ".join(map(str, revisions))
        lines.append(f"Strategy revised {len(revisions)} time(s), before attempt(s) {before}.")
    else:
        lines.append("The initial strategy was kept throughout.")
    last = run.iterations[-1] if run.iterations else None
    lines.append(f"Stopped: {run.stop_reason}" + (f" ({last.reason})." if last and last.reason else "."))
    return "\n".join(lines)


async def arun_p3ro(
    task: Task | str | dict[str, Any],
    config: P3ROConfig | dict[str, Any] | None = None,
    *,
    sample: int = 0,
    on_event: EventHandler | None = None,
    cache: CacheArg = None,
    settings: Settings | None = None,
) -> Run:
    """Run P³RO on a task and return its record.

    Args:
        task: a Task, a dict of its fields, or a bare prompt (no goal: `DEFAULT_GOAL` is used).
        config: a P3ROConfig, a dict of its fields, or None for the defaults.
        sample: replicate index (independent cached draws).
        on_event: called with each Event as the run goes.
        cache: the call cache (None: default, False: none, or a directory).
        settings: retries, structured re-asks, timeouts.

    Returns:
        The Run: `final_output` is the highest-scoring prompt (ties: earliest), `info['criteria']` the
        criteria, `summary` the journey; `stop_reason` is 'threshold', 'max_iterations' or 'error' (the
        goal could not be decomposed, so there was nothing to score against).
    """
    task, cfg = as_task(task), as_config(P3ROConfig, config)
    ctx = RunContext("p3ro", task, cfg, sample=sample, on_event=on_event, cache=cache, settings=settings)
    ctx.emit("run_started", f"p3ro on task {task.id}", task=task.id, models=ctx.run.models)
    s = _State(ctx, cfg, task)
    ctx.run.info["goal"] = s.goal
    # PLAN
    prompt = ctx.prompt("decomposer", DECOMPOSER_PROMPT, goal=s.goal, prompt=_cut(task.prompt, 1200),
                        min_criteria=cfg.min_criteria, max_criteria=cfg.max_criteria)
    decomposed, _ = await ctx.call("decomposer", "plan", prompt,
                                   schema=decomposed_schema(cfg.min_criteria, cfg.max_criteria),
                                   token_type="decomposer")
    if decomposed is None:
        ctx.run.info["criteria"] = []
        ctx.run.summary = "P³RO stopped: the goal could not be decomposed into criteria (see errors)."
        return ctx.finish("error", None)
    s.criteria = _distinct(decomposed.criteria)
    ctx.run.info["criteria"] = s.criteria
    s.plan = await _formulate(s, None)
    plans: list[dict[str, Any]] = [{"before_iteration": 1, "plan": s.plan}]
    revisions: list[int] = []
    averages: list[float | None] = []
    decision: Decision = "CONTINUE_PROBING"
    # PROBE / REFLECT & ORIENT
    while True:
        it = ctx.new_iteration()
        if decision == "REVISE_STRATEGY":
            revisions.append(it.index)
            new_plan = await _formulate(s, it)
            if new_plan is not None:
                s.plan = new_plan
            plans.append({"before_iteration": it.index, "plan": new_plan})
        it.metrics["plan_version"] = len(plans)
        await _probe(s, it)
        averages.append(it.average)
        decision, reason = decide_with_reason(averages, cfg)
        ctx.decide(it, decision, reason)
        if decision == "FINISH":
            break
    # POLISH (pure Python)
    last = averages[-1]
    stop_reason = "threshold" if last is not None and last >= cfg.finish_threshold else "max_iterations"
    best = _best(ctx.run.iterations)
    ctx.emit("phase", "polish: choosing the best prompt", phase="polish", role="polish")
    ctx.run.info.update(plans=plans, strategy_revisions=len(revisions))
    run = ctx.finish(stop_reason, best.candidate if best else None)
    run.summary = journey_summary(run, s.criteria, best, revisions)
    return run


def run_p3ro(
    task: Task | str | dict[str, Any],
    config: P3ROConfig | dict[str, Any] | None = None,
    *,
    sample: int = 0,
    on_event: EventHandler | None = None,
    cache: CacheArg = None,
    settings: Settings | None = None,
) -> Run:
    """The sync twin of `arun_p3ro` (works inside Jupyter too)."""
    return run_sync(arun_p3ro(task, config, sample=sample, on_event=on_event, cache=cache, settings=settings))


register_loop(LoopSpec("p3ro", P3ROConfig, arun_p3ro,
                       "P³RO: criteria and a strategy, then generate-evaluate-reflect until finished"))


# Role prompts (override with config.prompts[role]; fields as in each template) ----------------------
DECOMPOSER_PROMPT = """You turn a vague goal for a prompt into concrete criteria a reviewer can check.

Goal: {goal}
The prompt to improve:
{prompt}

Write {min_criteria} to {max_criteria} short criteria. Each names one quality the improved prompt must have \
(tone, audience, structure, constraints, output format, ...), worded so it can be checked: "Asks for exactly \
three bullet points", not "Is better". The criteria must not overlap.
Reply with JSON only: {{"criteria": ["...", "..."]}}"""

STRATEGIST_PROMPT = """You plan how to improve a prompt.

Goal: {goal}
Initial prompt:
{initial_prompt}
Criteria the new prompt is scored on (1-10 each):
{criteria}
Previous plan: {previous_plan}
Attempts so far, with scores and lessons:
{history}

Find the biggest gaps between the prompt and the criteria. If the attempts stopped improving, say why the \
previous plan fell short and take a different approach. Write a short numbered plan of 2-4 steps, the most \
important change first.
Reply with JSON only: {{"plan": "1. ... 2. ..."}}"""

GENERATOR_PROMPT = """You rewrite prompts: write one complete new version of the prompt below.

Goal: {goal}
Criteria it will be scored on (1-10 each):
{criteria}
Plan: {plan}
Lesson from the last evaluation (focus on this): {reflection}
Earlier attempts:
{history}

Prompt to improve ({base_label}):
{base_prompt}

Make the change that helps most, keep what already works, and write the whole prompt, not only the changed \
part. The prompt is an instruction a user gives to an AI assistant.
Reply with JSON only: {{"prompt_text": "<the full new prompt>", "reasoning": "<what you changed and why>"}}"""

EVALUATOR_PROMPT = """You are a strict reviewer of prompts. Score the prompt below on each criterion from 1 \
(fails) to 10 (fully meets it); 5 means partly met with clear gaps. Do not reward length.

Goal: {goal}
Criteria:
{criteria}

Prompt to score:
<<<
{prompt_text}
>>>

Give one entry per criterion (copy its text), each with a one-sentence justification that points at the \
prompt, then short overall feedback naming the most important thing to fix.
Reply with JSON only: {{"scores": [{{"criterion": "...", "score": 1, "justification": "..."}}], \
"qualitative_feedback": "..."}}"""

REFLECTOR_PROMPT = """You turn an evaluation into one lesson for the next rewrite of a prompt.

Goal: {goal}
Criteria:
{criteria}
Evaluation of the latest attempt:
{evaluation}

Look at the lowest scores and the feedback: what worked, what failed, and why? Write one sentence that says \
what the next version must do differently.
Reply with JSON only: {{"summary": "..."}}"""
