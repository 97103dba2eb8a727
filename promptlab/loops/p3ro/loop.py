"""P³RO (Plan, Probe, Polish, Reflect and Orient): criteria-driven prompt refinement.

More in docs/loops.md, section "promptlab.loops.p3ro.loop".
"""

from __future__ import annotations

from typing import Any

from ...record import Iteration, Run, Score, Task
from ..runtime.budget import BUDGET, last_step_cost
from ..runtime.config import goal_of
from ..runtime.context import RunContext
from ..runtime.decision import Decision
from ..runtime.define import define_loop
from ..runtime.grounding import check_prompt_loop, decision_score, finish_measures, measure, simulated_info
from ..runtime.rescoring import Rescore, define_rescore
from ..runtime.toolkit import best_iteration, by_decision_score
from .config import P3ROConfig, average_of
from .evaluate import Evaluation, evaluate
from .router import Action, route
from .schemas import GeneratedPrompt, ImprovementPlan, Reflection, decomposed_schema
from .text import distinct, evaluation_text, history_text, journey_summary, missing_scores, numbered


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
        self.feedback: dict[int, str] = {}

    def fields(self) -> dict[str, str]:
        """Fields every role's template may use (the default templates use the design document's inputs)."""
        return {"goal": self.goal, "criteria": numbered(self.criteria)}

    def history(self, iterations: list[Iteration]) -> str:
        return history_text(iterations, self.cfg, self.reasoning, self.feedback)


async def _formulate(s: _State, it: Iteration | None) -> str | None:
    """StrategyFormulator: a plan from the prompt, the criteria and (when revising) the history."""
    prompt = s.ctx.prompt(
        "strategist",
        STRATEGIST_PROMPT,
        **s.fields(),
        initial_prompt=s.task.prompt,
        previous_plan=s.plan if s.plan else "(none: this is the first plan)",
        history=s.history(rewrites(s.ctx.run.iterations, it)),
    )
    out, _ = await s.ctx.call(
        "strategist", "plan", prompt, schema=ImprovementPlan, iteration=it, token_type="strategist"
    )
    return out.plan if out is not None else None


def rewrites(iterations: list[Iteration], it: Iteration | None = None) -> list[Iteration]:
    """The iterations before `it` that are the loop's own attempts (candidate 0, the starting prompt, is not:
    the roles' prompts are the same with or without it)."""
    return [i for i in iterations if i is not it and i.index > 0]


async def _assess(s: _State, it: Iteration, candidate: str) -> Evaluation:
    """A candidate measured on dev (grounded tasks; first, since a simulated evaluator scores from it) and
    scored per criterion by the evaluator."""
    if s.task.grounded:
        it.grounded = await measure(s.ctx, s.cfg, candidate, "dev", it)
    ev = await evaluate(s.ctx, s.cfg, s.goal, s.criteria, candidate, it)
    s.ctx.score(it, ev.scores, average_of(ev.scores, s.cfg.missing_criteria, ev.reply_scores))
    scored = sum(x.score is not None for x in ev.scores)
    it.metrics.update(criteria_scored=scored, criteria_missing=len(ev.scores) - scored)
    return ev


async def _start(s: _State) -> Decision[Action]:
    """Candidate 0: the starting prompt measured and scored as iteration 0, and the router's decision on it
    (FINISH when it already reaches the threshold: then the loop stops there)."""
    it = s.ctx.new_iteration(0)
    it.candidate = s.task.prompt
    await _assess(s, it, s.task.prompt)
    it.decision_score = decision_score(it, s.cfg)
    decision = route([it.decision_score], s.cfg, start=True)
    s.ctx.decide(it, decision.action, decision.reason, incumbent=incumbent(s.ctx.run.iterations))
    return decision


def incumbent(iterations: list[Iteration]) -> int | None:
    """The iteration POLISH would return now: the best decision score so far, ties to the earliest."""
    best = best_iteration(iterations, key=by_decision_score)
    return best.index if best is not None else None


