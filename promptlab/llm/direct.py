"""The direct transport: plain chat requests to an OpenAI-compatible endpoint over one shared HTTP client.

litellm spends about 2-3 ms of CPU on each request (building its request, the OpenAI client, logging,
pricing the reply twice). Against a fast local server (vLLM, llama.cpp's server, Ollama's /v1, a proxy)
that CPU, on the event loop thread, is what limits calls in flight. So, with `Settings.transport="auto"`
(the default), a request that is a plain chat completion for an `openai/<name>` model with an api_base is
posted here directly: `POST <api_base>/chat/completions` with the JSON body litellm would send, on one
`httpx` client per event loop (and one for blocking calls) per endpoint.

Everything observable stays as with litellm: the reply is read into a litellm `ModelResponse`, so text,
usage, cost (litellm's price map; None for an unknown price), the reported model, the endpoint identity and
log-probabilities come out of the same code; an HTTP error or a connection failure becomes the exception
litellm would raise (the same type, status and message, chained to the cause), so retries, the deadline and
`ProviderError` read the same. The API key comes from the call or `OPENAI_API_KEY` and is only sent.

What goes to litellm instead (`route` returns None): any model other than `openai/<name>`, a model litellm
gives its own request rules (o-series, gpt-5), no api_base in the call nor in `OPENAI_BASE_URL` /
`OPENAI_API_BASE`, no API key, litellm's global `api_base`/`api_key`/`headers` set, a streamed call, a
message that is not plain `role`/`content` text, and any parameter outside `PLAIN_PARAMS` (tools, extra
headers, provider options...). `Settings(transport="litellm")` sends every request through litellm.

Blocking requests go over httpx, async ones over aiohttp (one session per event loop; httpx's async pool
costs milliseconds of CPU per call with tens in flight, see `_session`). Connections are not capped here:
the limit on calls in flight is each call's own (`Settings`, enforced by `promptlab.llm.limits`); the blocking
pool keeps up to `KEEPALIVE` idle connections per endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .providers import litellm

if TYPE_CHECKING:
    import aiohttp
    import httpx

PLAIN_PARAMS = frozenset({
    "model", "messages", "temperature", "max_tokens", "top_p", "stop", "seed", "presence_penalty",
    "frequency_penalty", "logprobs", "top_logprobs", "response_format", "user",
    # how the request is made, not what it asks
    "api_key", "api_base", "base_url", "timeout", "num_retries", "max_retries",
})
"""Request fields the direct transport handles; a request with any other goes through litellm."""
NOT_SENT = frozenset({"api_key", "api_base", "base_url", "timeout", "num_retries", "max_retries"})
"""Fields that shape the HTTP request rather than its JSON body."""
MESSAGE_FIELDS = frozenset({"role", "content"})
"""The fields of a plain text message, which litellm passes through unchanged (any other: litellm)."""
KEEPALIVE = 256
"""Idle connections kept per endpoint."""


@dataclass(frozen=True)
class Route:
    """Where and how a request is posted."""

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


def route(kwargs: dict[str, Any]) -> Route | None:
    """The direct route of a request (litellm's keyword arguments), or None when litellm must make it."""
    model = kwargs.get("model")
    if not isinstance(model, str) or not model.startswith("openai/") or not kwargs.keys() <= PLAIN_PARAMS:
        return None
    for m in kwargs.get("messages") or ():
        if not isinstance(m, dict) or not m.keys() <= MESSAGE_FIELDS or not isinstance(m.get("content"), str):
            return None
    lm = litellm()
    if lm.api_base or lm.api_key or lm.openai_key or lm.headers:
        return None  # litellm's global settings would shape the request: let litellm make it
    base = (kwargs.get("api_base") or kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_BASE"))
    key = kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    if not base or not key or not _plain_model(model[len("openai/"):]):
        return None
    given = kwargs.get("api_base") or kwargs.get("base_url")
    return Route(url=str(base).rstrip("/") + "/chat/completions", api_base=str(base), api_key=str(key),
                 given_base=str(given) if given else None)


def _body(kwargs: dict[str, Any]) -> bytes:
    body = {k: v for k, v in kwargs.items() if k not in NOT_SENT}
    body["model"] = body["model"][len("openai/"):]
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def _headers(r: Route) -> dict[str, str]:
    return {"Authorization": f"Bearer {r.api_key}", "Content-Type": "application/json"}


def _timeout(kwargs: dict[str, Any]) -> float:
    t = kwargs.get("timeout")
    return float(t) if t is not None else 600.0


_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = weakref.WeakKeyDictionary()
"""Each event loop's aiohttp session (connections belong to one loop); one pool for every endpoint."""
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = (
    weakref.WeakKeyDictionary()
)
"""A strong reference to each loop's `_closer` (the loop itself keeps only weak ones)."""
_clients: dict[str, httpx.Client] = {}
_clients_lock = threading.Lock()


async def _session() -> aiohttp.ClientSession:
    """The running loop's aiohttp session.

    Async requests go through aiohttp, not httpx: httpcore's pool scans every connection for every queued
    request, which costs milliseconds per call with 64 in flight (measured: 9.5 ms of CPU per call at 64,
    0.2 s of every 0.1 s round trip); aiohttp's pool hands a free connection over in constant time. litellm
    makes its own OpenAI requests over aiohttp too, and its error mapping is reused, so errors read the same.
    """
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True)
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


def _client(r: Route) -> httpx.Client:
    """The process's blocking client for this endpoint (httpx's pool is thread-safe)."""
    with _clients_lock:
        client = _clients.get(r.api_base)
        if client is None:
            import httpx

            limits = httpx.Limits(max_connections=None, max_keepalive_connections=KEEPALIVE)
            client = _clients[r.api_base] = httpx.Client(limits=limits)
        return client


def _response(r: Route, model: str, http: httpx.Response) -> Any:
    """The litellm ModelResponse of a reply, or the exception litellm raises for an HTTP error."""
    if http.status_code >= 400:
        raise _status_error(model, http.status_code, http.content, http)
    return _read(r, model, http.content)


def _read(r: Route, model: str, content: bytes) -> Any:
    """The litellm ModelResponse of a successful reply's body."""
    response = litellm().ModelResponse(**json.loads(content))
    response._hidden_params = {"custom_llm_provider": "openai", "api_base": r.given_base or _reported_base(model)}
    return response


def post(r: Route, kwargs: dict[str, Any]) -> Any:
    """Make one request (blocking); returns a litellm ModelResponse."""
    client = _client(r)
    request = client.build_request("POST", r.url, content=_body(kwargs), headers=_headers(r),
                                   timeout=_timeout(kwargs))
    try:
        http = client.send(request)
    except Exception as e:
        raise _transport_error(kwargs["model"], e, request)  # noqa: B904 (it carries its own chain)
    return _response(r, kwargs["model"], http)


async def apost(r: Route, kwargs: dict[str, Any]) -> Any:
    """Make one request (async); returns a litellm ModelResponse."""
    import aiohttp

    session = await _session()
    t = _timeout(kwargs)
    try:
        with _aiohttp_errors():
            async with session.post(r.url, data=_body(kwargs), headers=_headers(r), allow_redirects=False,
                                    timeout=aiohttp.ClientTimeout(connect=t, sock_connect=t, sock_read=t)) as http:
                status, content = http.status, await http.read()
                headers = list(http.headers.items()) if status >= 400 else []
    except Exception as e:
        raise _transport_error(kwargs["model"], e, _request(r))  # noqa: B904 (it carries its own chain)
    if status >= 400:
        import httpx

        raise _status_error(kwargs["model"], status, content,
                            httpx.Response(status, headers=headers, content=content, request=_request(r)))
    return _read(r, kwargs["model"], content)


def _request(r: Route) -> httpx.Request:
    import httpx

    return httpx.Request("POST", r.url)


def _aiohttp_errors() -> contextlib.AbstractContextManager[None]:
    """aiohttp's exceptions as the httpx ones litellm's own aiohttp transport raises for them."""
    try:
        from litellm.llms.custom_httpx.aiohttp_transport import map_aiohttp_exceptions
    except ImportError:  # a litellm without it: aiohttp's exceptions as they are
        return contextlib.nullcontext()
    return map_aiohttp_exceptions()  # type: ignore[no-any-return]


def _status_error(model: str, status: int, content: bytes, http: httpx.Response) -> BaseException:
    """litellm's exception for an HTTP error status, built as the OpenAI client and litellm build it."""
    import openai

    text = content.decode("utf-8", "replace").strip()
    body: Any = text
    try:
        body = json.loads(text)
        message = f"Error code: {status} - {body}"
    except ValueError:
        message = text or f"Error code: {status}"
    data = body.get("error", body) if isinstance(body, dict) else body
    kinds = {400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
             404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
             429: openai.RateLimitError}
    kind = kinds.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return _mapped(model, kind(message, response=http, body=data))


def _transport_error(model: str, e: BaseException, request: httpx.Request) -> BaseException:
    """litellm's exception for a request that got no reply (timeout, refused or dropped connection)."""
    import httpx
    import openai

    timed_out = isinstance(e, (httpx.TimeoutException, asyncio.TimeoutError))
    sdk_error = openai.APITimeoutError(request=request) if timed_out else openai.APIConnectionError(request=request)
    sdk_error.__cause__ = e
    return _mapped(model, sdk_error)


def _mapped(model: str, sdk_error: BaseException) -> BaseException:
    """Wrap an OpenAI client error as litellm's OpenAI handler does, then map it as litellm maps it."""
    from litellm.llms.openai.common_utils import OpenAIError

    http = getattr(sdk_error, "response", None)
    wrapped = OpenAIError(status_code=getattr(sdk_error, "status_code", 500),
                          message=getattr(sdk_error, "message", str(sdk_error)),
                          headers=getattr(sdk_error, "headers", None) or getattr(http, "headers", None),
                          body=getattr(sdk_error, "body", None))
    wrapped.__cause__ = sdk_error
    mapped: BaseException
    try:
        mapped = litellm().exception_type(model=model, custom_llm_provider="openai", original_exception=wrapped)
    except Exception as e:  # litellm raises the mapped exception
        mapped = e
    if mapped is not wrapped:
        mapped.__cause__ = wrapped  # the chain litellm leaves: mapped <- OpenAIError <- client error <- cause
    return mapped


__all__ = ["KEEPALIVE", "PLAIN_PARAMS", "Route", "apost", "post", "route"]
