"""The record of one model call, as returned by `complete` and stored in the cache."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .failures import InvalidReply
from .wire import MAX_COST_USD, MAX_FIGURE, MAX_LATENCY_S, MAX_TOKENS, whole_text

FLOOR_LOGPROB = -9999.0
"""Stands in for a log-probability of minus infinity, which JSON cannot hold (OpenAI does the same)."""
LOGPROB_SLACK = 1e-6
"""A reported log-probability above 0 by at most this much is rounding, read as 0; above it, it is no
log-probability (a probability over 1)."""


class TopLogprob(BaseModel):
    """One candidate token at a position of the reply, with its log-probability."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str
    """The candidate token's text."""
    logprob: float = Field(le=LOGPROB_SLACK, allow_inf_nan=False)
    """Its natural-log probability at that position (a record holding anything else, an older version's cache
    entry say, is not a record: a miss)."""


class TokenLogprob(BaseModel):
    """One generated token of a reply: its text, its log-probability and the most likely alternatives."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str
    """The generated token's text; the texts of all tokens, in order, make up the reply."""
    logprob: float = Field(le=LOGPROB_SLACK, allow_inf_nan=False)
    """The generated token's natural-log probability."""
    top_logprobs: list[TopLogprob] = Field(default_factory=list)
    """The most likely tokens at this position, most likely first (as many as `top_logprobs=` asked for,
    where the provider gives them; the local model may add the generated token when it is not among them)."""


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _logprob(value: Any, where: str) -> float:
    """A reported log-probability: a real number <= 0 (minus infinity and a missing one read as FLOOR_LOGPROB).

    Raises:
        InvalidReply: anything else (a string, a bool, NaN, a positive number: a probability over 1), naming
            the field; not retried."""
    if value is None:
        return FLOOR_LOGPROB
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)  # np.float32 (the local model's) too
    x = float(value) if real else math.nan
    if x == -math.inf:
        return FLOOR_LOGPROB
    if not x <= LOGPROB_SLACK:  # NaN, +inf, a probability over 1, or not a number at all
        shown = f"{x:.3g}" if real else repr(value)
        raise InvalidReply(f"{where} is {shown[:40]}, out of range (a log-probability: a number <= 0)", retryable=False)
    return min(x, 0.0)