async def _probe(s: _State, it: Iteration) -> None:
    """PromptGenerator -> PromptEvaluator -> ReflectionSynthesizer for one iteration (and the dev-split
    measure of the candidate when the task has examples)."""
    ctx, cfg = s.ctx, s.cfg
    judge = cfg.model_for("evaluator")
    earlier = rewrites(ctx.run.iterations, it)
    latest = next((i for i in reversed(earlier) if i.candidate is not None), None)
    base_label = "the initial prompt" if latest is None else f"attempt {latest.index}, the latest"
    base = s.task.prompt if latest is None else latest.candidate or ""
    prompt = ctx.prompt(
        "generator",
        GENERATOR_PROMPT,
        **s.fields(),
        plan=s.plan if s.plan else "(no plan: the strategist failed)",
        reflection=s.reflection if s.reflection else "(none yet)",
        history=s.history(earlier),
        base_label=base_label,
        base_prompt=base,
    )
    retry = sum(i.candidate is None for i in earlier)  # the same prompt recurs after a failure: fresh draw
    gen, _ = await ctx.call(
        "generator",
        "generate",
        prompt,
        schema=GeneratedPrompt,
        iteration=it,
        sample_offset=retry,
        token_type="generator",
    )
    if gen is None:
        ctx.score(it, missing_scores(s.criteria, "no candidate: the generator failed", judge))
        return
    it.candidate = gen.prompt_text
    if gen.reasoning.strip():
        s.reasoning[it.index] = gen.reasoning.strip()
    ev = await _assess(s, it, it.candidate)
    if not ev.usable:  # nothing to reflect on (the fallback evaluation, with parse_failure_score, is reflected on)
        return
    s.feedback[it.index] = ev.feedback or ""
    prompt = ctx.prompt(
        "reflector",
        REFLECTOR_PROMPT,
        **s.fields(),
        evaluation=evaluation_text(ev.scores, ev.feedback, cfg.history_chars),
    )
    refl, _ = await ctx.call("reflector", "reflect", prompt, schema=Reflection, iteration=it, token_type="reflector")
    if refl is not None:
        it.reflection = s.reflection = refl.summary


@define_rescore("p3ro", P3ROConfig)
async def rescore_p3ro(r: Rescore[P3ROConfig]) -> list[Score]:
    """Re-ask the run's evaluator about a logged candidate with the loop's prompt, criteria and schema (the
    hook's arguments: `promptlab.loops.runtime.rescoring.define_rescore`)."""
    criteria = list(r.run.info.get("criteria") or [])
    return (await evaluate(r.ctx, r.config, r.goal, criteria, r.candidate, r.iteration)).scores


@define_loop(
    "p3ro",
    P3ROConfig,
    "P³RO: criteria and a strategy, then generate-evaluate-reflect until finished",
    check=lambda task, cfg: check_prompt_loop(task, cfg, [cfg.model_for("evaluator")]),
    rank_by=by_decision_score,
    rescore=rescore_p3ro,
)
async def arun_p3ro(ctx: RunContext, task: Task, cfg: P3ROConfig) -> Run:
    """Run P³RO on a task (a bare prompt has no goal: `DEFAULT_GOAL` is used) and return its record.

    Returns:
        The Run: `final_output` is the highest-scoring prompt by decision score (ties: earliest),
        `info['final_iteration']` its iteration, `info['criteria']` the criteria, `summary` the journey;
        `stop_reason` is 'threshold', 'max_iterations', 'budget' or 'error' (the goal could not be decomposed,
        so there was nothing to score against). With examples: `Iteration.grounded` (dev),
        `Run.baseline_test`, `Run.final_test`, `Run.delta`.

    Raises:
        ConfigError: bad config or task (e.g. score_source 'grounded' without examples), before any call.
    """
    if task.grounded:
        ctx.run.models["target"] = cfg.target()
    ctx.emit("run_started", f"p3ro on task {task.id}", task=task.id, models=ctx.run.models)
    s = _State(ctx, cfg, task)
    ctx.run.info.update(
        goal=s.goal,
        final="best",
        score_source=cfg.score_source,
        score_mode=cfg.score_mode,
        parse_failure_score=cfg.parse_failure_score,
        missing_criteria=cfg.missing_criteria,
    )
    if not await _plan_criteria(s):
        ctx.run.summary = "P³RO stopped: the goal could not be decomposed into criteria (see errors)."
        return ctx.finish("error", None)
    stop_reason, budget, plans, revisions = await _probe_and_orient(s)
    return await _polish(s, stop_reason, budget, plans, revisions)


async def _plan_criteria(s: _State) -> bool:
    """PLAN: the goal decomposed into criteria (recorded in the run's info); False when the decomposer failed."""
    ctx, cfg, task = s.ctx, s.cfg, s.task
    prompt = ctx.prompt(
        "decomposer",
        DECOMPOSER_PROMPT,
        goal=s.goal,
        prompt=task.prompt,
        min_criteria=cfg.min_criteria,
        max_criteria=cfg.max_criteria,
    )
    decomposed, _ = await ctx.call(
        "decomposer",
        "plan",
        prompt,
        token_type="decomposer",
        schema=decomposed_schema(cfg.min_criteria, cfg.max_criteria, cfg.strict_criteria, cfg.criteria_as_written),
    )
    if decomposed is None:
        ctx.run.info["criteria"] = []
        return False
    s.criteria = list(decomposed.criteria) if cfg.criteria_as_written else distinct(decomposed.criteria)
    ctx.run.info["criteria"] = s.criteria
    return True


