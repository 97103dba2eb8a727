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
from ..errors import ConfigError
from ..events import EventHandler
from ..expected import expected_scores
from ..record import Iteration, Run, Score, Task
from ._base import (
    DEFAULT_GOAL,
    LoopSpec,
    RunContext,
    as_config,
    as_task,
    best_iteration,
    cut,
    goal_of,
    mean_present,
    register_loop,
    sync_twin,
)
from ._grounding import PromptLoopConfig, check_prompt_loop, decision_score, measure, measure_test
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
MissingCriteria = Literal["missing", "mean_present"]


class P3ROConfig(PromptLoopConfig):
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
    history_window: int | None = Field(None, ge=0, le=100)
    """Past attempts shown to the strategist and the generator (None: all, as the design document)."""
    history_chars: int | None = Field(None, ge=50, le=20000)
    """Each past prompt text is cut to this many characters in role prompts (None: never cut)."""
    missing_criteria: MissingCriteria = "missing"
    """An iteration's average when a criterion is unscored: 'missing' (None: no FINISH on partial evidence)
    or 'mean_present' (the mean of the scored criteria)."""

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


def average_of(scores: list[Score], policy: MissingCriteria) -> float | None:
    """The iteration's average: the unrounded mean, None when no score is present or (policy 'missing')
    when any criterion is unscored."""
    if policy == "missing" and any(s.score is None for s in scores):
        return None
    return mean_present(s.score for s in scores)


def _score_line(it: Iteration) -> str:
    parts = [f"{cut(s.criterion, 40)}: " + (f"{s.score:g}" if s.score is not None else "-")
             for s in it.scores]
    avg = f"average {it.average:g}" if it.average is not None else "no score"
    return f"{avg}; " + "; ".join(parts) if parts else avg


def _history(iterations: list[Iteration], config: P3ROConfig, reasoning: dict[int, str]) -> str:
    tried = [it for it in iterations if it.candidate is not None]
    if config.history_window is not None:
        tried = tried[len(tried) - config.history_window:] if config.history_window else []
    if not tried:
        return "(no attempts yet)"
    blocks = [f"Attempt {it.index} ({_score_line(it)}):\n{cut(it.candidate or '', config.history_chars)}"
              + (f"\nReasoning: {cut(reasoning[it.index], config.history_chars)}" if reasoning.get(it.index) else "")
              + (f"\nLesson: {it.reflection}" if it.reflection else "") for it in tried]
    return "\n\n".join(blocks)


def _evaluation_text(scores: list[Score], result: EvaluationResult) -> str:
    lines = [f"- {cut(s.criterion, 80)}: "
             + (f"{s.score:g}/10. {cut(s.justification, 200)}" if s.score is not None else "not scored")
             for s in scores]
    return "\n".join(lines) + f"\nOverall feedback: {cut(result.qualitative_feedback, 500) or '(none)'}"


def _missing(criteria: list[str], why: str, judge: str) -> list[Score]:
    return [Score(criterion=c, score=None, justification=why, judge=judge) for c in criteria]


# The phases ---------------------------------------------------------------------------------------
class _State:
    """What the phases share within one run."""

    def __init__(self, ctx: RunContext, cfg: P3ROConfig, task: Task) -> None:
        self.ctx, self.cfg, self.task = ctx, cfg, task
        self.goal = goal_of(task)
        self.criteria: list[str] = []
        self.plan: str | None = None
        self.reflection: str | None = None
        self.reasoning: dict[int, str] = {}

    def fields(self) -> dict[str, str]:
        return {"goal": self.goal, "criteria": _numbered(self.criteria)}


async def _formulate(s: _State, it: Iteration | None) -> str | None:
    """StrategyFormulator: a plan from the prompt, the criteria and (when revising) the history."""
    prompt = s.ctx.prompt(
        "strategist", STRATEGIST_PROMPT, **s.fields(), initial_prompt=s.task.prompt,
        previous_plan=s.plan if s.plan else "(none: this is the first plan)",
        history=_history([i for i in s.ctx.run.iterations if i is not it], s.cfg, s.reasoning),
    )
    out, _ = await s.ctx.call("strategist", "plan", prompt, schema=ImprovementPlan, iteration=it,
                              token_type="strategist")
    return out.plan if out is not None else None


