"""How one provider request is made: through litellm, or directly to an OpenAI-compatible endpoint.

`afetch` (async) and `fetch` (blocking) take a `Request` and litellm's keyword arguments for one provider
request and return a `Reply`. `Settings.transport` picks the way: 'auto' posts what `promptlab.llm.direct`
can post itself (a chat request to an `openai/<name>` model with an api_base), plain or streamed, and sends
the rest through litellm; 'litellm' sends everything through litellm. A request is streamed only when the
call has an `on_token` handler (and asks for no log-probabilities, which come with a whole reply only).

Whichever way, the same rules hold:
- the request's `timeout` bounds the whole request, however slowly the reply trickles in (the request is
  cancelled: `asyncio.timeout`); in-process models (`local/...`, `fake/...`) are answered by
  `promptlab.llm.inproc` without litellm, where the timeout is the batching engine's deadline for the sequence;
- a reply is valid only when it is one (`promptlab.llm.failures.InvalidReply` otherwise): a stream must come
  as an event stream and end with a finish reason (or `[DONE]`), and no reply may pass
  `Settings.max_reply_bytes`; usage a stream did not carry is unknown (None), never counted by litellm;
- failures raise the same exceptions (`promptlab.llm.failures`).

Blocking calls make network requests on the call loop thread (`promptlab.llm.loopthread`), so both paths
share this code; in-process models and litellm's `mock_response` are answered in the caller's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from . import direct, inproc
from .failures import NO_END, InvalidReply, invalid_reply_of, timed_out, too_big
from .loopthread import CALLS
from .providers import litellm
from .reply import Reply, reply_of
from .request import Request

TokenHandler = Callable[[str], None]
"""Receives each piece of reply text as it is generated (or the whole text once, for a cache hit)."""


def _streams(kwargs: dict[str, Any], on_token: TokenHandler | None) -> bool:
    return on_token is not None and not kwargs.get("logprobs")  # log-probabilities come with a whole reply only


def fetch(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    """Make one provider request (blocking) and read its reply."""
    if req.own:
        return _checked(req, *inproc.generate(req.target, kwargs, on_token), on_token)
    if "mock_response" in kwargs:
        return _fetch_here(req, kwargs, on_token)
    return CALLS.run(lambda put: afetch(req, kwargs, put), on_token)


async def afetch(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    """Make one provider request (async) and read its reply; the request's timeout bounds all of it."""
    if req.own:
        return _checked(req, *await inproc.agenerate(req.target, kwargs, on_token), on_token)
    try:
        async with asyncio.timeout(kwargs.get("timeout")):
            return await _afetch(req, kwargs, on_token)
    except TimeoutError as e:
        raise timed_out(req.target, e) from e


async def _afetch(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    streams, cap = _streams(kwargs, on_token), req.settings.max_reply_bytes
    way = direct.route(kwargs) if req.settings.transport == "auto" else None
    if way is not None:
        if streams:
            assert on_token is not None
            response = await direct.astream(way, kwargs, on_token, cap)
        else:
            response = await direct.apost(way, kwargs, cap)
        return _checked(req, reply_of(req.target, response, own=req.own), streams, on_token)
    lm = litellm()
    try:
        if not streams:
            return _checked(req, reply_of(req.target, await lm.acompletion(**kwargs), own=req.own), False, on_token)
        assert on_token is not None
        stream = await lm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
        chunks = [chunk async for chunk in _pieces_of(stream, on_token)]
    except Exception as e:
        invalid = invalid_reply_of(e)  # a broken body that litellm read as an HTTP 500 of its own
        if invalid is None:
            raise
        raise invalid from e
    return _checked(req, _streamed(req, kwargs, stream, chunks), True, on_token)


def _fetch_here(req: Request, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Reply:
    """A request made through litellm in this thread (litellm's mock responses)."""
    lm = litellm()
    if not _streams(kwargs, on_token):
        return _checked(req, reply_of(req.target, lm.completion(**kwargs), own=req.own), False, on_token)
    assert on_token is not None
    stream = lm.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks = []
    for chunk in stream:
        chunks.append(chunk)
        _send_piece(chunk, on_token)
    return _checked(req, _streamed(req, kwargs, stream, chunks), True, on_token)


async def _pieces_of(stream: Any, on_token: TokenHandler) -> Any:
    async for chunk in stream:
        _send_piece(chunk, on_token)
        yield chunk


def _send_piece(chunk: Any, on_token: TokenHandler) -> None:
    choices = getattr(chunk, "choices", None)
    if choices:
        text = getattr(choices[0].delta, "content", None)
        if text:
            on_token(text)


def _streamed(req: Request, kwargs: dict[str, Any], stream: Any, chunks: list[Any]) -> Reply:
    """The Reply of a stream litellm read, checked: litellm makes up a finish reason and counts tokens
    itself when the provider sent neither, so both are read from what the provider did send."""
    headers = (getattr(chunks[-1], "_hidden_params", None) or {}).get("additional_headers") or {} if chunks else {}
    kind = str(headers.get("llm_provider-content-type") or "")
    if kind and direct.EVENT_STREAM not in kind:
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
        raise InvalidReply(NO_END)
    sent_usage = any(getattr(c, "usage", None) is not None for c in getattr(stream, "chunks", ()))
    built = litellm().stream_chunk_builder(chunks, messages=kwargs["messages"])
    return reply_of(req.target, built, own=req.own, usage=sent_usage or req.own)


def _checked(req: Request, reply: Reply, streamed: bool, on_token: TokenHandler | None) -> Reply:
    """The reply, refused when it passes the size cap; a reply that was not streamed reaches `on_token` whole."""
    cap = req.settings.max_reply_bytes
    if len(reply.text) > cap // 4 and len(reply.text.encode("utf-8")) > cap:  # a char is at most 4 bytes
        raise too_big(cap)
    if on_token is not None and not streamed:
        on_token(reply.text)
    return reply


__all__ = ["TokenHandler", "afetch", "fetch"]
