"""What a reply is: one rule for the bytes an OpenAI-compatible server sends back, applied on both transports.

The direct transport (`promptlab.llm.providers.openai_http`) reads each body with `completion_of` and each streamed event with
`chunk_of`; litellm's requests to such servers read theirs through the same functions
(`promptlab.llm.providers.guarded_http`), before litellm sees them. So a shape of reply gets one answer, whichever way:

- a UTF-8 byte-order mark before the JSON is skipped (it is still UTF-8 JSON); bytes that are not UTF-8, text
  that is not JSON, and JSON nested deeper than `MAX_DEPTH` are not a reply;
- a 200 that carries `{"error": ...}` and no choices is the server's failure, not a reply: retried like a 5xx;
- a chat completion has a list of choices whose first has a `message`; its `content` is text or null (a list or
  a number is not a reply);
- lone UTF-16 surrogates (half an emoji pair, `\\ud83d`) in the text are replaced by U+FFFD, so a reply can be
  stored and re-read (UTF-8 cannot encode a lone surrogate);
- usage that is not usage (`tokens_of`: counts that are not numbers, or both zero) is dropped: the reply
  stands, its tokens and cost are unknown (and a spending cap estimates them);
- a count that is a number out of range (negative, a fraction, NaN, infinite, over `MAX_TOKENS`) is not a
  reply: `InvalidReply` naming the field, not retried (the server would count the same way), and under a
  spending cap the reply's text is charged as an estimate (`InvalidReply.paid_text`).

Anything that is not a reply raises `InvalidReply` naming what it is not.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .failures import NOT_CHAT, NOT_JSON, NOT_UTF8, InvalidReply

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a reply may have (a chat completion needs about 6)."""
BOM = "\ufeff"
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
"""A surrogate code point in a decoded str is always a lone one (a pair decodes to one code point)."""
NOT_TEXT = "not a chat completion (its message content is not text)"
TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"
MAX_TOKENS = 10**9
"""The most tokens one request's prompt or reply may count: a thousand times the largest context window sold
today, and far below 2**53 (where a float stops counting whole numbers) and 2**63 (an int64 column). A reported
count past it is not a count (`tokens_of`)."""
MAX_FIGURE = 2**53
"""The bound of every figure a record holds (a call's tokens summed over its requests, its cost): a float counts
whole numbers exactly up to it, and an int64 column holds it. A stored record past it is not a record."""
MAX_COST_USD = 1e6
"""The most one request may cost: a priced cost past it (from counts within `MAX_TOKENS` at a price of 1 USD per
thousand tokens), whoever set the price (litellm's map, an alias's own price), is not a cost."""
MAX_LATENCY_S = 7 * 86_400.0
"""The most seconds one call may have waited: a week (no call's deadline is longer). A stored latency past it, or
negative, or not finite, is not a latency."""


def _count(name: str, value: Any) -> int | None:
    """A reported token count: the int, None when it is not a number (no count: unknown), or InvalidReply when
    it is a number out of range (negative, a fraction, NaN, infinite, over MAX_TOKENS)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    whole = isinstance(value, int) or (math.isfinite(value) and value.is_integer())
    if not whole or not 0 <= value <= MAX_TOKENS:
        shown = f"{value:.3g}" if isinstance(value, float) or abs(value) > 10**12 else str(value)
        raise InvalidReply(
            f"usage.{name} is {shown}, out of range (a whole number of tokens from 0 to {MAX_TOKENS:,})",
            retryable=False,
        )
    return int(value)


def tokens_of(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a reported usage, when it is usage: both counts whole numbers from 0 to
    `MAX_TOKENS`, and not both zero (what litellm fills in for a reply without usage: a chat request has at least
    one prompt token). Counts that are not numbers (a string, a bool, none) are unknown (None), never counted.

    Raises:
        InvalidReply: a count is a number out of range (negative, a fraction, NaN, infinite, over MAX_TOKENS),
            naming the field; not retried.
    """
    if usage is None:
        return None
    get = usage.get if isinstance(usage, dict) else lambda name: getattr(usage, name, None)
    prompt = _count("prompt_tokens", get("prompt_tokens"))
    completion = _count("completion_tokens", get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    return None if prompt == completion == 0 else (prompt, completion)


def _depth_ok(text: str) -> bool:
    """Whether the JSON text nests no deeper than MAX_DEPTH (brackets inside strings skipped), in one pass."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads(content: bytes | str) -> Any:
    """The JSON value of a body or an event, or InvalidReply (not UTF-8, not JSON, nested too deep)."""
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidReply(NOT_UTF8) from None
    text = content.removeprefix(BOM)
    if text.count("[") + text.count("{") > MAX_DEPTH and not _depth_ok(text):
        raise InvalidReply(TOO_DEEP)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidReply(NOT_JSON) from None


def _server_error(data: dict[str, Any]) -> InvalidReply | None:
    if data.get("error") is not None and not data.get("choices"):
        return InvalidReply(f"the server answered 200 with an error: {str(data['error'])[:300]}")
    return None


def whole_text(value: Any) -> Any:
    """Text with its lone surrogates replaced by U+FFFD (other values as they are): what every reply's text and
    every streamed piece goes through, whichever transport read it (`transport.Reply` and `Completion` apply it
    too, so a text litellm assembled, or a record stored before this rule, is held to it)."""
    return LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


def _usage(data: dict[str, Any], text: str | None) -> None:
    """Drop usage that is not usage; a count out of range raises InvalidReply carrying the reply's text (paid
    for: a spending cap charges its estimate)."""
    try:
        if "usage" in data and tokens_of(data["usage"]) is None:
            del data["usage"]
    except InvalidReply as e:
        e.paid_text = text or ""
        raise


def completion_of(content: bytes | str) -> dict[str, Any]:
    """The chat completion in a reply's body, by the rule above; InvalidReply naming what it is not."""
    data = loads(content)
    if not isinstance(data, dict):
        raise InvalidReply(NOT_CHAT)
    error = _server_error(data)
    if error is not None:
        raise error
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise InvalidReply(NOT_CHAT)
    for choice in choices:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise InvalidReply(NOT_CHAT)
        if message.get("content") is not None and not isinstance(message["content"], str):
            raise InvalidReply(NOT_TEXT)
        message["content"] = whole_text(message.get("content"))
    _usage(data, choices[0]["message"].get("content"))
    return data


def chunk_of(data: str) -> dict[str, Any]:
    """One streamed event's chunk (the `data:` text, not `[DONE]`), by the same rule."""
    chunk = loads(data)
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices", []), list):
        raise InvalidReply(f"a stream event is {NOT_CHAT}")
    error = _server_error(chunk)
    if error is not None:
        raise InvalidReply(f"the stream carried an error: {str(chunk['error'])[:300]}")
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and delta.get("content") is not None:
            if not isinstance(delta["content"], str):
                raise InvalidReply(f"a stream event is {NOT_TEXT}")
            delta["content"] = whole_text(delta["content"])
    _usage(chunk, "")
    return chunk


__all__ = [
    "BOM",
    "MAX_DEPTH",
    "MAX_COST_USD",
    "MAX_FIGURE",
    "MAX_LATENCY_S",
    "MAX_TOKENS",
    "NOT_TEXT",
    "TOO_DEEP",
    "chunk_of",
    "completion_of",
    "loads",
    "tokens_of",
    "whole_text",
]