async def evaluate(ctx: RunContext, cfg: P3ROConfig, goal: str, criteria: list[str], candidate: str,
                   it: Iteration) -> tuple[list[Score], EvaluationResult | None]:
    """PromptEvaluator: one Score per criterion (sampled or expected), unmatched entries kept in
    `Run.info['unmatched_scores']`; an unusable reply gives missing scores (or `parse_failure_score`)."""
    judge = cfg.model_for("evaluator")
    prompt = ctx.prompt("evaluator", EVALUATOR_PROMPT, goal=goal, criteria=_numbered(criteria),
                        prompt_text=candidate)
    expected = cfg.score_mode == "expected"
    c, step = await ctx.completion("evaluator", "evaluate", prompt, schema=evaluation_schema(tuple(criteria)),
                                   iteration=it, token_type="evaluator", logprobs=expected)
    ev = c.parsed if c is not None else None
    if c is None or ev is None:
        fallback = cfg.parse_failure_score
        if fallback is None:
            return _missing(criteria, "missing: the evaluator's reply was unusable", judge), None
        why = f"the evaluator's reply was unusable: parse_failure_score {fallback:g} used"
        return [Score(criterion=k, score=fallback, justification=why, judge=judge, mode="fallback")
                for k in criteria], None
    if expected:
        found = expected_scores(c.text, c.logprobs, field="score")
        values = [f.expected for f in found] if len(found) == len(ev.scores) else [None] * len(ev.scores)
        entries = [e.model_copy(update={"score": v}) for e, v in zip(ev.scores, values, strict=True)]
        ev = ev.model_copy(update={"scores": entries})
    scores, unmatched = match_scores(criteria, ev, judge, "expected" if expected else "sampled")
    if unmatched:
        kept = ctx.run.info.setdefault("unmatched_scores", [])
        kept.extend({"iteration": it.index, **u} for u in unmatched)
    it.metrics["unmatched_scores"] = len(unmatched)
    return scores, ev


async def _probe(s: _State, it: Iteration) -> None:
    """PromptGenerator -> PromptEvaluator -> ReflectionSynthesizer for one iteration (and the dev-split
    measure of the candidate when the task has examples)."""
    ctx, cfg = s.ctx, s.cfg
    judge = cfg.model_for("evaluator")
    earlier = [i for i in ctx.run.iterations if i is not it]
    latest = next((i for i in reversed(earlier) if i.candidate is not None), None)
    base_label = "the initial prompt" if latest is None else f"attempt {latest.index}, the latest"
    base = s.task.prompt if latest is None else latest.candidate or ""
    prompt = ctx.prompt(
        "generator", GENERATOR_PROMPT, **s.fields(),
        plan=s.plan if s.plan else "(no plan: the strategist failed; follow the criteria)",
        reflection=s.reflection if s.reflection else "(none yet)",
        history=_history(earlier, cfg, s.reasoning), base_label=base_label, base_prompt=base,
    )
    retry = sum(i.candidate is None for i in earlier)  # the same prompt recurs after a failure: fresh draw
    gen, _ = await ctx.call("generator", "generate", prompt, schema=GeneratedPrompt, iteration=it,
                            sample_offset=retry, token_type="generator")
    if gen is None:
        ctx.score(it, _missing(s.criteria, "no candidate: the generator failed", judge))
        return
    it.candidate = gen.prompt_text
    if gen.reasoning.strip():
        s.reasoning[it.index] = gen.reasoning.strip()
    scores, ev = await evaluate(ctx, cfg, s.goal, s.criteria, it.candidate, it)
    ctx.score(it, scores, average_of(scores, cfg.missing_criteria))
    scored = sum(x.score is not None for x in scores)
    it.metrics.update(criteria_scored=scored, criteria_missing=len(scores) - scored)
    if s.task.grounded:
        it.grounded = await measure(ctx, cfg, it.candidate, "dev", it)
    if ev is None:
        return
    prompt = ctx.prompt("reflector", REFLECTOR_PROMPT, **s.fields(), evaluation=_evaluation_text(scores, ev))
    refl, _ = await ctx.call("reflector", "reflect", prompt, schema=Reflection, iteration=it,
                             token_type="reflector")
    if refl is not None:
        it.reflection = s.reflection = refl.summary


