"""P³RO's structured outputs: the role reply schemas and mapping an evaluation onto the criteria."""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    create_model,
    model_validator,
)

from ...record import Score
from ..runtime.replies import reply_config


# Role reply schemas -------------------------------------------------------------------------------------
def _has_word(text: str) -> str:
    if not re.search(r"\w", text):
        raise ValueError(f"{text!r} is not a criterion: it holds no word")
    return text


Criterion = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1),
    AfterValidator(_has_word),
    Field(json_schema_extra={"minLength": 12, "maxLength": 100}),
]
"""A criterion holds a word (a reply of empty or '...' strings is asked for again); the lengths are generation
hints, so a small model's grammar writes a real sentence, not a placeholder."""


class DecomposedGoal(BaseModel):
    """The decomposer's reply: any non-empty list of criteria, as the design document's `List[str]` (the
    number asked for, 3-5 by default, is a generation hint). With `strict_criteria` the config's bounds are
    validated: fewer than `MIN_DISTINCT` distinct criteria (case, numbering and spacing ignored) or more than
    `MAX_COUNT` fails validation, so the call path asks again."""

    model_config = reply_config()
    MIN_DISTINCT: ClassVar[int] = 1
    MAX_COUNT: ClassVar[int | None] = None
    criteria: list[Criterion] = Field(min_length=1)

    @model_validator(mode="after")
    def _enough_distinct(self) -> DecomposedGoal:
        distinct = {norm_criterion(c) for c in self.criteria}
        if len(distinct) < self.MIN_DISTINCT:
            raise ValueError(
                f"{len(distinct)} distinct criteria (repeats removed); at least {self.MIN_DISTINCT} are needed"
            )
        if self.MAX_COUNT is not None and len(self.criteria) > self.MAX_COUNT:
            raise ValueError(f"{len(self.criteria)} criteria; at most {self.MAX_COUNT} are allowed")
        return self


class ImprovementPlan(BaseModel):
    """The strategist's reply: an ordered plan (any string, an empty one too, as the design document's
    `plan: str`; the lengths are generation hints)."""

    model_config = reply_config()
    plan: str = Field(json_schema_extra={"minLength": 1, "maxLength": 2000})


class GeneratedPrompt(BaseModel):
    """The generator's reply: the full new prompt and why it was changed so."""

    model_config = reply_config()
    prompt_text: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1), Field(json_schema_extra={"maxLength": 4000})
    ]
    reasoning: str = Field("", json_schema_extra={"maxLength": 400})


class CriterionScore(BaseModel):
    """One criterion's score with a one-sentence reason (lengths are generation hints, not validation:
    a longer valid reply from another model is accepted). The score is a number from 1 to 10 (8.5 is
    accepted; 0 or 11 make the entry invalid)."""

    model_config = reply_config()
    criterion: str = Field(min_length=1, json_schema_extra={"maxLength": 200})
    score: float = Field(ge=1, le=10)
    justification: str = Field("", json_schema_extra={"maxLength": 150})


class IntCriterionScore(CriterionScore):
    """`CriterionScore` with the design document's `score: int`: any integer (0 and 11 too), no fraction."""

    score: int  # type: ignore[assignment]


SCORE_TYPES: dict[str, type[CriterionScore]] = {"1-10": CriterionScore, "int": IntCriterionScore}
"""How an evaluator's score entry is validated, by the config's `score_type`."""


