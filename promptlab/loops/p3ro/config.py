"""P³RO's settings: the config and the iteration average under the `missing_criteria` policy (the router is
`promptlab.loops.p3ro.router`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ...record import Score
from ..runtime.grounding import PromptLoopConfig
from ..runtime.toolkit import mean_present

MissingCriteria = Literal["missing", "mean_present", "mean_reply"]
ScoreType = Literal["1-10", "int"]


class P3ROConfig(PromptLoopConfig):
    """P³RO settings; `critic_model` plays the evaluator, `generator_model` every other role."""

    ROLES = ("decomposer", "strategist", "generator", "evaluator", "reflector")
    CRITIC_ROLES = frozenset({"evaluator"})

    finish_threshold: float = Field(8.5, ge=1, le=10)
    """FINISH once an iteration's average criterion score reaches this (1-10)."""
    max_iterations: int = Field(5, ge=1, le=100)
    """Probe iterations at most (FINISH when reached)."""
    min_criteria: int = Field(3, ge=1, le=6)
    """Fewest criteria the decomposer is asked for (the design document's 3-5)."""
    max_criteria: int = Field(5, ge=1, le=6)
    """Most criteria the decomposer is asked for (at most 6: a local model's reply holds at most 6 items)."""
    strict_criteria: bool = False
    """False: any non-empty list of criteria is taken, as the design document's `List[str]` (repeats
    removed); True: a reply with fewer than `min_criteria` distinct criteria or more than `max_criteria` is
    asked for again."""
    criteria_as_written: bool = False
    """True: the decomposer's list is taken as written, as the design document's `List[str]`: repeats kept,
    an empty list or an entry with no word taken (with no criteria, only `missing_criteria="mean_reply"` gives
    an average); False: repeats are removed, and an empty list or a wordless entry is asked for again."""
    history_window: int | None = Field(None, ge=0, le=100)
    """Past attempts shown to the strategist and the generator (None: all, as the design document)."""
    history_chars: int | None = Field(None, ge=50, le=20000)
    """Each text of a past attempt (prompt, reasoning, justifications, feedback) is cut to this many
    characters in role prompts (None: never cut, as the design document)."""
    missing_criteria: MissingCriteria = "missing"
    """An iteration's average: 'missing' (None when a criterion is unscored: no FINISH on partial
    evidence), 'mean_present' (the mean of the scored criteria) or 'mean_reply' (the mean of every valid
    score in the evaluator's reply, whatever criterion it names, extra entries too: the design document's)."""
    score_type: ScoreType = "1-10"
    """Which evaluator scores are valid: '1-10' (any number from 1 to 10; 0 or 11 leave the criterion
    missing) or 'int' (the design document's `score: int`: any integer, a fraction leaves it missing)."""

    @model_validator(mode="after")
    def _criteria_bounds(self) -> P3ROConfig:
        if self.min_criteria > self.max_criteria:
            raise ValueError(f"min_criteria ({self.min_criteria}) must not exceed max_criteria ({self.max_criteria})")
        if self.strict_criteria and self.criteria_as_written:
            raise ValueError("strict_criteria and criteria_as_written exclude each other; give one")
        return self


def average_of(scores: list[Score], policy: MissingCriteria, reply: list[float | None] | None = None) -> float | None:
    """The iteration's average: the unrounded mean, None when no score is present or (policy 'missing')
    when any criterion is unscored; policy 'mean_reply' averages `reply` (every valid score the evaluator
    wrote) when given."""
    if policy == "mean_reply" and reply is not None:
        return mean_present(reply)
    if policy == "missing" and any(s.score is None for s in scores):
        return None
    return mean_present(s.score for s in scores)