def journey_summary(run: Run, criteria: list[str], best: Iteration | None, revisions: list[int]) -> str:
    """POLISH's account: the chosen prompt's score per criterion, the averages, the strategy revisions."""
    lines = [f"P³RO on task {run.task.id!r}: the goal was decomposed into {len(criteria)} criteria."]
    if best is None:
        lines.append("No attempt could be scored, so there is no chosen prompt.")
    else:
        lines.append(f"Chosen prompt: attempt {best.index} of {len(run.iterations)}, "
                     f"average {best.average:g}.")
        lines += [f"  {k}. {s.criterion.rstrip('.')}: "
                  + (f"{s.score:g}/10 ({cut(s.justification, 120)})" if s.score is not None
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
    provenance: dict[str, Any] | None = None,
) -> Run:
    """Run P³RO on a task and return its record.

    Args:
        task: a Task, a dict of its fields, or a bare prompt (no goal: `DEFAULT_GOAL` is used).
        config: a P3ROConfig, a dict of its fields, or None for the defaults.
        sample: replicate index (independent cached draws).
        on_event: called with each Event as the run goes.
        cache: the call cache (None: default, False: none, or a directory).
        settings: retries, structured re-asks, timeouts.
        provenance: extra entries for `Run.provenance` (the sweep's `experiment_hash`).

    Returns:
        The Run: `final_output` is the highest-scoring prompt by decision score (ties: earliest),
        `info['final_iteration']` its iteration, `info['criteria']` the criteria, `summary` the journey;
        `stop_reason` is 'threshold', 'max_iterations' or 'error' (the goal could not be decomposed, so
        there was nothing to score against). With examples: `Iteration.grounded` (dev),
        `Run.baseline_test`, `Run.final_test`, `Run.delta`.

    Raises:
        ConfigError: bad config or task (e.g. score_source 'grounded' without examples), before any call.
    """
    task, cfg = as_task(task), as_config(P3ROConfig, config)
    extra = check_prompt_loop(task, cfg, [cfg.model_for("evaluator")])
    ctx = RunContext("p3ro", task, cfg, sample=sample, on_event=on_event, cache=cache, settings=settings,
                     provenance=provenance, models=extra)
    if task.grounded:
        ctx.run.models["target"] = cfg.target()
    ctx.emit("run_started", f"p3ro on task {task.id}", task=task.id, models=ctx.run.models)
    s = _State(ctx, cfg, task)
    ctx.run.info.update(goal=s.goal, final="best", score_source=cfg.score_source, score_mode=cfg.score_mode,
                        parse_failure_score=cfg.parse_failure_score, missing_criteria=cfg.missing_criteria)
    # PLAN
    prompt = ctx.prompt("decomposer", DECOMPOSER_PROMPT, goal=s.goal, prompt=task.prompt,
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
    decisions: list[float | None] = []
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
        it.decision_score = decision_score(it, cfg)
        decisions.append(it.decision_score)
        decision, reason = decide_with_reason(decisions, cfg)
        ctx.decide(it, decision, reason)
        if decision == "FINISH":
            break
    # POLISH (pure Python)
    last = decisions[-1]
    stop_reason = "threshold" if last is not None and last >= cfg.finish_threshold else "max_iterations"
    best = best_iteration(ctx.run.iterations, key=lambda i: i.decision_score)
    ctx.emit("phase", "polish: choosing the best prompt", phase="polish", role="polish")
    ctx.run.info.update(plans=plans, strategy_revisions=len(revisions),
                        reasoning={str(k): v for k, v in s.reasoning.items()},
                        final_iteration=best.index if best else None)
    if task.grounded:
        await measure_test(ctx, cfg, best.candidate if best else None)
    run = ctx.finish(stop_reason, best.candidate if best else None)
    run.summary = journey_summary(run, s.criteria, best, revisions)
    return run


async def rescore_p3ro(run: Run, iteration: int, *, sample: int, cache: CacheArg = None,
                       settings: Settings | None = None) -> list[Score]:
    """Re-ask the run's evaluator about iteration `iteration`'s candidate with the loop's prompt, criteria and
    schema, at sample index `sample` (cached). Raises ConfigError for an iteration without a candidate."""
    cfg = P3ROConfig.model_validate(run.config)
    it = next((i for i in run.iterations if i.index == iteration), None)
    if it is None or it.candidate is None:
        raise ConfigError(f"iteration: run {run.run_id} has no candidate at iteration {iteration}")
    ctx = RunContext("p3ro", run.task, cfg, sample=sample, cache=cache, settings=settings)
    scratch = ctx.new_iteration()
    scores, _ = await evaluate(ctx, cfg, str(run.info.get("goal") or goal_of(run.task)),
                               list(run.info.get("criteria") or []), it.candidate, scratch)
    return scores


run_p3ro = sync_twin(arun_p3ro)

register_loop(LoopSpec("p3ro", P3ROConfig, arun_p3ro,
                       "P³RO: criteria and a strategy, then generate-evaluate-reflect until finished",
                       rescore=rescore_p3ro))


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

__all__ = ["DECOMPOSER_PROMPT", "DEFAULT_GOAL", "EVALUATOR_PROMPT", "GENERATOR_PROMPT", "P3ROConfig", "REFLECTOR_PROMPT",
           "STRATEGIST_PROMPT", "arun_p3ro", "average_of", "decide", "decide_with_reason", "evaluate",
           "journey_summary", "rescore_p3ro", "run_p3ro"]
