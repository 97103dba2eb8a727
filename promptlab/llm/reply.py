"""One provider reply as the call protocol needs it, read from a litellm ModelResponse (whichever transport
made the request), with its cost from litellm's price map: None for an unknown price, never 0.0."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from .completion import TokenLogprob, logprobs_of
from .providers import endpoint, litellm, reported_model


class Reply(BaseModel):
    """One provider reply, as the protocol needs it (and as a structured call's reply is cached)."""

    text: str
    """The reply's text ('' when the provider sent none)."""
    input_tokens: int | None = None
    """Prompt tokens the provider reported; None when it reported no usage."""
    output_tokens: int | None = None
    """Completion tokens the provider reported; None when it reported no usage."""
    cost_usd: float | None = None
    """Cost in USD by litellm's price map; None where the price is unknown."""
    finish_reason: str | None = None
    """Why the provider stopped generating, where it says."""
    logprobs: list[TokenLogprob] | None = None
    """Per-token log-probabilities, when asked for and given."""
    response_model: str | None = None
    """The model id the provider reported."""
    endpoint: str | None = None
    """Which endpoint answered, without secrets (see `providers.endpoint`)."""
    replayed: bool = False
    """True when this reply came from the cache: its figures are the original ones, nothing was spent."""


_unpriced: set[tuple[str, str | None, int]] = set()
"""(model, reported model, size of litellm's price map) found without a price: asking again would raise
and catch the same error on every call. A price registered later grows the map and so misses this set."""


def cost_of(model: str, response: Any, *, own: bool = False) -> float | None:
    """The reply's cost by litellm's price map: 0.0 for promptlab's in-process models (`own`), None when
    unknown.

    litellm prices a response it made itself while logging it (`_hidden_params['response_cost']`): that
    figure is used rather than pricing the same response twice.
    """
    if own:
        return 0.0  # in-process models cost nothing by construction
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        priced = hidden["response_cost"]
        return None if priced is None else float(priced)
    lm = litellm()
    seen = (model, getattr(response, "model", None), len(lm.model_cost))
    if seen in _unpriced:
        return None
    try:
        return float(lm.completion_cost(completion_response=response))
    except Exception:
        _unpriced.add(seen)
        return None  # litellm does not know this model's price: unknown, not zero


def tokens_of(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a reported usage, when it is usage: both counts whole numbers >= 0 (not
    a bool, a string, a fraction or a negative), and not both zero (what litellm fills in for a reply without
    usage: a chat request has at least one prompt token). Anything else is unknown (None), never counted."""
    if usage is None:
        return None
    get = usage.get if isinstance(usage, dict) else lambda name: getattr(usage, name, None)
    prompt, completion = get("prompt_tokens"), get("completion_tokens")
    if type(prompt) is not int or type(completion) is not int or prompt < 0 or completion < 0:
        return None
    return None if prompt == completion == 0 else (prompt, completion)


def reply_of(model: str, response: Any, *, own: bool = False, usage: bool = True) -> Reply:
    """The Reply in a litellm ModelResponse for a call to `model` (`own`: an in-process model). Usage the
    provider did not send, or sent as something that is not usage (`tokens_of`), is unknown (None), and so is
    the cost; with `usage` False (a stream that carried none) it is unknown too."""
    reported: Any = getattr(response, "usage", None) if usage else None
    counts = tokens_of(reported)
    if own and counts is None and reported is not None and getattr(reported, "prompt_tokens", None) == 0:
        counts = (0, 0)  # an in-process model may count zero tokens: its own count, and it costs nothing
    choice = response.choices[0]
    cost = cost_of(model, response, own=own) if counts is not None or own else None
    return Reply(
        text=choice.message.content or "",
        input_tokens=counts[0] if counts is not None else None,
        output_tokens=counts[1] if counts is not None else None,
        cost_usd=cost if cost is None or (math.isfinite(cost) and cost >= 0) else None,
        finish_reason=getattr(choice, "finish_reason", None),
        logprobs=logprobs_of(getattr(choice, "logprobs", None)),
        response_model=reported_model(model, response),
        endpoint=endpoint(model, response),
    )


__all__ = ["Reply", "cost_of", "reply_of", "tokens_of"]
