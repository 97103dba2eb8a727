"""How a failed provider request reads, whichever transport made it: the exception, retried or not, and its cause.

Both transports raise the same exceptions for the same fault, so the protocol (retries, the deadline,
`ProviderError`) treats them alike:
- an HTTP error status becomes litellm's exception for it, built as litellm's OpenAI handler builds it
  (`status_error`), with the response's headers (a `Retry-After` is read from them: `retry_after`);
- a request that got no reply (refused, dropped, timed out, the call's deadline) becomes litellm's connection
  or timeout exception (`transport_error`, `timed_out`);
- a reply that is not one (not UTF-8, not JSON, not a chat completion, a stream with no finish reason and no
  [DONE], the wrong content type, larger than `Settings.max_reply_bytes`) is an `InvalidReply`. litellm turns
  a broken body into an HTTP 500 of its own: `invalid_reply_of` reads that back as the same InvalidReply.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ...errors import MissingKeyError, ProviderError
from ..providers.litellm_lazy import litellm
from ..providers.resolved import ResolvedModel


class InvalidReply(Exception):
    """What came back is not a reply: an infrastructure failure (never cached, never a model's answer),
    retried like a 5xx unless `retryable` is False (a fault the same request would meet again)."""

    def __init__(self, detail: str, *, retryable: bool = True) -> None:
        self.detail = detail
        self.retryable = retryable
        self.paid_text: str | None = None
        """The text of a reply refused for its figures (a count out of range): the provider delivered it and
        bills it, so a spending cap charges its estimate; None for a fault that carried no reply."""
        super().__init__(f"invalid reply: {detail}")


MAX_RETRY_AFTER_S = 86_400.0
"""The longest `Retry-After` a call obeys: a day. A longer one, or one that is not a finite number of seconds,
is out of range: the call fails at once, naming it (also without a deadline, where it would sleep for ever)."""

NOT_UTF8 = "not UTF-8"
NOT_JSON = "not JSON"
NOT_CHAT = "not a chat completion (no choices)"
NO_END = "the stream ended with no finish reason and no [DONE]"
NO_CHOICE = "the stream carried no choice (only [DONE] or usage)"


def too_big(cap: int) -> InvalidReply:
    """A reply larger than `Settings.max_reply_bytes`: not retried (the same request would get it again)."""
    return InvalidReply(f"larger than the cap of {cap} bytes (Settings.max_reply_bytes)", retryable=False)


def redirected(status: int, location: str | None) -> InvalidReply:
    """A 3xx answer to a request: one rule on both transports. A redirect is never followed (it could send the
    request, and its key, to another origin) and never retried (the server would answer the same way): the error
    names where it pointed (scheme, host and path; a query string or a password in it is left out)."""
    where = "no Location"
    if location:
        parts = urlsplit(location)
        host = parts.hostname or ""
        where = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}" if host else parts.path
    return InvalidReply(
        f"the server answered HTTP {status}, a redirect to {where or repr(location)}: not followed (give the final URL "
        "as the api_base)",
        retryable=False,
    )


def transient(e: BaseException) -> bool:
    """Rate limits, timeouts, 5xx, connection errors and invalid replies are retried; nothing else is."""
    if isinstance(e, InvalidReply):
        return e.retryable
    lm = litellm()
    if isinstance(e, (lm.AuthenticationError, lm.BadRequestError, lm.NotFoundError, lm.PermissionDeniedError)):
        return False
    if isinstance(
        e, (lm.RateLimitError, lm.Timeout, lm.APIConnectionError, lm.InternalServerError, lm.ServiceUnavailableError)
    ):
        return True
    status = getattr(e, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def raise_if_auth(model: ResolvedModel, e: BaseException, attempts: int) -> None:
    """Raise MissingKeyError (a key variable `model` needs is unset) or ProviderError when `e` is an
    authentication failure; both name the model as the caller wrote it."""
    if isinstance(e, litellm().AuthenticationError):
        missing, name = model.missing_keys(), model.name
        if missing:
            raise MissingKeyError(name, missing) from e
        raise ProviderError(name, f"authentication failed: {message_of(e)}", attempts=attempts, retryable=False) from e


def retry_after(e: BaseException) -> float | None:
    """The seconds a 429 or 503 asks to wait (its `Retry-After` header: seconds or an HTTP date), if any: as
    the server wrote it, NaN and infinity included (`MAX_RETRY_AFTER_S` bounds it where it is used)."""
    if getattr(e, "status_code", None) not in (429, 503):
        return None
    headers = getattr(e, "litellm_response_headers", None) or getattr(getattr(e, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
        return seconds if math.isnan(seconds) else max(0.0, seconds)  # NaN and inf: out of range (`steps`)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# what the transports raise -------------------------------------------------------------------------------
def sdk_http() -> Any:
    """The HTTP library whose requests and responses the installed OpenAI client's errors carry: `httpx2` from
    openai 3.5x on, `httpx` before."""
    try:
        import httpx2
    except ImportError:
        import httpx

        return httpx
    return httpx2


def status_error(
    model: ResolvedModel, status: int, content: bytes, headers: Mapping[str, str], url: str
) -> BaseException:
    """litellm's exception for an HTTP error status to a request for `model`, built as the OpenAI client and
    litellm build it."""
    import openai

    httpx = sdk_http()
    text = content.decode("utf-8", "replace").strip()
    body: Any = text
    try:
        body = json.loads(text)
        message = f"Error code: {status} - {body}"
    except ValueError:
        message = text or f"Error code: {status}"
    data = body.get("error", body) if isinstance(body, dict) else body
    kinds = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        409: openai.ConflictError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }
    kind = kinds.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    http = httpx.Response(status, headers=list(headers.items()), content=content, request=httpx.Request("POST", url))
    return _mapped(model, kind(message, response=http, body=data))


def transport_error(model: ResolvedModel, e: BaseException, url: str) -> BaseException:
    """litellm's exception for a request for `model` that got no reply (timeout, refused or dropped connection)."""
    import httpx as plain_httpx
    import openai

    sdk = sdk_http()
    request = sdk.Request("POST", url)
    timed = isinstance(e, (plain_httpx.TimeoutException, sdk.TimeoutException, TimeoutError))
    sdk_error = openai.APITimeoutError(request=request) if timed else openai.APIConnectionError(request=request)
    sdk_error.__cause__ = e
    return _mapped(model, sdk_error)


def timed_out(model: ResolvedModel, e: BaseException) -> BaseException:
    """litellm's timeout exception, for a request the call's timeout (or deadline) cut short."""
    return transport_error(model, e if isinstance(e, TimeoutError) else TimeoutError(), "")


def _mapped(model: ResolvedModel, sdk_error: BaseException) -> BaseException:
    """Wrap an OpenAI client error as litellm's OpenAI handler does, then map it as litellm maps it (its
    message names the model the request went to, `model.target`)."""
    from litellm.llms.openai.common_utils import OpenAIError

    http = getattr(sdk_error, "response", None)
    wrapped = OpenAIError(
        status_code=getattr(sdk_error, "status_code", 500),
        message=getattr(sdk_error, "message", str(sdk_error)),
        headers=getattr(sdk_error, "headers", None) or getattr(http, "headers", None),
        body=getattr(sdk_error, "body", None),
    )
    wrapped.__cause__ = sdk_error
    mapped: BaseException
    try:
        mapped = litellm().exception_type(model=model.target, custom_llm_provider="openai", original_exception=wrapped)
    except Exception as e:  # litellm raises the mapped exception
        mapped = e
    if mapped is not wrapped:
        mapped.__cause__ = wrapped  # the chain litellm leaves: mapped <- OpenAIError <- client error <- cause
    return mapped


def _chain(e: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in chain and len(chain) < 12:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "original_exception", None)
    return chain


def invalid_reply_of(e: BaseException) -> InvalidReply | None:
    """The InvalidReply behind an exception litellm raised for a broken body (litellm reads a body that is not
    JSON, not UTF-8 or not a chat completion as an HTTP 500 or a connection error of its own), or None for
    any other exception."""
    import openai

    chain = _chain(e)
    for x in chain:  # read by promptlab's rule before litellm saw it (`promptlab.llm.providers.guarded_http`)
        if isinstance(x, InvalidReply):
            return x
    if not type(e).__module__.startswith("litellm"):
        return None
    if any(
        isinstance(x, (openai.APIStatusError, openai.APIConnectionError))
        and not type(x).__module__.startswith("litellm")
        for x in chain
    ):
        return None  # the server did send a 5xx (the OpenAI client says so), or the connection failed
    text = " ".join(str(x) for x in chain)
    if any(isinstance(x, UnicodeDecodeError) for x in chain) or "codec can't decode" in text:
        return InvalidReply(NOT_UTF8)
    if any(isinstance(x, json.JSONDecodeError) for x in chain) or "Empty or invalid response" in text:
        return InvalidReply(NOT_JSON)
    if "returned 'choices'" in text or "with no 'choices'" in text:  # litellm's wording changed in 1.8x
        return InvalidReply(NOT_CHAT)
    if "Stream ended before a finish_reason" in text:
        return InvalidReply(NO_END)
    return None


# the cause, in words ---------------------------------------------------------------------------------------
_CAUSES: tuple[tuple[str, str], ...] = (
    ("connection refused", "connection refused"),
    ("connectionrefused", "connection refused"),
    ("name or service not known", "host name not resolved"),
    ("nodename nor servname", "host name not resolved"),
    ("temporary failure in name resolution", "host name not resolved"),
    ("server disconnected", "connection dropped by the server before a reply"),
    ("remoteprotocolerror", "connection dropped by the server before a reply"),
    ("payload is not completed", "connection dropped by the server during the reply"),
    ("contentlengtherror", "connection dropped by the server during the reply"),
    ("clientpayloaderror", "connection dropped by the server during the reply"),
    ("connection reset", "connection reset by the server"),
    ("readtimeout", "timed out waiting for the reply"),
    ("timed out", "timed out waiting for the reply"),
    ("timeout", "timed out waiting for the reply"),
)


_REPEATED_KIND = re.compile(r"\b(litellm\.)?(\w+Error): \2: ")


def message_of(e: BaseException) -> str:
    """An exception's message, with the error kind that some litellm versions write twice
    ('litellm.AuthenticationError: AuthenticationError: ...') written once, so every transport reads alike."""
    return _REPEATED_KIND.sub(r"\1\2: ", str(getattr(e, "message", "") or e))


def describe_cause(e: BaseException, timeout: float | None = None) -> str:
    """A short, human cause for a provider exception: an invalid reply, the HTTP status and message, or what
    happened to the connection (refused, dropped, timed out), found by walking the exception's chain."""
    chain = _chain(e)
    invalid = next((x for x in chain if isinstance(x, InvalidReply)), None)
    if invalid is not None:
        return str(invalid)
    if any(isinstance(x, ConnectionRefusedError) for x in chain):
        return "connection refused"
    names = " ".join(type(x).__name__ for x in chain)
    if "Connection" in names or "Timeout" in names:  # litellm gives these a status of 500: look deeper
        blob = " ".join(f"{type(x).__name__} {x}" for x in chain).lower()
        for needle, cause in _CAUSES:
            if needle in blob:
                if cause.startswith("timed out") and timeout is not None:
                    return f"{cause} ({timeout:g}s)"
                return cause
    status = getattr(e, "status_code", None)
    if isinstance(status, int) and status >= 400:
        text = message_of(e).splitlines()[0][:300]
        return f"HTTP {status} {type(e).__name__}: {text}"
    return f"{type(e).__name__}: {str(e)[:300]}"


__all__ = [
    "MAX_RETRY_AFTER_S",
    "NOT_CHAT",
    "NOT_JSON",
    "NOT_UTF8",
    "NO_END",
    "InvalidReply",
    "describe_cause",
    "invalid_reply_of",
    "message_of",
    "raise_if_auth",
    "redirected",
    "retry_after",
    "status_error",
    "timed_out",
    "too_big",
    "transient",
    "transport_error",
]
