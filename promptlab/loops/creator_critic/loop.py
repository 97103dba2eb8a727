"""Creator / Critic: a creator rewrites the prompt, one or more critics score it, repeat.

Each iteration the creator writes an improved prompt (`promptlab.loops.creator_critic.creator`): by default
from the original prompt, the goal, the latest version and every critic's latest critique (score, strengths,
weaknesses, suggestions); with `role_inputs="seed"` from the original prompt and the previous critique only,
as the design document. Every critic returns a `Critique` (score 1-10, strengths, weaknesses, suggestions) on
the whole prompt (and the goal, unless `role_inputs="seed"`). Each critic's score is kept as its own `Score`
(criterion 'overall', judge 'critic[k]'); the iteration's average is the configured aggregate (mean, median
or min) of the PRESENT critic scores, unrounded. A critic whose reply cannot be parsed gives a missing score
with the error recorded (or, with `parse_failure_score`, the design document's fallback: that score after
one call, and a critique whose weakness is "Critic returned invalid JSON", which the creator sees). The loop
stops early once the decision score has reached `finish_threshold` for `patience` consecutive iterations,
else at `max_iterations`. The result is the last prompt the creator wrote, as in the design document
(`final="best"`: the best-scoring prompt, ties to the earliest). With labelled examples, candidates are also
measured on data, and the starting prompt is candidate 0 (iteration 0, `include_start`): scored like a
rewrite, it may stop the run or be returned, and changes no rewrite (see `promptlab.loops.runtime.grounding`).
A simulated critic (`sim/...`) scores from the dev accuracy without a call. Calls stream with `token_type` =
the role.
"""

from __future__ import annotations

import asyncio

from ...critics.simulated import simulated_critic
from ...eval.expected import expected_scores
from ...record import Iteration, Run, Score, Step, Task
from ..runtime.budget import BUDGET, last_step_cost
from ..runtime.config import goal_of
from ..runtime.context import RunContext
from ..runtime.define import define_loop
from ..runtime.grounding import (
    check_prompt_loop,
    decision_score,
    finish_measures,
    measure,
    simulated_info,
    simulated_score,
    simulated_step,
)
from ..runtime.missing import record_missing
from ..runtime.rescoring import Rescore, define_rescore
from ..runtime.role_call import RoleCall
from ..runtime.toolkit import best_iteration, by_decision_score, cut
from .config import CreatorCriticConfig, Critique, aggregate, critique_schema, judged_score
from .creator import clean_prompt_text, creator_prompt, critique_summary, fallback_critique
from .router import route


# The loop -----------------------------------------------------------------------------------------
async def _one_critic(
    ctx: RunContext,
    cfg: CreatorCriticConfig,
    it: Iteration,
    prompt: str,
    k: int,
    judge: str,
    model: str,
    candidate: str,
) -> tuple[Critique | None, Score, Step]:
    """One critic's call and its Score (sampled or expected; missing or the fallback when unreadable); a
    simulated critic scores from the candidate's dev accuracy without a call and gives no words."""
    if simulated_critic(model) is not None:
        score = simulated_score(model, it, candidate, sample=ctx.run.sample + k, criterion="overall", judge=judge)
        crit = Critique(score=score.score) if score.score is not None else None
        return crit, score, simulated_step(it, "critique", judge, model, [score])
    expected = cfg.score_mode == "expected"
    fallback = cfg.parse_failure_score
    c, step = await ctx.ask(
        RoleCall(
            "critic",
            "critique",
            prompt,
            schema=critique_schema(cfg),
            iteration=it,
            sample_offset=k,
            model=model,
            judge=judge,
            token_type="critic",
            place=False,
            logprobs=expected,
            parse_attempts=None if fallback is None else 1,
        )
    )  # the seed makes one call
    crit = c.parsed if c is not None else None
    if not isinstance(crit, Critique):
        if fallback is None:
            return (
                None,
                Score(
                    criterion="overall",
                    score=None,
                    judge=judge,
                    justification="missing: the critic's reply was unusable",
                ),
                step,
            )
        why = f"the critic's reply was unusable: parse_failure_score {fallback:g} used"
        raw = step.error.raw if step.error is not None else None
        return (
            fallback_critique(fallback, raw),
            Score(criterion="overall", score=fallback, judge=judge, justification=why, mode="fallback"),
            step,
        )
    value, note = crit.score, critique_summary(crit)
    if expected:
        assert c is not None
        found = expected_scores(c.text, c.logprobs, field="score")
        value = found[0].expected if found else None
        if value is None:
            note = f"missing: no expected score ({found[0].reason if found else 'no score field'}); " + note
    value, ruling, lost = judged_score(value, None if expected else crit.score_problem, cfg.out_of_range_score)
    if ruling:  # the words are kept either way (the creator sees them)
        note = f"{ruling}; {note}"
    if lost:
        ctx.fail(step, ValueError(f"{judge}: {ruling}"), raw=c.text if c else None)
    score = Score(
        criterion="overall", score=value, judge=judge, justification=note, mode="expected" if expected else "sampled"
    )
    record_missing(ctx, step, [score], f"critic {judge}")
    return crit, score, step