class EvaluationResult(BaseModel):
    """The evaluator's reply: a score per criterion and overall feedback (any number of entries; those that
    match no criterion are recorded as unmatched).

    Entries are validated one by one: an invalid entry (a score outside 1-10, a null justification, ...)
    is left out of `scores` and kept in `rejected` with its error, so it cannot discard the valid ones.
    A reply with no valid entry at all fails validation (the call path asks again)."""

    model_config = reply_config()
    scores: list[CriterionScore] = Field(min_length=1, json_schema_extra={"maxItems": 6})
    qualitative_feedback: str = Field(json_schema_extra={"maxLength": 300})
    _rejected: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _positions: list[int] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _entry_by_entry(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        entries = data.get("scores") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries:
            return handler(data)
        kept: list[int] = []
        rejected: list[dict[str, Any]] = []
        for k, entry in enumerate(entries):
            try:  # through `handler`, so the entry is checked as strictly as the whole reply
                handler({**data, "scores": [entry]})
                kept.append(k)
            except ValidationError as e:
                if any(err["loc"][:2] != ("scores", 0) for err in e.errors()):
                    raise  # a problem outside this entry (e.g. no feedback): the reply itself is invalid
                rejected.append({"position": k, "entry": entry, "error": entry_problems(e)})
        if not kept:
            raise ValueError(
                "no valid score entry: " + "; ".join(f"entry {r['position'] + 1}: {r['error']}" for r in rejected)
            )
        result = handler({**data, "scores": [entries[k] for k in kept]})
        result._rejected, result._positions = rejected, kept
        return result

    @property
    def rejected(self) -> list[dict[str, Any]]:
        """The invalid entries as the evaluator wrote them: {"position", "entry", "error"} (0-based position)."""
        return self._rejected

    @property
    def positions(self) -> list[int]:
        """Where each entry of `scores` stood in the reply (0-based), invalid entries counted."""
        return self._positions or list(range(len(self.scores)))


def entry_problems(e: ValidationError) -> str:
    """A validation error of one entry, as one line ('score: Input should be ...')."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc'][2:]) or 'entry'}: {err['msg']}" for err in e.errors())


class Reflection(BaseModel):
    """The reflector's reply: one actionable directive for the next attempt (any string, an empty one too, as
    the design document's `summary: str`; the lengths are generation hints)."""

    model_config = reply_config()
    summary: str = Field(json_schema_extra={"minLength": 1, "maxLength": 400})


@cache
def decomposed_schema(low: int, high: int, strict: bool = False, as_written: bool = False) -> type[DecomposedGoal]:
    """`DecomposedGoal` whose JSON schema asks for `low` to `high` criteria; with `strict` a reply outside
    those bounds (repeats removed for the lower one) fails validation, else any non-empty list is taken;
    `as_written` takes any list of strings, as the design document's `List[str]` (empty, repeats and
    wordless entries too)."""
    hint = Field(min_length=0 if as_written else 1, json_schema_extra={"minItems": low, "maxItems": high})
    model = create_model(
        "DecomposedGoal", __base__=DecomposedGoal, criteria=(list[str] if as_written else list[Criterion], hint)
    )
    if strict:
        model.MIN_DISTINCT, model.MAX_COUNT = low, high
    if as_written:
        model.MIN_DISTINCT = 0
    return model


@lru_cache(maxsize=64)
def evaluation_schema(criteria: tuple[str, ...], score_type: str = "1-10") -> type[EvaluationResult]:
    """`EvaluationResult` whose JSON schema asks for exactly one entry per criterion, in order (a tuple of
    `prefixItems` naming each criterion, integer scores 1-10): constrained decoders and `fake/auto` follow it,
    so every criterion gets a score. Parsing stays lenient: other names and more entries are accepted, and
    entries that match no criterion are recorded as unmatched; `score_type` ('1-10' or 'int', see
    `SCORE_TYPES`) says which scores are valid."""

    def one_per_criterion(schema: dict[str, Any]) -> None:
        schema.pop("items", None)
        schema.pop("maxItems", None)
        schema["minItems"] = len(criteria)
        schema["prefixItems"] = [
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["criterion", "score", "justification"],
                "properties": {
                    "criterion": {"const": c},
                    "score": {"type": "integer", "minimum": 1, "maximum": 10},
                    "justification": {"type": "string", "maxLength": 150},
                },
            }
            for c in criteria
        ]
        schema["maxItems"] = len(criteria)

    entry: Any = SCORE_TYPES[score_type]
    return create_model(
        "EvaluationResult",
        __base__=EvaluationResult,
        scores=(list[entry], Field(min_length=1, json_schema_extra=one_per_criterion)),
    )


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


def _score(criterion: str, entry: CriterionScore, judge: str, mode: str | None) -> Score:
    return Score(
        criterion=criterion,
        score=None if entry.score is None else float(entry.score),
        justification=entry.justification,
        judge=judge,
        mode=mode,
    )


def _by_position(criteria: list[str], said: Any, position: int, taken: set[int]) -> int | None:
    """The criterion an entry stands for when its name matches none: the one at its position in the reply
    (the evaluator was asked for one entry per criterion, in order), unless that one is already scored."""
    if isinstance(said, str) and _which(criteria, said) is not None:
        return None  # it names a criterion (already scored): a repeat, not a paraphrase
    return position if position < len(criteria) and position not in taken else None


def match_scores(
    criteria: list[str], result: EvaluationResult, judge: str, mode: str | None = "sampled"
) -> tuple[list[Score], list[dict[str, Any]], int]:
    """Map an evaluation onto the criteria: by name (numbering, case and spacing ignored; a number; a unique
    containment), then, when the reply has one entry per criterion as asked, an entry whose name matches no
    criterion by its position (a paraphrased name stands for the criterion asked for at that place).

    Returns:
        One Score per criterion, in order; the valid entries that match no criterion or repeat one, kept as
        the evaluator wrote them; and how many entries were matched by position. A criterion's score is None
        where the evaluator gave none, or where its only entry was invalid (`result.rejected`; the
        justification then gives the error).
    """
    found: dict[int, Score] = {}
    unmatched: list[dict[str, Any]] = []
    loose: list[tuple[int, CriterionScore]] = []
    for pos, s in zip(result.positions, result.scores, strict=True):
        i = _which(criteria, s.criterion)
        if i is None or i in found:
            loose.append((pos, s))
            continue
        found[i] = _score(criteria[i], s, judge, mode)
    by_position = 0
    shaped = len(result.scores) + len(result.rejected) == len(criteria)  # one entry per criterion, as asked
    for pos, s in loose:
        i = _by_position(criteria, s.criterion, pos, set(found)) if shaped else None
        if i is None:
            unmatched.append(s.model_dump())
            continue
        by_position += 1
        found[i] = _score(criteria[i], s, judge, mode)
    invalid: dict[int, str] = {}
    for r in result.rejected:
        said = r["entry"].get("criterion") if isinstance(r["entry"], dict) else None
        i = _which(criteria, said) if isinstance(said, str) else None
        i = i if i is not None or not shaped else _by_position(criteria, said, r["position"], set(found))
        if i is not None and i not in found:
            invalid.setdefault(i, f"missing: the evaluator's entry was invalid ({r['error']})")
    scores = [
        found.get(i)
        or Score(criterion=c, score=None, judge=judge, justification=invalid.get(i, "not scored by the evaluator"))
        for i, c in enumerate(criteria)
    ]
    return scores, unmatched, by_position
