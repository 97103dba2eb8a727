"""Creator/Critic's settings, the critic's reply schema and `aggregate`, which combines the critics' scores
(the router is `promptlab.loops.creator_critic.router`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonDict

from ..runtime.config import check_model_name
from ..runtime.grounding import PromptLoopConfig
from ..runtime.toolkit import cut

Aggregate = Literal["mean", "median", "min"]
Final = Literal["last", "best"]
RoleInputs = Literal["extended", "seed"]
OutOfRange = Literal["missing", "clamp", "keep"]

SEED_ITERATION_CEILING = 25
"""The design document's hardcoded safety: "LangGraph enforces max 25 iterations"."""


class CreatorCriticConfig(PromptLoopConfig):
    """Creator/Critic settings; `generator_model` plays the creator, `critic_model` the critics."""

    ROLES = ("creator", "critic")
    CRITIC_ROLES = frozenset({"critic"})

    temperature: float = Field(0.7, ge=0.0, le=2.0)
    """Sampling temperature of the creator's and critics' calls (the design document's 0.7)."""
    max_iterations: int = Field(3, ge=1)
    """Create/critique rounds at most (at most `iteration_ceiling`)."""
    iteration_ceiling: int | None = Field(SEED_ITERATION_CEILING, ge=1)
    """The highest `max_iterations` accepted: 25, the design document's hardcoded safety (a larger
    `max_iterations` is refused before any call); None: no ceiling."""
    out_of_range_score: OutOfRange = "missing"
    """A critic's score outside 1-10: 'missing' (no score, the note recorded; the critique's words still reach
    the creator), 'clamp' (to 1 or 10, the note recorded) or 'keep' (as written, as the design document's
    `json.loads` keeps it)."""
    schema_hints: bool = True
    """The critic's generation schema asks for at most 3 items of at most 150 characters per list (a local
    model's grammar keeps to it); False: no length in the schema, as the design document's lists."""
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
    def _known_critics(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        for name in v or []:
            check_model_name(name, info)
        return v

    @model_validator(mode="after")
    def _under_the_ceiling(self) -> CreatorCriticConfig:
        if self.iteration_ceiling is not None and self.max_iterations > self.iteration_ceiling:
            raise ValueError(
                f"max_iterations {self.max_iterations} is over iteration_ceiling {self.iteration_ceiling} (the "
                "design document's hardcoded safety); raise iteration_ceiling or set it to None to go further"
            )
        return self

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

    def shown_to_critic(self, candidate: str) -> str:
        """The candidate as the critics' prompt shows it: cut to `history_chars` (with '...') when set."""
        return cut(candidate, self.history_chars)

    def critics(self) -> list[tuple[str, str]]:
        """(judge name, model) of every critic, in order: one critic is the role `critic`; several are
        `critic[1]`, `critic[2]`, ... (each a role of its own in `Run.models`)."""
        models = self.critic_models or [self.model_for("critic")] * self.n_critics
        return critic_roles(models)


def critic_roles(models: list[str]) -> list[tuple[str, str]]:
    """(judge name, model) per critic model: `critic` alone, else `critic[k]` numbered from 1."""
    if len(models) == 1:
        return [("critic", models[0])]
    return [(f"critic[{k}]", m) for k, m in enumerate(models, start=1)]


CRITIQUE_LISTS = ("strengths", "weaknesses", "suggestions")
"""The critique's list keys (the design document's `Critique`)."""
SCORE_SCHEMA: JsonDict = {"type": "number", "minimum": 1, "maximum": 10}
"""The critic's score as the generation schema asks for it (validation reads any number, see `Critique`)."""


def _generation_schema(hints: bool) -> Callable[[JsonDict], None]:
    """The critique's JSON schema: a score 1-10 and three lists; with `hints`, at most 3 items of at most 150
    characters per list (a local model's grammar keeps to them, so its reply stays inside its token budget)."""

    def shape(schema: JsonDict) -> None:
        item: JsonDict = {"type": "string", **({"maxLength": 150} if hints else {})}
        lists: JsonDict = {
            k: {"type": "array", "items": item, **({"maxItems": 3} if hints else {})} for k in CRITIQUE_LISTS
        }
        schema.update(additionalProperties=False, required=["score"], properties={"score": dict(SCORE_SCHEMA), **lists})

    return shape


class Critique(BaseModel):
    """A critic's reply, read as the design document's `json.loads(raw)` reads it: any JSON object.

    Other keys are kept (`model_extra`) and passed on to the creator with the rest. A list given as one
    string is a one-item list, and a null list an empty one. The score is any number (a numeric string is
    read as its number); a reply without a readable score keeps its words and gives a missing score, with
    `score_problem` saying why. Whether a score outside 1-10 counts is the loop's rule
    (`CreatorCriticConfig.out_of_range_score`), not the schema's."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_generation_schema(hints=True))
    score: float | None = None
    strengths: list[str] = Field(default_factory=list)
    weaknesses: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    _score_problem: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _as_json_loads_keeps_it(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        if not isinstance(data, dict):
            return handler(data)
        data = dict(data)
        for key in CRITIQUE_LISTS:
            if isinstance(data.get(key), str):
                data[key] = [data[key]]
            elif key in data and data[key] is None:
                data[key] = []
        score, problem = _read_score(data.get("score"), "score" in data)
        result = handler({**data, "score": score})
        result._score_problem = problem
        return result

    @property
    def score_problem(self) -> str | None:
        """Why the reply gives no score (None when it gives one)."""
        return self._score_problem


class LongCritique(Critique):
    """`Critique` whose generation schema sets no list length or item length (`schema_hints=False`)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_generation_schema(hints=False))


def _read_score(value: Any, given: bool) -> tuple[float | None, str | None]:
    """A critique's score as a number, or None and why not."""
    if not given or value is None:
        return None, "the critique gives no score"
    if isinstance(value, bool):
        return None, f"the score {value!r} is not a number"
    if isinstance(value, int | float):
        return float(value), None
    if isinstance(value, str):
        try:
            return float(value.strip()), None
        except ValueError:
            pass
    return None, f"the score {value!r} is not a number"


def critique_schema(cfg: CreatorCriticConfig) -> type[Critique]:
    """The critic's reply schema: with the generation schema's length hints (`schema_hints`) or without."""
    return Critique if cfg.schema_hints else LongCritique


def judged_score(value: float | None, problem: str | None, rule: OutOfRange) -> tuple[float | None, str | None, bool]:
    """A critic's score as the loop counts it: (the score, a note, whether the note is an error to record).

    `problem` says why the reply gave no score; a score outside 1-10 follows `rule` (`out_of_range_score`):
    'missing' and 'clamp' lose or change what the critic said (an error), 'keep' takes it as written."""
    if problem:
        return None, f"missing: {problem}", True
    if value is None or 1 <= value <= 10:
        return value, None, False
    said = f"the critic's score {value:g} is outside 1-10"
    if rule == "keep":
        return value, f"{said}: kept as written (out_of_range_score='keep')", False
    if rule == "clamp":
        clamped = min(10.0, max(1.0, value))
        return clamped, f"{said}: clamped to {clamped:g} (out_of_range_score='clamp')", True
    return None, f"{said}: missing (out_of_range_score='missing')", True


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