async def _assess(
    ctx: RunContext, cfg: CreatorCriticConfig, it: Iteration, goal: str, candidate: str
) -> list[tuple[str, Critique | None, Score]]:
    """A candidate measured on dev (grounded tasks; first, since a simulated critic scores from it) and by
    every critic; the critics' suggestions become the iteration's reflection."""
    if ctx.run.task.grounded:
        it.grounded = await measure(ctx, cfg, candidate, "dev", it)
    results = await critique_all(ctx, cfg, it, goal, candidate)
    tips = [t for _, c, _ in results if c for t in c.suggestions if t]
    it.reflection = cut("; ".join(tips), 600) if tips else None
    return results


async def _rewrite(
    ctx: RunContext,
    cfg: CreatorCriticConfig,
    it: Iteration,
    goal: str,
    current: str,
    latest: list[tuple[str, Critique | None]],
) -> tuple[list[Score], list[tuple[str, Critique | None]]]:
    """The creator's rewrite of `current` from the latest critiques, then its assessment: (scores, critiques)."""
    task = ctx.run.task
    prompt = creator_prompt(ctx, cfg, task, goal, current, latest)
    # after an iteration without a candidate the same prompt recurs: ask for a fresh draw
    retry = sum(i.candidate is None for i in ctx.run.iterations if i is not it)
    text, step = await ctx.call("creator", "create", prompt, iteration=it, sample_offset=retry, token_type="creator")
    candidate = (clean_prompt_text(text) if cfg.clean_creator_reply else text) if text is not None else None
    if text is not None and not candidate and cfg.clean_creator_reply:
        ctx.fail(step, ValueError("the creator's reply holds no prompt text"), raw=text)
        candidate = None  # with clean_creator_reply=False an empty reply is the candidate, as the seed stores it
    if candidate is None:
        return [
            Score(criterion="overall", score=None, judge=judge, justification="no candidate: the creator failed")
            for judge, _ in cfg.critics()
        ], latest
    it.candidate = candidate
    results = await _assess(ctx, cfg, it, goal, candidate)
    return [sc for _, _, sc in results], [(judge, crit) for judge, crit, _ in results]


async def critique_all(
    ctx: RunContext, cfg: CreatorCriticConfig, it: Iteration, goal: str, candidate: str
) -> list[tuple[str, Critique | None, Score]]:
    """Every critic on the candidate, concurrently; steps and errors are then put in critic order so a
    replay records the same run whatever order the calls finished in."""
    template = CRITIC_SEED_PROMPT if cfg.role_inputs == "seed" else CRITIC_PROMPT
    prompt = ctx.prompt("critic", template, goal=goal, prompt=cfg.shown_to_critic(candidate))
    critics = cfg.critics()
    n_errors = len(ctx.run.errors)
    replies = await asyncio.gather(
        *[_one_critic(ctx, cfg, it, prompt, k, judge, model, candidate) for k, (judge, model) in enumerate(critics)]
    )
    for _, _, step in replies:
        ctx.place(step, it)
    order = {judge: k for k, (judge, _) in enumerate(critics)}
    ctx.run.errors[n_errors:] = sorted(ctx.run.errors[n_errors:], key=lambda e: order.get(e.role, len(order)))
    return [(judge, crit, score) for (judge, _), (crit, score, _) in zip(critics, replies, strict=True)]


