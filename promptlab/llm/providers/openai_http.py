"""The direct transport: chat requests to an OpenAI-compatible endpoint over one shared aiohttp session.

More in docs/servers.md, section "promptlab.llm.providers.openai_http".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..call.failures import (
    NO_CHOICE,
    NO_END,
    NOT_UTF8,
    InvalidReply,
    redirected,
    status_error,
    too_big,
    transport_error,
)
from ..call.wire import chunk_of, completion_of
from .litellm_lazy import litellm
from .resolved import ResolvedModel

if TYPE_CHECKING:
    import aiohttp

PLAIN_PARAMS = frozenset(
    {
        "model",
        "messages",
        "temperature",
        "max_tokens",
        "top_p",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logprobs",
        "top_logprobs",
        "response_format",
        "user",
        # how the request is made, not what it asks
        "api_key",
        "api_base",
        "base_url",
        "timeout",
        "num_retries",
        "max_retries",
    }
)
"""Request fields the direct transport handles; a request with any other goes through litellm."""
NOT_SENT = frozenset({"api_key", "api_base", "base_url", "timeout", "num_retries", "max_retries"})
"""Fields that shape the HTTP request rather than its JSON body."""
MESSAGE_FIELDS = frozenset({"role", "content"})
"""The fields of a plain text message, which litellm passes through unchanged (any other: litellm)."""
EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True)
class Route:
    """Where and how a request is posted."""

    model: ResolvedModel
    """The model the request is for (an `openai/<name>` one: `name` is what the body names)."""
    url: str
    """The chat completions URL."""
    api_base: str
    """The api_base the request goes to."""
    given_base: str | None
    """The api_base the call gave (None when it came from the environment): litellm reports it as the
    endpoint, and reports the provider's default endpoint for a base from the environment; so does this."""
    api_key: str
    """The key sent as a bearer token (never stored)."""


@lru_cache(maxsize=256)
def _plain_model(name: str) -> bool:
    """Whether litellm sends chat requests for `openai/<name>` with its plain GPT rules (no renames)."""
    lm = litellm()
    try:
        from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig, OpenAIUnknownModelConfig

        config = lm.ProviderConfigManager.get_provider_chat_config(model=name, provider=lm.LlmProviders.OPENAI)
    except Exception:  # a litellm without these names: let litellm make every request
        return False
    return type(config) in (OpenAIGPTConfig, OpenAIUnknownModelConfig)


@lru_cache(maxsize=256)
def _reported_base(model: str) -> str | None:
    """The api_base litellm reports for a call that gave none (the provider's default endpoint)."""
    try:
        return litellm().get_api_base(model=model, optional_params={})  # type: ignore[no-any-return]
    except Exception:
        return None


def route(model: ResolvedModel, kwargs: dict[str, Any]) -> Route | None:
    """The direct route of a request for `model` (litellm's keyword arguments), or None when litellm must make
    it: the model is not an OpenAI-compatible one, or the request is not a plain chat request."""
    if not model.openai_compatible or not kwargs.keys() <= PLAIN_PARAMS:
        return None
    for m in kwargs.get("messages") or ():
        if not isinstance(m, dict) or not m.keys() <= MESSAGE_FIELDS or not isinstance(m.get("content"), str):
            return None
    lm = litellm()
    if lm.api_base or lm.api_key or lm.openai_key or lm.headers:
        return None  # litellm's global settings would shape the request: let litellm make it
    base = (
        kwargs.get("api_base")
        or kwargs.get("base_url")
        or os.environ.get("OPENAI_BASE_URL")
        or os.environ.get("OPENAI_API_BASE")
    )
    key = kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    if not base or not key or not _plain_model(model.model_id):
        return None
    given = kwargs.get("api_base") or kwargs.get("base_url")
    return Route(
        model=model,
        url=str(base).rstrip("/") + "/chat/completions",
        api_base=str(base),
        api_key=str(key),
        given_base=str(given) if given else None,
    )


def _body(r: Route, kwargs: dict[str, Any], stream: bool) -> bytes:
    body = {k: v for k, v in kwargs.items() if k not in NOT_SENT}
    body["model"] = r.model.model_id
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = weakref.WeakKeyDictionary()
"""Each event loop's aiohttp session (connections belong to one loop); one pool for every endpoint."""
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = weakref.WeakKeyDictionary()
"""A strong reference to each loop's `_closer` (the loop itself keeps only weak ones)."""


async def _session() -> aiohttp.ClientSession:
    """The running loop's aiohttp session."""
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True
        )
        closer = _closer(session)
        await closer.asend(None)
        _closers[loop] = closer
    return session


