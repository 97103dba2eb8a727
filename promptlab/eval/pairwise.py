"""A pairwise judge: which of two candidate prompts serves the goal better? The order probe's instrument.

`ajudge_pair(model, goal, first, second)` shows the two candidates as "Prompt A" (first) and "Prompt B"
(second) and asks for `PairVerdict` JSON through the ordinary call path (cache, retries, structured parsing);
it returns a `PairJudgement`: 0 when the judge prefers the first shown, 1 the second, and None with the error
recorded when its reply is unusable (never a guessed verdict). A simulated critic (`sim/...`) judges without a
call (`SimCritic.prefer`), from the candidates' dev accuracies, which the caller then passes.

`promptlab.analysis.bias_asks` judges each pair in both orders; a judge without position bias names the same
candidate both times (up to its own noise), one that prefers the first shown does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..critics.simulated import TIE, simulated_critic
from ..errors import PromptlabError
from ..llm.call.entry import CacheArg, acomplete
from ..llm.call.settings import Settings

MAX_TOKENS = 120
"""Room for the verdict and a one-sentence reason."""


class PairVerdict(BaseModel):
    """The pairwise judge's reply (extra keys ignored: a model adding a field is not an error)."""

    model_config = ConfigDict(extra="ignore")

    better: Literal["A", "B"]
    """The prompt that serves the goal better."""
    reason: str = Field(default="")
    """Why, in a sentence."""


@dataclass(frozen=True)
class PairJudgement:
    """One pairwise judgement: the position preferred (0 first, 1 second; None when unusable) and why not."""

    preferred: int | None
    error: str | None = None
    cache_hit: bool = False
    tie: bool = False
    """The judge saw no difference (a simulated judge scoring both alike): no position was preferred."""


async def ajudge_pair(
    model: str,
    goal: str,
    first: str,
    second: str,
    *,
    accuracies: tuple[float | None, float | None] = (None, None),
    sample: int = 0,
    cache: CacheArg = None,
    settings: Settings | None = None,
    prompt: str | None = None,
) -> PairJudgement:
    """Ask `model` which of two prompts (shown in this order) better serves `goal`.

    Args:
        model: The judge (a model name, or a simulated critic `sim/...`).
        goal: What the prompts are for.
        first: The prompt shown as "Prompt A".
        second: The prompt shown as "Prompt B".
        accuracies: The candidates' dev accuracies (what a simulated judge compares; unused by a model).
        sample: The call's sample index (cached per sample).
        cache: The call cache.
        settings: Call settings.
        prompt: Overrides PAIRWISE_PROMPT (fields {goal}, {first}, {second}).
    """
    if (judge := simulated_critic(model)) is not None:
        a, b = accuracies
        if a is None or b is None:
            return PairJudgement(None, "a candidate has no dev score for the simulated judge")
        said = judge.prefer((a, first), (b, second), sample=sample, criterion="pairwise")
        return PairJudgement(None, tie=True) if said == TIE else PairJudgement(said)
    text = (prompt or PAIRWISE_PROMPT).format(goal=goal, first=first, second=second)
    try:
        done = await acomplete(
            model, text, schema=PairVerdict, max_tokens=MAX_TOKENS, sample=sample, cache=cache, settings=settings
        )
    except PromptlabError as e:
        return PairJudgement(None, f"{type(e).__name__}: {e}")
    verdict: Any = done.parsed
    if not isinstance(verdict, PairVerdict):
        return PairJudgement(None, f"unusable reply: {done.text[:200]!r}", done.cache_hit)
    return PairJudgement(0 if verdict.better == "A" else 1, None, done.cache_hit)


PAIRWISE_PROMPT = """You compare two prompts written for the same goal.

Goal: {goal}

Prompt A:
<<<
{first}
>>>

Prompt B:
<<<
{second}
>>>

Which prompt would make a language model achieve the goal better? Judge the content, not the length or the
order in which they are shown. Answer with JSON: {{"better": "A" or "B", "reason": "one sentence"}}."""
"""The pairwise judge's prompt (override with `ajudge_pair(prompt=...)`)."""


__all__ = ["MAX_TOKENS", "PAIRWISE_PROMPT", "PairJudgement", "PairVerdict", "ajudge_pair"]