def returned(iterations: list[Iteration], cfg: CreatorCriticConfig) -> Iteration | None:
    """The iteration the run returns (would return if it stopped now): the last prompt written (`final="last"`)
    or the best decision score, ties to the earliest (`final="best"`)."""
    with_candidate = [i for i in iterations if i.candidate is not None]
    if cfg.final == "last":
        return with_candidate[-1] if with_candidate else None
    return best_iteration(with_candidate, key=by_decision_score)


def _summary(run: Run, cfg: CreatorCriticConfig, chosen: Iteration | None) -> str:
    trail = " -> ".join(f"{i.decision_score:g}" if i.decision_score is not None else "missing" for i in run.iterations)
    lines = [
        (
            f"Creator/Critic on task {run.task.id!r}: {len(run.iterations)} iteration(s), "
            f"{len(cfg.critics())} critic(s), aggregate {cfg.aggregate}, decisions by {cfg.score_source}."
        ),
        f"Decision score by iteration: {trail}.",
    ]
    start = " (the starting prompt, candidate 0)" if chosen is not None and chosen.index == 0 else ""
    lines.append(
        f"Output ({cfg.final}): the prompt of iteration {chosen.index}{start}."
        if chosen
        else "No iteration gave a prompt to return."
    )
    last = run.iterations[-1] if run.iterations else None
    lines.append(f"Stopped: {run.stop_reason}" + (f" ({last.reason})." if last and last.reason else "."))
    return "\n".join(lines)


@define_rescore("creator_critic", CreatorCriticConfig, models=lambda cfg: [m for _, m in cfg.critics()])
async def rescore_creator_critic(r: Rescore[CreatorCriticConfig]) -> list[Score]:
    """Re-ask the run's critics about a logged candidate with the loop's prompt and schema, each at the re-score's
    sample plus its index (the hook's arguments: `promptlab.loops.runtime.rescoring.define_rescore`)."""
    results = await critique_all(r.ctx, r.config, r.iteration, r.goal, r.candidate)
    return [sc for _, _, sc in results]


def _check(task: Task, cfg: CreatorCriticConfig) -> list[str]:
    """The critics' models and what `check_prompt_loop` adds (the target, a judge scorer's model)."""
    critics = [m for _, m in cfg.critics()]
    return [*critics, *check_prompt_loop(task, cfg, critics)]