def _entries(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise InvalidReply(f"{where} is {type(value).__name__}, not a list", retryable=False)
    return list(value)


def logprobs_of(choice_logprobs: Any) -> list[TokenLogprob] | None:
    """Token log-probabilities from a provider choice's `logprobs` (OpenAI chat shape, as an object or a
    dict: `{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}`); None when absent.

    Raises:
        InvalidReply: a log-probability that is not one (`_logprob`), or a list that is not a list, naming the
            field (`logprobs.content[3].top_logprobs[0].logprob`); not retried."""
    if choice_logprobs is None:
        return None
    content = _field(choice_logprobs, "content")
    if content is None:
        return None
    tokens = []
    for i, t in enumerate(_entries(content, "logprobs.content")):
        at = f"logprobs.content[{i}]"
        tops = _entries(_field(t, "top_logprobs"), f"{at}.top_logprobs")
        tokens.append(
            TokenLogprob(
                token=str(_field(t, "token") or ""),
                logprob=_logprob(_field(t, "logprob"), f"{at}.logprob"),
                top_logprobs=[
                    TopLogprob(
                        token=str(_field(a, "token") or ""),
                        logprob=_logprob(_field(a, "logprob"), f"{at}.top_logprobs[{j}].logprob"),
                    )
                    for j, a in enumerate(tops)
                ],
            )
        )
    return tokens


@dataclass(frozen=True)
class Generated:
    """What an in-process model (`local/...`, `fake/...`) produced for one request."""

    text: str
    usage: tuple[int, int]
    """(input, output) token counts."""
    finish_reason: str
    logprobs: list[TokenLogprob] | None = None
    """Per-token log-probabilities, when the request asked for them."""
    model: str | None = None
    """What identifies the weights (reported as the response's `model`)."""


class Completion(BaseModel):
    """One completed (possibly cached) model call."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    version: int = 1
    """Record format version."""
    model: str
    """The model name as the caller gave it."""
    text: str
    """The final raw text of the reply (the one that validated, for structured calls)."""
    _whole_text = field_validator("text")(whole_text)  # a record stored with half an emoji pair replays as text
    parsed: Any = None
    """An instance of the requested schema, or None when no schema was given."""
    input_tokens: int | None = Field(None, ge=0, le=MAX_FIGURE)
    """Prompt tokens over all attempts of the original call, as the provider reported them."""
    output_tokens: int | None = Field(None, ge=0, le=MAX_FIGURE)
    """Completion tokens over all attempts of the original call, as the provider reported them."""
    cost_usd: float | None = Field(None, ge=0, le=MAX_FIGURE, allow_inf_nan=False)
    """Cost of the original call in USD; None where litellm does not know the model's price."""
    latency_s: float = Field(0.0, ge=0, le=MAX_LATENCY_S, allow_inf_nan=False)
    """Seconds the original call spent waiting on the provider (all attempts)."""
    attempts: int = 1
    """Provider calls the original call made: transient-error retries plus structured re-asks."""
    cache_hit: bool = False
    """True when this came from the cache: it then adds no tokens and no cost to any total."""
    sample: int = 0
    """The sample index: independent cached draws of the same request."""
    key: str = ""
    """The cache key of the request (sha256 hex)."""
    finish_reason: str | None = None
    """Why the provider stopped generating ('stop', 'length', ...), where it says."""
    spent_input_tokens: int | None = None
    """Input tokens this call spent now when it differs from the original (some replies were replayed
    from the cache); None means 'the original figure'. Never stored."""
    spent_output_tokens: int | None = None
    """Output tokens this call spent now, as `spent_input_tokens`. Never stored."""
    spent_cost_usd: float | None = None
    """Cost this call spent now, as `spent_input_tokens` (None also where the original is unknown)."""
    logprobs: list[TokenLogprob] | None = None
    """Per generated token of `text`: its log-probability and top alternatives, when the call asked for
    them (`logprobs=True, top_logprobs=k`) and the provider gave them; else None."""
    response_model: str | None = None
    """The model id the provider reported in its response (e.g. a dated snapshot name; the GGUF file name
    for a local model), where it reported one."""
    endpoint: str | None = None
    """Which endpoint answered, as a short identity without secrets: 'litellm:<provider>@<host>',
    'local:<file>.gguf' or 'fake:<id>'."""
    fingerprint: dict[str, Any] | None = None
    """What the reply rests on (`promptlab.llm.local.fingerprint`), as the original call made it: a replay from the
    cache keeps the fingerprint of the machine and build that made the reply. None for a scripted model and for
    records stored before fingerprints."""

    @model_validator(mode="after")
    def _figures_per_request(self) -> Completion:
        """No more tokens or cost than `attempts` requests may each count (`wire.MAX_TOKENS`, `MAX_COST_USD`): a
        record past them, however it was made, is not a record."""
        n = max(self.attempts, 1)
        for name, value, bound in (
            ("input_tokens", self.input_tokens, MAX_TOKENS * n),
            ("output_tokens", self.output_tokens, MAX_TOKENS * n),
            ("cost_usd", self.cost_usd, MAX_COST_USD * n),
        ):
            if value is not None and value > bound:
                raise ValueError(f"{name} is {value:.3g}, past what {n} request(s) may count ({bound:.3g})")
        return self

    @property
    def billed_input_tokens(self) -> int:
        """Input tokens this call added now (0 for a cache hit or an unreported count)."""
        if self.cache_hit:
            return 0
        return self.spent_input_tokens if self.spent_input_tokens is not None else (self.input_tokens or 0)

    @property
    def billed_output_tokens(self) -> int:
        """Output tokens this call added now (0 for a cache hit or an unreported count)."""
        if self.cache_hit:
            return 0
        return self.spent_output_tokens if self.spent_output_tokens is not None else (self.output_tokens or 0)

    @property
    def billed_cost_usd(self) -> float | None:
        """Cost this call added now: 0 for a hit, None where the price is unknown."""
        if self.cache_hit:
            return 0.0
        return self.spent_cost_usd if self.spent_cost_usd is not None else self.cost_usd

    def stored(self) -> dict[str, Any]:
        """What goes to disk: the original call's record (the parsed object is rebuilt from `text`; what
        this particular call spent is not part of the record)."""
        return self.model_dump(
            mode="json",
            exclude={"parsed", "cache_hit", "spent_input_tokens", "spent_output_tokens", "spent_cost_usd"},
        )


__all__ = ["FLOOR_LOGPROB", "Completion", "Generated", "TokenLogprob", "TopLogprob", "logprobs_of"]