async def _probe_and_orient(s: _State) -> tuple[str, str | None, list[dict[str, Any]], list[int]]:
    """PROBE / REFLECT & ORIENT until the router stops: (stop reason, the budget's reason if it stopped the run,
    the strategies in order, the iterations that revised the strategy). The router sees the rewrites; candidate 0
    only ends the loop at the threshold."""
    ctx, cfg, task = s.ctx, s.cfg, s.task
    start = cfg.starts_with_start(task)
    ctx.run.info.update(include_start=start, simulated_critics=simulated_info([cfg.model_for("evaluator")]))
    plans: list[dict[str, Any]] = []
    revisions: list[int] = []
    decisions: list[float | None] = []
    budget = ctx.budget_stop(*last_step_cost(ctx)) if start else None
    decision = await _start(s) if start and not budget else None
    stop_reason = BUDGET if budget else decision.stop_reason if decision else None
    if stop_reason is None:
        s.plan = await _formulate(s, None)
        plans.append({"before_iteration": 1, "plan": s.plan})
    while stop_reason is None:
        budget = ctx.budget_stop(*last_step_cost(ctx))
        if budget:
            return BUDGET, budget, plans, revisions
        it = ctx.new_iteration()
        if decision is not None and decision.action == "REVISE_STRATEGY":
            revisions.append(it.index)
            new_plan = await _formulate(s, it)
            if new_plan is not None:
                s.plan = new_plan
            plans.append({"before_iteration": it.index, "plan": new_plan})
        it.metrics["plan_version"] = len(plans)
        await _probe(s, it)
        it.decision_score = decision_score(it, cfg)
        decisions.append(it.decision_score)
        decision = route(decisions, cfg)
        ctx.decide(it, decision.action, decision.reason, incumbent=incumbent(ctx.run.iterations))
        stop_reason = decision.stop_reason
    return stop_reason, budget, plans, revisions


async def _polish(
    s: _State, stop_reason: str, budget: str | None, plans: list[dict[str, Any]], revisions: list[int]
) -> Run:
    """POLISH (pure Python): the best prompt by decision score, its test measurement and the journey summary."""
    ctx = s.ctx
    if budget:
        ctx.run.info["budget_stop"] = budget
    best = best_iteration(ctx.run.iterations, key=by_decision_score)
    ctx.emit("phase", "polish: choosing the best prompt", phase="polish", role="polish")
    ctx.run.info.update(
        plans=plans,
        strategy_revisions=len(revisions),
        reasoning={str(k): v for k, v in s.reasoning.items()},
        feedback={str(k): v for k, v in s.feedback.items()},
        final_iteration=best.index if best else None,
    )
    await finish_measures(ctx, s.cfg, best.candidate if best else None)
    run = ctx.finish(stop_reason, best.candidate if best else None)
    run.summary = journey_summary(run, s.criteria, best, revisions)
    return run


run_p3ro = arun_p3ro.sync


# Role prompts (override with config.prompts[role]; fields as in each template) ----------------------
DECOMPOSER_PROMPT = """You turn a vague goal for a prompt into concrete criteria a reviewer can check.

Goal: {goal}

Write {min_criteria} to {max_criteria} short criteria. Each names one quality the improved prompt must have \
(tone, audience, structure, constraints, output format, ...), worded so a reviewer can check it. The \
criteria must not overlap. A reply for the goal "clearer and more useful" could be:
{{"criteria": ["States the task in the first sentence", "Says who the answer is for", \
"Says how long the answer should be", "Says what form the answer takes"]}}

Reply with JSON only, in that form, with criteria for the goal above."""

STRATEGIST_PROMPT = """You plan how to improve a prompt.

Initial prompt:
{initial_prompt}
Criteria the new prompt is scored on (1-10 each):
{criteria}
Attempts so far, with their evaluations and lessons (the last one matters most):
{history}

Find the biggest gaps between the prompt and the criteria. If there were attempts, say why they fell short \
and take a different approach. Write a short numbered plan of 2-4 steps, the most important change first.
Reply with JSON only: {{"plan": "1. ... 2. ..."}}"""

GENERATOR_PROMPT = """You rewrite prompts: write one complete new version of the prompt below.

Plan: {plan}
Lesson from the last evaluation (focus on this): {reflection}
Earlier attempts and their evaluations:
{history}

Prompt to improve ({base_label}):
{base_prompt}

Make the change that helps most, keep what already works, and write the whole prompt, not only the changed \
part. The prompt is an instruction a user gives to an AI assistant.
Reply with JSON only: {{"prompt_text": "<the full new prompt>", "reasoning": "<what you changed and why>"}}"""

REFLECTOR_PROMPT = """You turn an evaluation into one lesson for the next rewrite of a prompt.

Evaluation of the latest attempt:
{evaluation}

Look at the lowest scores and the feedback: what worked, what failed, and why? Write one sentence that says \
what the next version must do differently.
Reply with JSON only: {{"summary": "..."}}"""

__all__ = [
    "DECOMPOSER_PROMPT",
    "GENERATOR_PROMPT",
    "REFLECTOR_PROMPT",
    "STRATEGIST_PROMPT",
    "arun_p3ro",
    "rescore_p3ro",
    "run_p3ro",
]
