"""How one provider request is made: through litellm, or directly to an OpenAI-compatible endpoint.

`fetch` (blocking) and `afetch` (async) take litellm's keyword arguments for one request and return a
`Reply`. `Settings.transport` picks the way: 'auto' sends what `promptlab.llm.direct` can post itself
(a plain chat request to an `openai/<name>` model with an api_base) directly and the rest through litellm;
'litellm' sends everything through litellm. Streamed calls (an `on_token` handler) always go through litellm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import direct
from .providers import litellm
from .reply import Reply, reply_of
from .settings import Settings

TokenHandler = Callable[[str], None]
"""Receives each piece of reply text as it is generated (or the whole text once, for a cache hit)."""


def _direct_route(kwargs: dict[str, Any], settings: Settings, on_token: TokenHandler | None) -> direct.Route | None:
    """The direct route of a request when the settings allow it and it does not stream."""
    if settings.transport != "auto" or on_token is not None:
        return None
    return direct.route(kwargs)


def _streams(kwargs: dict[str, Any], on_token: TokenHandler | None) -> bool:
    return on_token is not None and not kwargs.get("logprobs")  # log-probabilities come with a whole reply only


def fetch(kwargs: dict[str, Any], settings: Settings, on_token: TokenHandler | None) -> Reply:
    """Make one provider request (blocking) and read its reply."""
    model = kwargs["model"]
    way = _direct_route(kwargs, settings, on_token)
    if way is not None:
        return reply_of(model, direct.post(way, kwargs))
    lm = litellm()
    if not _streams(kwargs, on_token):
        response = lm.completion(**kwargs)
        if on_token is not None:
            on_token(response.choices[0].message.content or "")
        return reply_of(model, response)
    assert on_token is not None
    chunks = []
    for chunk in lm.completion(**kwargs, stream=True, stream_options={"include_usage": True}):
        chunks.append(chunk)
        _send_piece(chunk, on_token)
    return reply_of(model, lm.stream_chunk_builder(chunks, messages=kwargs["messages"]))


async def afetch(kwargs: dict[str, Any], settings: Settings, on_token: TokenHandler | None) -> Reply:
    """Make one provider request (async) and read its reply."""
    model = kwargs["model"]
    way = _direct_route(kwargs, settings, on_token)
    if way is not None:
        return reply_of(model, await direct.apost(way, kwargs))
    lm = litellm()
    if not _streams(kwargs, on_token):
        response = await lm.acompletion(**kwargs)
        if on_token is not None:
            on_token(response.choices[0].message.content or "")
        return reply_of(model, response)
    assert on_token is not None
    chunks = []
    stream = await lm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
    async for chunk in stream:
        chunks.append(chunk)
        _send_piece(chunk, on_token)
    return reply_of(model, lm.stream_chunk_builder(chunks, messages=kwargs["messages"]))


def _send_piece(chunk: Any, on_token: TokenHandler) -> None:
    choices = getattr(chunk, "choices", None)
    if choices:
        text = getattr(choices[0].delta, "content", None)
        if text:
            on_token(text)


__all__ = ["TokenHandler", "afetch", "fetch"]