@define_loop(
    "creator_critic",
    CreatorCriticConfig,
    "Creator rewrites, one or more critics score 1-10; early stop with patience",
    check=_check,
    rank_by=by_decision_score,
    rescore=rescore_creator_critic,
)
async def arun_creator_critic(ctx: RunContext, task: Task, cfg: CreatorCriticConfig) -> Run:
    """Run Creator/Critic on a task (a bare prompt has no goal: `DEFAULT_GOAL` is used) and return its record.

    Returns:
        The Run: `final_output` is the last prompt written (`final="best"`: the best-scoring one),
        `info['final_iteration']` its iteration, `stop_reason` 'threshold', 'max_iterations' or 'budget';
        `info['critics']` names the critics and `info['per_critic']` holds each critic's score by iteration.
        With examples: `Iteration.grounded` (dev), `Run.baseline_test`, `Run.final_test`, `Run.delta`.

    Raises:
        ConfigError: bad config or task (e.g. score_source 'grounded' without examples), before any call.
    """
    critics = cfg.critics()
    ctx.run.models.update({judge: model for judge, model in critics})
    ctx.run.models["critic"] = ", ".join(dict.fromkeys(model for _, model in critics))
    if task.grounded:
        ctx.run.models["target"] = cfg.target()
    ctx.emit("run_started", f"creator_critic on task {task.id}", task=task.id, models=ctx.run.models)
    goal = goal_of(task)
    ctx.run.info.update(
        goal=goal,
        aggregate=cfg.aggregate,
        final=cfg.final,
        score_source=cfg.score_source,
        score_mode=cfg.score_mode,
        parse_failure_score=cfg.parse_failure_score,
        critics=[{"judge": judge, "model": model, "sample_offset": k} for k, (judge, model) in enumerate(critics)],
    )
    per_critic: dict[str, list[float | None]] = {judge: [] for judge, _ in critics}
    current, latest = task.prompt, list[tuple[str, Critique | None]]()
    decisions: list[float | None] = []
    start = cfg.starts_with_start(task)
    ctx.run.info.update(include_start=start, simulated_critics=simulated_info([m for _, m in critics]))
    budget: str | None = None
    stop_reason: str | None = None
    while stop_reason is None:
        budget = ctx.budget_stop(*last_step_cost(ctx))
        if budget:
            stop_reason = BUDGET
            break
        it = ctx.new_iteration(0 if start and not ctx.run.iterations else None)
        if it.index == 0:  # candidate 0: the starting prompt, scored like a rewrite (generation is unchanged)
            it.candidate = task.prompt
            scores = [sc for _, _, sc in await _assess(ctx, cfg, it, goal, task.prompt)]
        else:
            scores, critiques = await _rewrite(ctx, cfg, it, goal, current, latest)
            if it.candidate is not None:
                current, latest = it.candidate, critiques
        for sc in scores:
            per_critic[sc.judge or ""].append(sc.score)
        ctx.score(it, scores, aggregate([sc.score for sc in scores], cfg.aggregate))
        it.metrics.update(
            critics_scored=sum(sc.score is not None for sc in scores),
            critics_missing=sum(sc.score is None for sc in scores),
        )
        it.decision_score = decision_score(it, cfg)
        decisions.append(it.decision_score)
        decision = route(decisions, cfg, start=start)
        chosen = returned(ctx.run.iterations, cfg)
        ctx.decide(it, decision.action, decision.reason, incumbent=chosen.index if chosen else None)
        stop_reason = decision.stop_reason
    chosen = returned(ctx.run.iterations, cfg)
    ctx.run.info.update(per_critic=per_critic, final_iteration=chosen.index if chosen else None)
    if budget:
        ctx.run.info["budget_stop"] = budget
    await finish_measures(ctx, cfg, chosen.candidate if chosen else None)
    run = ctx.finish(stop_reason, chosen.candidate if chosen else None)
    run.summary = _summary(run, cfg, chosen)
    return run


run_creator_critic = arun_creator_critic.sync


# Role prompts (override with config.prompts[role]; fields as in each template) ----------------------
CRITIC_PROMPT = """You are a demanding critic of prompts written for AI assistants.

Goal the prompt should meet: {goal}
Prompt to judge:
<<<
{prompt}
>>>

Judge how clear, specific and complete the prompt is for that goal. Score it from 1 (useless) to 10 \
(nothing to improve); keep 9-10 for prompts with no real weakness. Give up to three short strengths, \
weaknesses and concrete suggestions.
Reply with JSON only: an object with "score" (an integer from 1 to 10) and "strengths", "weaknesses" and \
"suggestions" (each a list of short sentences about this prompt)."""

CRITIC_SEED_PROMPT = """Evaluate the prompt below, written for an AI assistant.

Prompt:
<<<
{prompt}
>>>

Reply with JSON only: an object with "score" (a number from 1 to 10), "strengths", "weaknesses" and \
"suggestions" (each a list of strings)."""

__all__ = [
    "CRITIC_PROMPT",
    "CRITIC_SEED_PROMPT",
    "arun_creator_critic",
    "critique_all",
    "rescore_creator_critic",
    "run_creator_critic",
]
