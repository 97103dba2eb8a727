"""P³RO's structured outputs: the role reply schemas and mapping an evaluation onto the criteria."""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, model_validator

from ..record import Score

# Role reply schemas -------------------------------------------------------------------------------------
Criterion = Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=200)]


class DecomposedGoal(BaseModel):
    """The decomposer's reply: measurable criteria (the count is bounded by the config). Fewer than
    `MIN_DISTINCT` distinct criteria (case, numbering and spacing ignored) fails validation, so the call path
    asks again instead of the loop silently keeping fewer than `min_criteria`."""

    model_config = ConfigDict(extra="forbid")
    MIN_DISTINCT: ClassVar[int] = 1
    criteria: list[Criterion] = Field(min_length=1, max_length=6)

    @model_validator(mode="after")
    def _enough_distinct(self) -> DecomposedGoal:
        distinct = {norm_criterion(c) for c in self.criteria}
        if len(distinct) < self.MIN_DISTINCT:
            raise ValueError(f"{len(distinct)} distinct criteria (repeats removed); at least "
                             f"{self.MIN_DISTINCT} are needed")
        return self


class ImprovementPlan(BaseModel):
    """The strategist's reply: an ordered plan."""

    model_config = ConfigDict(extra="forbid")
    plan: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1),
                    Field(json_schema_extra={"maxLength": 2000})]


class GeneratedPrompt(BaseModel):
    """The generator's reply: the full new prompt and why it was changed so."""

    model_config = ConfigDict(extra="forbid")
    prompt_text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1),
                           Field(json_schema_extra={"maxLength": 4000})]
    reasoning: str = Field("", json_schema_extra={"maxLength": 400})


class CriterionScore(BaseModel):
    """One criterion's score with a one-sentence reason (lengths are generation hints, not validation:
    a longer valid reply from another model is accepted)."""

    model_config = ConfigDict(extra="forbid")
    criterion: str = Field(min_length=1, max_length=200)
    score: float = Field(ge=1, le=10)
    justification: str = Field("", json_schema_extra={"maxLength": 150})


class EvaluationResult(BaseModel):
    """The evaluator's reply: a score per criterion and overall feedback (any number of entries; those that
    match no criterion are recorded as unmatched)."""

    model_config = ConfigDict(extra="forbid")
    scores: list[CriterionScore] = Field(min_length=1, json_schema_extra={"maxItems": 6})
    qualitative_feedback: str = Field("", json_schema_extra={"maxLength": 300})


class Reflection(BaseModel):
    """The reflector's reply: one actionable directive for the next attempt."""

    model_config = ConfigDict(extra="forbid")
    summary: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1),
                       Field(json_schema_extra={"maxLength": 400})]


@cache
def decomposed_schema(low: int, high: int) -> type[DecomposedGoal]:
    """`DecomposedGoal` with the number of criteria bounded to [low, high]."""
    model = create_model("DecomposedGoal", __base__=DecomposedGoal,
                         criteria=(list[Criterion], Field(min_length=low, max_length=high)))
    model.MIN_DISTINCT = low
    return model


@lru_cache(maxsize=64)
def evaluation_schema(criteria: tuple[str, ...]) -> type[EvaluationResult]:
    """`EvaluationResult` whose JSON schema offers the criteria as the names to use and one entry per
    criterion (constrained decoders and `fake/auto` follow it), while parsing still accepts other names,
    which the loop records as unmatched rather than failing the whole evaluation."""
    n = len(criteria)
    item: Any = create_model("CriterionScore", __base__=CriterionScore, criterion=(
        str, Field(min_length=1, max_length=200, json_schema_extra={"enum": list(criteria)})))
    return create_model("EvaluationResult", __base__=EvaluationResult, scores=(
        list[item], Field(min_length=1, json_schema_extra={"minItems": n, "maxItems": n})))



# Matching scores to criteria ---------------------------------------------------------------------
def norm_criterion(text: str) -> str:
    text = re.sub(r"^\s*(?:criterion\s*)?\d+\s*[.):-]?\s*", "", text.strip().lower())
    return re.sub(r"\s+", " ", text).strip(" .;:\"'")


def _which(criteria: list[str], said: str) -> int | None:
    """Index of the criterion the evaluator meant: same text (numbering and case ignored), a bare number
    ('2', 'criterion 2'), or a unique containment of one text in the other."""
    number = re.fullmatch(r"\s*(?:criterion\s*)?#?(\d+)\s*[.):]?\s*", said.lower())
    if number:
        k = int(number.group(1))
        return k - 1 if 1 <= k <= len(criteria) else None
    key = norm_criterion(said)
    normed = [norm_criterion(c) for c in criteria]
    if key in normed:
        return normed.index(key)
    hits = [i for i, c in enumerate(normed) if len(key) >= 8 and (key in c or c in key)]
    return hits[0] if len(hits) == 1 else None


def match_scores(
    criteria: list[str], result: EvaluationResult, judge: str, mode: str | None = "sampled"
) -> tuple[list[Score], list[dict[str, Any]]]:
    """Map an evaluation onto the criteria.

    Returns:
        One Score per criterion, in order (score None where the evaluator gave none), and the entries
        that match no criterion or repeat one, kept as the evaluator wrote them.
    """
    found: dict[int, Score] = {}
    unmatched: list[dict[str, Any]] = []
    for s in result.scores:
        i = _which(criteria, s.criterion)
        if i is None or i in found:
            unmatched.append(s.model_dump())
            continue
        found[i] = Score(criterion=criteria[i], score=float(s.score), justification=s.justification,
                         judge=judge, mode=mode)
    scores = [found.get(i) or Score(criterion=c, score=None, justification="not scored by the evaluator",
                                    judge=judge) for i, c in enumerate(criteria)]
    return scores, unmatched
