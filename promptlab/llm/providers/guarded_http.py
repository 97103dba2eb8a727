"""litellm's HTTP to OpenAI-compatible servers, read by promptlab's rule of what a reply is (`promptlab.llm.call.wire`).

litellm's OpenAI-compatible requests go through the OpenAI SDK's httpx client. `install` hands litellm one
(`litellm.aclient_session`) whose transport, for a chat completions response:
- bounds the body by the call's `Settings.max_reply_bytes` *after* decompression: a gzip body that inflates past
  the cap is refused as soon as it does (the SDK would inflate all of it in memory first); only gzip and deflate
  are offered, so no other encoding is accepted;
- reads a plain body with `wire.completion_of` and hands the SDK the completion it returns (or raises the
  `InvalidReply` it raises, which `failures.invalid_reply_of` finds behind litellm's error), so litellm and the
  direct transport answer every shape of reply the same way.
Streams are bounded the same way and left to litellm to read. Connections are kept per event loop (an httpx
connection belongs to the loop that opened it), as the direct transport keeps its aiohttp sessions.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import weakref
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..call.failures import InvalidReply, redirected, too_big
from ..call.wire import completion_of

REPLY_CAP: contextvars.ContextVar[int] = contextvars.ContextVar("promptlab_reply_cap", default=8 * 2**20)
"""The reply size cap of the call being made (`Settings.max_reply_bytes`), set around litellm's request."""
OFFERED = "gzip, deflate"
ENCODED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def _inflater(encoding: str) -> Any:
    """A bounded decompressor for the body's Content-Encoding (None for none)."""
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the header
    raise InvalidReply(f"encoded as {encoding!r}, which was not offered ({OFFERED})")


async def _decoded(raw: AsyncIterator[bytes], encoding: str, cap: int) -> AsyncIterator[bytes]:
    """The body's bytes, decompressed, refused (too_big) as soon as they pass `cap`."""
    inflater, size = _inflater(encoding.strip().lower()), 0
    async for part in raw:
        while part:
            if inflater is None:
                piece, part = part, b""
            else:  # never inflates more than the cap leaves room for
                piece, part = inflater.decompress(part, cap + 1 - size), inflater.unconsumed_tail
            size += len(piece)
            if size > cap:
                raise too_big(cap)
            if piece:
                yield piece


def _streamed(request: httpx.Request) -> bool:
    """Whether the request asked for a stream (litellm reads what came back as one, and says what it is not)."""
    try:
        return bool(json.loads(request.content).get("stream"))
    except (ValueError, AttributeError, httpx.RequestNotRead):
        return False


class _Stream(httpx.AsyncByteStream):
    def __init__(self, parts: AsyncIterator[bytes], response: httpx.Response) -> None:
        self._parts, self._response = parts, response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._parts:
            yield part

    async def aclose(self) -> None:
        await self._response.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, one per event loop, with chat completion bodies read by `wire`'s rule."""

    def __init__(self) -> None:
        self._inner: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncHTTPTransport] = (
            weakref.WeakKeyDictionary()
        )

    def _transport(self) -> httpx.AsyncHTTPTransport:
        loop = asyncio.get_running_loop()
        inner = self._inner.get(loop)
        if inner is None:
            inner = self._inner[loop] = httpx.AsyncHTTPTransport()
        return inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        chat = request.url.path.rstrip("/").endswith("/chat/completions")
        if chat:
            request.headers["Accept-Encoding"] = OFFERED
        response = await self._transport().handle_async_request(request)
        if not chat:
            return response
        if 300 <= response.status_code < 400:  # one rule on both transports: named, never followed, never retried
            await response.aclose()
            raise redirected(response.status_code, response.headers.get("location"))
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ENCODED]
        parts = _decoded(response.aiter_raw(), response.headers.get("content-encoding", ""), REPLY_CAP.get())
        kind = response.headers.get("content-type", "")
        if response.status_code >= 300 or "event-stream" in kind or _streamed(request):
            return httpx.Response(response.status_code, headers=headers, stream=_Stream(parts, response))
        body: bytes | None = None
        try:
            body = b"".join([part async for part in parts])
        except httpx.RemoteProtocolError:
            pass
        finally:
            await response.aclose()
        if body is None:  # the body was cut: named as the direct transport names it (raised here: no chain)
            raise httpx.ReadError("payload is not completed: the connection was dropped during the reply")
        completion = completion_of(body)  # InvalidReply for anything that is not a reply
        return httpx.Response(
            response.status_code, headers=headers, content=json.dumps(completion, ensure_ascii=False).encode()
        )

    async def aclose(self) -> None:
        for inner in list(self._inner.values()):
            await inner.aclose()


_installed: list[httpx.AsyncClient] = []


def install(lm: Any) -> None:
    """Give litellm an httpx client that reads replies by promptlab's rule (once; never over a client the user
    set)."""
    if _installed or getattr(lm, "aclient_session", None) is not None:
        return
    client = httpx.AsyncClient(transport=GuardedTransport(), timeout=None)
    _installed.append(client)
    lm.aclient_session = client


__all__ = ["REPLY_CAP", "GuardedTransport", "install"]
