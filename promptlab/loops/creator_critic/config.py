"""Creator/Critic's settings, the critic's reply schema and the router: `aggregate` combines the critics'
scores, `decide_with_reason` stops or goes on (pure functions)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic.json_schema import JsonDict

from ...llm.providers import validate_model_name
from ..runtime.grounding import PromptLoopConfig

Decision = Literal["FINISH", "CONTINUE"]
Aggregate = Literal["mean", "median", "min"]
Final = Literal["last", "best"]
RoleInputs = Literal["extended", "seed"]


class CreatorCriticConfig(PromptLoopConfig):
    """Creator/Critic settings; `generator_model` plays the creator, `critic_model` the critics."""

    ROLES = ("creator", "critic")
    CRITIC_ROLES = frozenset({"critic"})

    temperature: float = Field(0.7, ge=0.0, le=2.0)
    """Sampling temperature of the creator's and critics' calls (the design document's 0.7)."""
    max_iterations: int = Field(3, ge=1, le=100)
    """Create/critique rounds at most."""
    final: Final = "last"
    """The run's output: 'last' (the last prompt written, as the design document) or 'best' (best decision
    score, ties to the earliest)."""
    finish_threshold: float | None = Field(None, ge=1, le=10)
    """Stop early once the aggregate score reaches this (1-10) for `patience` rounds; None: never."""
    patience: int = Field(1, ge=1, le=100)
    """Consecutive rounds at or above the threshold needed to stop early."""
    critic_models: list[str] | None = Field(None, min_length=1, max_length=10)
    """One critic per listed model; None: `n_critics` critics all played by the critic model."""
    n_critics: int = Field(1, ge=1, le=10)
    """Critics when `critic_models` is None; each is an independent draw (sample offset k-1)."""
    aggregate: Aggregate = "mean"
    """How the critics' present scores combine into the iteration's average."""
    role_inputs: RoleInputs = "extended"
    """What the roles see: 'extended' (the creator: the original prompt, the goal, the latest version and
    every critique; the critics: the goal and the prompt) or 'seed' (the design document's: the creator the
    original prompt and the previous critique as a JSON object, the critic the prompt only)."""
    clean_creator_reply: bool = True
    """Take the prompt out of the creator's reply (a wrapping code fence, a lead-in such as 'Here is the
    improved prompt:', surrounding quotes); False keeps the reply as it is, as the design document."""
    show_errors: int = Field(0, ge=0, le=20)
    """Dev examples the latest version got wrong (input, expected output, the model's answer; at most this many,
    drawn by the run's sample and the iteration) shown to the creator, as ProTeGi's gradient prompt shows them;
    0: none, as the design document. Needs a grounded task and the starting prompt as candidate 0 for the first
    rewrite to see the start's errors."""
    show_critique: bool = True
    """Show the critics' critiques to the creator (the design document). False: the creator never sees them, so
    its rewrites depend on neither the critics nor the stopping rule, and every critic judges the same
    candidates (a paired comparison of critics as judges)."""
    history_chars: int | None = Field(None, ge=50, le=20000)
    """The original prompt, the latest version and each critique's items are cut to this many characters in
    the creator's prompt, and the candidate in the critics' (None: never cut, as the design document)."""

    @field_validator("critic_models")
    @classmethod
    def _known_critics(cls, v: list[str] | None) -> list[str] | None:
        for name in v or []:
            validate_model_name(name)
        return v

    @model_validator(mode="after")
    def _one_way_to_count(self) -> CreatorCriticConfig:
        if (
            self.critic_models is not None
            and "n_critics" in self.model_fields_set
            and self.n_critics != len(self.critic_models)
        ):
            raise ValueError(
                f"n_critics ({self.n_critics}) conflicts with critic_models "
                f"({len(self.critic_models)} models); give one or the other"
            )
        return self

    def critics(self) -> list[tuple[str, str]]:
        """(judge name, model) of every critic, in order."""
        models = self.critic_models or [self.model_for("critic")] * self.n_critics
        return [(f"critic[{k}]", m) for k, m in enumerate(models, start=1)]


Point = Annotated[str, StringConstraints(strip_whitespace=True), Field(json_schema_extra={"maxLength": 150})]
_SHORT: JsonDict = {"maxItems": 3}  # guides generation (grammars, fake/auto); a longer valid reply is still accepted


class Critique(BaseModel):
    """A critic's reply: validation is as lenient as the design document's (a number 1-10 and lists of
    any length; other keys are ignored, as the seed's `json.loads` ignores them); the schema's hints keep a
    small model's reply inside its token budget and ask for no other keys."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})
    score: float = Field(ge=1, le=10)
    strengths: list[Point] = Field(default_factory=list, json_schema_extra=_SHORT)
    weaknesses: list[Point] = Field(default_factory=list, json_schema_extra=_SHORT)
    suggestions: list[Point] = Field(default_factory=list, json_schema_extra=_SHORT)


# Pure helpers ---------------------------------------------------------------------------------------
AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "mean": statistics.fmean,
    "median": statistics.median,
    "min": min,
}
"""How the critics' present scores combine, by the config's `aggregate` name."""


def aggregate(scores: list[float | None], how: Aggregate) -> float | None:
    """Combine the present scores, unrounded (the threshold test compares the true value); None where all are
    missing."""
    present = [s for s in scores if s is not None]
    if not present:
        return None
    return float(AGGREGATES[how](present))


def threshold_streak(aggregates: list[float | None], threshold: float) -> int:
    """Consecutive iterations, counted back from the last, whose aggregate is >= `threshold`."""
    n = 0
    for a in reversed(aggregates):
        if a is None or a < threshold:
            break
        n += 1
    return n


def decide_with_reason(
    aggregates: list[float | None], config: CreatorCriticConfig, *, start: bool = False
) -> tuple[Decision, str]:
    """Stop or go on after the last iteration, and why.

    FINISH when the aggregate has been >= `finish_threshold` for the last `patience` iterations (a
    missing aggregate breaks the run of iterations), or when `max_iterations` is reached; else CONTINUE.
    With `start`, the first aggregate is the starting prompt's (candidate 0): it counts in the run of
    iterations at or above the threshold but not towards `max_iterations`, which counts rewrites.

    Raises:
        ValueError: `aggregates` is empty.
    """
    if not aggregates:
        raise ValueError("decide needs the aggregate of at least one iteration")
    last, t = aggregates[-1], config.finish_threshold
    if t is not None and threshold_streak(aggregates, t) >= config.patience:
        return "FINISH", f"aggregate {last:g} >= threshold {t:g} for {config.patience} iteration(s) in a row"
    if len(aggregates) - start >= config.max_iterations:
        return "FINISH", f"reached max_iterations {config.max_iterations}"
    if last is None:
        return "CONTINUE", "no critic score this iteration"
    if t is None:
        return "CONTINUE", f"aggregate {last:g}; no early-stop threshold"
    if last < t:
        return "CONTINUE", f"aggregate {last:g} below threshold {t:g}"
    streak = threshold_streak(aggregates, t)
    return "CONTINUE", f"aggregate {last:g} >= threshold {t:g} for {streak} of {config.patience} iterations"


def decide(aggregates: list[float | None], config: CreatorCriticConfig, *, start: bool = False) -> Decision:
    """The decision only; see `decide_with_reason`."""
    return decide_with_reason(aggregates, config, start=start)[0]
