"""P³RO's PromptEvaluator: the evaluator's call, its reply mapped onto the criteria, and what an unusable reply
counts as."""

from __future__ import annotations

from dataclasses import dataclass

from ...critics.simulated import simulated_critic
from ...eval.expected import expected_scores
from ...record import Iteration, Score
from ..runtime.context import RunContext
from ..runtime.grounding import simulated_score, simulated_step
from ..runtime.missing import record_missing
from ..runtime.role_call import RoleCall
from .config import P3ROConfig
from .schemas import EvaluationResult, evaluation_schema, match_scores
from .text import missing_scores, numbered

FALLBACK_FEEDBACK = "Evaluator returned invalid JSON"
"""The overall feedback of a `parse_failure_score` evaluation (as the design documents' fallback critique says
"Critic returned invalid JSON"), so the reflector reflects on it."""


@dataclass
class Evaluation:
    """One evaluation of a candidate."""

    scores: list[Score]
    """One Score per criterion, in order (None where missing)."""
    feedback: str | None = None
    """The overall qualitative feedback (None when the reply was unusable and no fallback is set)."""
    reply_scores: list[float | None] | None = None
    """Every valid score in the reply, whatever criterion it names (what `missing_criteria='mean_reply'`
    averages); None when the reply was unusable."""

    @property
    def usable(self) -> bool:
        """True when there is something to reflect on: a reply, or the `parse_failure_score` fallback."""
        return self.feedback is not None


async def evaluate(
    ctx: RunContext, cfg: P3ROConfig, goal: str, criteria: list[str], candidate: str, it: Iteration
) -> Evaluation:
    """PromptEvaluator: one Score per criterion (sampled or expected), unmatched entries kept in
    `Run.info['unmatched_scores']` and invalid ones (with their error) in `Run.info['invalid_scores']`; a
    criterion whose entry was invalid is missing. A simulated evaluator (`sim/...`) scores every criterion
    from the candidate's dev accuracy without a call. An unusable reply gives missing scores, or with
    `parse_failure_score` that score for every criterion after one call (the design documents' fallback makes
    one call)."""
    judge = cfg.model_for("evaluator")
    if simulated_critic(judge) is not None:  # scores from the candidate's dev accuracy: no call, no words to reflect on
        scores = [
            simulated_score(judge, it, candidate, sample=ctx.run.sample, criterion=k, judge=judge) for k in criteria
        ]
        ctx.place(simulated_step(it, "evaluate", "evaluator", judge, scores), it)
        return Evaluation(scores)
    prompt = ctx.prompt("evaluator", EVALUATOR_PROMPT, goal=goal, criteria=numbered(criteria), prompt_text=candidate)
    expected = cfg.score_mode == "expected"
    fallback = cfg.parse_failure_score
    c, step = await ctx.ask(
        RoleCall(
            "evaluator",
            "evaluate",
            prompt,
            schema=evaluation_schema(tuple(criteria), cfg.score_type),
            iteration=it,
            token_type="evaluator",
            logprobs=expected,
            parse_attempts=None if fallback is None else 1,
        )
    )
    ev = c.parsed if c is not None else None
    if c is None or not isinstance(ev, EvaluationResult):
        if fallback is None:
            return Evaluation(missing_scores(criteria, "missing: the evaluator's reply was unusable", judge))
        why = f"the evaluator's reply was unusable: parse_failure_score {fallback:g} used"
        return Evaluation(
            [Score(criterion=k, score=fallback, justification=why, judge=judge, mode="fallback") for k in criteria],
            FALLBACK_FEEDBACK,
        )
    if expected:
        found = expected_scores(c.text, c.logprobs, field="score")
        written = len(ev.scores) + len(ev.rejected)  # one "score" field per entry written, invalid ones too
        values = [found[k].expected if len(found) == written else None for k in ev.positions]
        entries = [e.model_copy(update={"score": v}) for e, v in zip(ev.scores, values, strict=True)]
        ev = ev.model_copy(update={"scores": entries})
    scores, unmatched, by_position = match_scores(criteria, ev, judge, "expected" if expected else "sampled")
    for key, items in (("unmatched_scores", unmatched), ("invalid_scores", ev.rejected)):
        if items:
            ctx.run.info.setdefault(key, []).extend({"iteration": it.index, **e} for e in items)
        it.metrics[key] = len(items)
    it.metrics["matched_by_position"] = by_position
    record_missing(ctx, step, scores, f"evaluator {judge}")
    reply: list[float | None] = [None if e.score is None else float(e.score) for e in ev.scores]
    return Evaluation(scores, ev.qualitative_feedback, reply)


# Role prompt (override with config.prompts["evaluator"]; fields: goal, criteria, prompt_text) ----------------
EVALUATOR_PROMPT = """You are a strict reviewer of prompts. Score the prompt below on each criterion from 1 \
(fails) to 10 (fully meets it); 5 means partly met with clear gaps. Do not reward length.

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


__all__ = ["EVALUATOR_PROMPT", "FALLBACK_FEEDBACK", "Evaluation", "evaluate"]
