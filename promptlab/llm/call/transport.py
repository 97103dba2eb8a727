"""How one provider request is made (through litellm, or directly to an OpenAI-compatible endpoint) and what it
returns: a `Reply`, read from a litellm ModelResponse whichever way the request went (`reply_of`), with its cost
from litellm's price map (`cost_of`: None for an unknown price, never 0.0).

More in docs/calls.md, section "promptlab.llm.call.transport".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..concurrency.call_loop import CALLS
from ..local import inprocess
from ..local.fingerprint import hosted_fingerprint
from ..providers import openai_http
from ..providers.guarded_http import REPLY_CAP, install
from ..providers.litellm_lazy import litellm
from ..providers.resolved import ResolvedModel
from .completion import Generated, TokenLogprob, logprobs_of
from .failures import NO_CHOICE, NO_END, InvalidReply, invalid_reply_of, timed_out, too_big
from .replay import NotCached, replay_only
from .request import Request
from .wire import MAX_COST_USD, MAX_TOKENS, tokens_of, whole_text


class Reply(BaseModel):
    """One provider reply, as the protocol needs it (and as a structured call's reply is cached)."""

    text: str
    """The reply's text ('' when the provider sent none)."""
    _whole_text = field_validator("text")(whole_text)  # however it was read: litellm assembles a stream itself
    input_tokens: int | None = Field(None, ge=0, le=MAX_TOKENS)
    """Prompt tokens the provider reported; None when it reported no usage."""
    output_tokens: int | None = Field(None, ge=0, le=MAX_TOKENS)
    """Completion tokens the provider reported; None when it reported no usage."""
    cost_usd: float | None = Field(None, ge=0, le=MAX_COST_USD, allow_inf_nan=False)
    """Cost in USD (the alias's own price, else litellm's price map); None where the price is unknown."""
    finish_reason: str | None = None
    """Why the provider stopped generating, where it says."""
    logprobs: list[TokenLogprob] | None = None
    """Per-token log-probabilities, when asked for and given."""
    response_model: str | None = None
    """The model id the provider reported."""
    endpoint: str | None = None
    """Which endpoint answered, without secrets (see `promptlab.llm.providers.resolved.ResolvedModel.endpoint_of`)."""
    fingerprint: dict[str, Any] | None = None
    """What the reply rests on (`promptlab.llm.local.fingerprint`): the local build, kernels and engine, or the hosted
    model's reported id and system fingerprint; None for a scripted model."""
    replayed: bool = False
    """True when this reply came from the cache: its figures are the original ones, nothing was spent."""


_unpriced: set[tuple[str, str | None, int]] = set()
"""(model, reported model, size of litellm's price map) found without a price: asking again would raise
and catch the same error on every call. A price registered later grows the map and so misses this set."""


def cost_of(model: ResolvedModel, response: Any) -> float | None:
    """The cost of `model`'s reply by litellm's price map: 0.0 for promptlab's in-process models, None when
    unknown.

    litellm prices a response it made itself while logging it (`_hidden_params['response_cost']`): that
    figure is used rather than pricing the same response twice.
    """
    if model.in_process:
        return 0.0  # in-process models cost nothing by construction
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        priced = hidden["response_cost"]
        return None if priced is None else float(priced)
    lm = litellm()
    seen = (model.target, getattr(response, "model", None), len(lm.model_cost))
    if seen in _unpriced:
        return None
    try:
        return float(lm.completion_cost(completion_response=response))
    except Exception:
        _unpriced.add(seen)
        return None  # litellm does not know this model's price: unknown, not zero


def bounded_cost(cost: float | None) -> float | None:
    """A reply's cost as priced: None when unknown, negative or not finite (a spending cap estimates it).

    Raises:
        InvalidReply: a cost past MAX_COST_USD (not retried)."""
    if cost is None or not math.isfinite(cost) or cost < 0:
        return None
    if cost > MAX_COST_USD:
        raise InvalidReply(f"cost is {cost:.3g} USD, out of range (at most {MAX_COST_USD:,.0f} USD)", retryable=False)
    return cost


def reply_cost(model: ResolvedModel, response: Any, counts: tuple[int, int] | None) -> float | None:
    """A reply's cost, bounded where it is computed: by the alias's own price when it sets one (None without
    counts), else 0.0 for an in-process model, else by litellm's price map (None without counts).

    Raises:
        InvalidReply: the cost is past MAX_COST_USD, whichever price made it (not retried)."""
    if model.price is not None:
        return bounded_cost(None if counts is None else model.price.cost(*counts))
    if model.in_process:
        return 0.0
    return bounded_cost(None if counts is None else cost_of(model, response))


def reply_of(model: ResolvedModel, response: Any, *, usage: bool = True) -> Reply:
    """The Reply in a litellm ModelResponse for a call to `model`. Usage the provider did not send, or sent as
    something that is not usage (`wire.tokens_of`), is unknown (None), and so is the cost; with `usage` False
    (a stream that carried none) it is unknown too."""
    own = model.in_process
    reported: Any = getattr(response, "usage", None) if usage else None
    choice = response.choices[0]
    try:
        counts = tokens_of(reported)
        if own and counts is None and reported is not None and getattr(reported, "prompt_tokens", None) == 0:
            counts = (0, 0)  # an in-process model may count zero tokens: its own count, and it costs nothing
        cost = reply_cost(model, response, counts)
        logprobs = logprobs_of(getattr(choice, "logprobs", None))
    except InvalidReply as e:
        e.paid_text = choice.message.content or ""  # delivered and billed: a spending cap charges its estimate
        raise
    said = model.reported_model(response)
    return Reply(
        text=choice.message.content or "",
        input_tokens=counts[0] if counts is not None else None,
        output_tokens=counts[1] if counts is not None else None,
        cost_usd=cost,
        finish_reason=getattr(choice, "finish_reason", None),
        logprobs=logprobs,
        response_model=said,
        endpoint=model.endpoint_of(response),
        fingerprint=None if own else hosted_fingerprint(said, response),
    )


def own_reply(model: ResolvedModel, done: Generated) -> Reply:
    """The Reply of what an in-process model made for `model`: what litellm's custom-provider round trip made of
    it before, without that round trip."""
    return Reply(
        text=done.text,
        input_tokens=done.usage[0],
        output_tokens=done.usage[1],
        cost_usd=0.0,
        finish_reason=done.finish_reason,
        logprobs=done.logprobs,
        response_model=done.model or model.target,
        endpoint=model.endpoint_of(done),
        fingerprint=model.fingerprint(),
    )


TokenHandler = Callable[[str], None]
"""Receives each piece of reply text as it is generated (or the whole text once, for a cache hit)."""


def _streams(kwargs: dict[str, Any], on_token: TokenHandler | None) -> bool:
    return on_token is not None and not kwargs.get("logprobs")  # log-probabilities come with a whole reply only


def fetch(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    """Make one provider request (blocking) and read its reply."""
    if req.resolved.in_process:
        made, streamed = inprocess.generate(req.resolved, kwargs, on_token)
        return _checked(req, own_reply(req.resolved, made), on_token, streamed)
    if "mock_response" in kwargs:
        return _fetch_here(req, kwargs, on_token)
    if replay_only():
        raise NotCached(req)
    return CALLS.run(lambda put: afetch(req, kwargs, put), on_token)


async def afetch(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    """Make one provider request (async) and read its reply; the request's timeout bounds all of it."""
    if req.resolved.in_process:
        made, streamed = await inprocess.agenerate(req.resolved, kwargs, on_token)
        return _checked(req, own_reply(req.resolved, made), on_token, streamed)
    if replay_only():
        raise NotCached(req)
    try:
        async with asyncio.timeout(kwargs.get("timeout")):
            return await _afetch(req, kwargs, on_token)
    except TimeoutError as e:
        raise timed_out(req.resolved, e) from e


async def _afetch(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    streams, cap = _streams(kwargs, on_token), req.settings.max_reply_bytes
    way = openai_http.route(req.resolved, kwargs) if req.settings.transport == "auto" else None
    if way is not None:
        if streams:
            assert on_token is not None
            response = await openai_http.astream(way, kwargs, on_token, cap)
        else:
            response = await openai_http.apost(way, kwargs, cap)
        return _checked(req, reply_of(req.resolved, response), on_token, streams)
    lm = litellm()
    install(lm)  # litellm's OpenAI-compatible replies read by the same rule (`promptlab.llm.providers.guarded_http`)
    token, chunks = REPLY_CAP.set(cap), []
    try:
        if not streams:
            return _checked(
                req,
                reply_of(req.resolved, await lm.acompletion(**kwargs)),
                on_token,
                False,
            )
        assert on_token is not None
        stream = await lm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
        async for chunk in _pieces_of(stream, on_token):
            chunks.append(chunk)
    except Exception as e:
        invalid = invalid_reply_of(e)  # a broken body that litellm read as an HTTP 500 of its own
        if invalid is None:
            raise
        if invalid.detail == NO_END and not _chosen(chunks):
            invalid = InvalidReply(NO_CHOICE)  # as the direct path says it
        raise invalid from e
    finally:
        REPLY_CAP.reset(token)
    return _checked(req, _streamed(req, kwargs, stream, chunks), on_token, True)


def _fetch_here(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    """A request made through litellm in this thread (litellm's mock responses)."""
    lm = litellm()
    if not _streams(kwargs, on_token):
        return _checked(req, reply_of(req.resolved, lm.completion(**kwargs)), on_token, False)
    assert on_token is not None
    stream = lm.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks = []
    for chunk in stream:
        chunks.append(chunk)
        _send_piece(chunk, on_token)
    return _checked(req, _streamed(req, kwargs, stream, chunks), on_token, True)


async def _pieces_of(stream: Any, on_token: TokenHandler) -> Any:
    async for chunk in stream:
        _send_piece(chunk, on_token)
        yield chunk


def _send_piece(chunk: Any, on_token: TokenHandler) -> None:
    choices = getattr(chunk, "choices", None)
    if choices:
        text = getattr(choices[0].delta, "content", None)
        if text:
            on_token(whole_text(text))


def _chosen(chunks: list[Any]) -> bool:
    """Whether any chunk of a stream carried a choice the provider sent (text or a role: litellm adds an empty
    one of its own when it met none)."""
    return any(c.choices and (c.choices[0].delta.content or c.choices[0].delta.role) for c in chunks)


def _streamed(req: Request, kwargs: dict[str, Any], stream: Any, chunks: list[Any]) -> Reply:
    """The Reply of a stream litellm read, checked: litellm makes up a finish reason and counts tokens
    itself when the provider sent neither, so both are read from what the provider did send."""
    headers = (getattr(chunks[-1], "_hidden_params", None) or {}).get("additional_headers") or {} if chunks else {}
    kind = str(headers.get("llm_provider-content-type") or "")
    if kind and openai_http.EVENT_STREAM not in kind:
        if "json" in kind:
            raise InvalidReply(
                f"a stream was asked for and the server answered one {kind} reply (it ignores "
                "`stream`; ask it for no tokens)",
                retryable=False,
            )
        raise InvalidReply(f"a stream was asked for and the server answered {kind}")
    if (
        getattr(stream, "received_finish_reason", None) is None
        and getattr(stream, "intermittent_finish_reason", None) is None
    ):
        raise InvalidReply(NO_END if _chosen(chunks) else NO_CHOICE)  # only [DONE]: no reply, as direct says
    sent_usage = any(getattr(c, "usage", None) is not None for c in getattr(stream, "chunks", ()))
    built = litellm().stream_chunk_builder(chunks, messages=kwargs["messages"])
    return reply_of(req.resolved, built, usage=sent_usage or req.resolved.in_process)


def _checked(req: Request, reply: Reply, on_token: TokenHandler | None, streamed: bool) -> Reply:
    """The reply, refused when it passes the size cap; a reply that was not streamed reaches `on_token` whole."""
    cap = req.settings.max_reply_bytes
    if len(reply.text) > cap // 4 and len(reply.text.encode("utf-8")) > cap:  # a char is at most 4 bytes
        raise too_big(cap)
    if on_token is not None and not streamed:
        on_token(reply.text)
    return reply


__all__ = ["Reply", "TokenHandler", "bounded_cost", "afetch", "cost_of", "fetch", "reply_cost", "reply_of"]