async def _closer(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Closes a loop's session when the loop shuts down: `asyncio.run` finalizes every live async generator
    (`loop.shutdown_asyncgens`) before closing the loop, and this one then closes the connections."""
    try:
        yield
    finally:
        await session.close()


def _aiohttp_errors() -> contextlib.AbstractContextManager[None]:
    """aiohttp's exceptions as the httpx ones litellm's own aiohttp transport raises for them."""
    try:
        from litellm.llms.custom_httpx.aiohttp_transport import map_aiohttp_exceptions
    except ImportError:  # a litellm without it: aiohttp's exceptions as they are
        return contextlib.nullcontext()
    return map_aiohttp_exceptions()  # type: ignore[no-any-return]


async def _read(http: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body, refused (InvalidReply) once it passes `max_bytes`: reading stops there."""
    if http.content_length is not None and http.content_length > max_bytes:
        raise too_big(max_bytes)
    parts, size = [], 0
    async for part in http.content.iter_chunked(1 << 16):
        size += len(part)
        if size > max_bytes:
            raise too_big(max_bytes)
        parts.append(part)
    return b"".join(parts)


@contextlib.asynccontextmanager
async def _post(r: Route, kwargs: dict[str, Any], stream: bool, max_bytes: int) -> AsyncIterator[Any]:
    """The response to one request; an error status raises litellm's exception for it, and a connection that
    fails (before or while the body is read in the block) litellm's connection or timeout exception."""
    import aiohttp
    import httpx

    session = await _session()
    t = kwargs.get("timeout")
    timeout = aiohttp.ClientTimeout(connect=t, sock_connect=t, sock_read=t)
    headers = {"Authorization": f"Bearer {r.api_key}", "Content-Type": "application/json"}
    try:
        with _aiohttp_errors():
            async with session.post(
                r.url, data=_body(r, kwargs, stream), headers=headers, allow_redirects=False, timeout=timeout
            ) as http:
                if 300 <= http.status < 400:
                    raise redirected(http.status, http.headers.get("Location"))
                if http.status >= 400:
                    content = await _read(http, max_bytes)
                    raise status_error(r.model, http.status, content, http.headers, r.url)
                yield http
    except (httpx.HTTPError, aiohttp.ClientError, OSError) as e:  # TimeoutError is an OSError
        raise transport_error(r.model, e, r.url)  # noqa: B904 (it carries its own chain)


def _response(r: Route, data: dict[str, Any]) -> Any:
    """The litellm ModelResponse of a chat completion, reporting the endpoint as litellm would."""
    response = litellm().ModelResponse(**data)
    base = r.given_base or _reported_base(r.model.target)
    response._hidden_params = {"custom_llm_provider": "openai", "api_base": base}
    return response


async def apost(r: Route, kwargs: dict[str, Any], max_bytes: int) -> Any:
    """Make one plain request; returns a litellm ModelResponse."""
    async with _post(r, kwargs, False, max_bytes) as http:
        content = await _read(http, max_bytes)
    return _response(r, completion_of(content))  # what a reply is: promptlab.llm.call.wire


async def astream(r: Route, kwargs: dict[str, Any], on_token: Callable[[str], None], max_bytes: int) -> Any:
    """Make one streamed request, sending each piece of text to `on_token`; returns a litellm ModelResponse
    of the whole reply (with the usage only when the server sent it)."""
    async with _post(r, kwargs, True, max_bytes) as http:
        kind = http.headers.get("Content-Type", "")
        if EVENT_STREAM not in kind:
            await _read(http, max_bytes)
            if "json" in kind:  # the same request would get the same answer: not retried
                raise InvalidReply(
                    f"a stream was asked for and the server answered one {kind} reply (it ignores "
                    "`stream`; ask it for no tokens)",
                    retryable=False,
                )
            raise InvalidReply(f"a stream was asked for and the server answered {kind or 'no content type'}")
        reader = Events(r.model.model_id, on_token)
        pending: list[bytes] = []  # the start of a line not yet ended
        size = 0
        async for part in http.content.iter_any():
            size += len(part)
            if size > max_bytes:
                raise too_big(max_bytes)
            if b"\n" not in part:
                pending.append(part)
                continue
            *lines, rest = b"".join([*pending, part]).split(b"\n")
            pending = [rest] if rest else []
            if any(reader.line(line) for line in lines):
                break
    return _response(r, reader.completion())


class Events:
    """Reads a chat completion's server-sent events line by line, sending each piece of text on."""

    def __init__(self, model: str, on_token: Callable[[str], None]) -> None:
        self.on_token = on_token
        self.data: list[str] = []
        self.text: list[str] = []
        self.model = model
        self.finish: str | None = None
        self.done = False
        self.usage: dict[str, Any] | None = None
        self.chosen = False
        """Whether any event carried a choice (a stream of only `[DONE]` is no reply)."""

    def line(self, raw: bytes) -> bool:
        """Take one line; True once the stream said [DONE]."""
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError:
            raise InvalidReply(NOT_UTF8) from None
        if line.startswith("data:"):
            self.data.append(line[5:].removeprefix(" "))
        elif not line and self.data:
            event, self.data = "\n".join(self.data), []
            self.event(event)
        return self.done

    def event(self, data: str) -> None:
        if data == "[DONE]":
            self.done = True
            return
        chunk = chunk_of(data)  # what a reply is: promptlab.llm.call.wire
        self.chosen = self.chosen or bool(chunk.get("choices"))
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                self.text.append(piece)
                self.on_token(piece)
            self.finish = choice.get("finish_reason") or self.finish

    def completion(self) -> dict[str, Any]:
        """The whole reply as a chat completion; InvalidReply when the stream did not end (an event cut off
        before its blank line is dropped, as the event-stream standard says)."""
        if not self.chosen:
            raise InvalidReply(NO_CHOICE)
        if self.finish is None and not self.done:
            raise InvalidReply(NO_END)
        data: dict[str, Any] = {
            "id": "chatcmpl-stream",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": self.finish,
                    "message": {"role": "assistant", "content": "".join(self.text)},
                }
            ],
        }
        if self.usage is not None:
            data["usage"] = self.usage
        return data


__all__ = ["EVENT_STREAM", "PLAIN_PARAMS", "Events", "Route", "apost", "astream", "route"]
