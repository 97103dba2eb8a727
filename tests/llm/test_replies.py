"""A reply is valid only when it is one, on every path (#21 items 1-3, 5, 6): the two transports (direct,
litellm) x the two call paths (blocking, async) read every fault the same way, retry it alike, bound a slow
drip by the deadline, honour Retry-After and refuse an oversize reply; nothing invalid is cached."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Item, Reply, Status, fault_server_fixture  # noqa: F401

import promptlab as pl
from promptlab.errors import ProviderError
from promptlab.llm.cache.location import open_cache
from promptlab.llm.call.settings import Settings

KEY = "sk-test-replies"
PATHS = [("auto", False), ("auto", True), ("litellm", False), ("litellm", True)]
"""(transport, async): the four ways a request is made."""
PATH_IDS = ["direct-sync", "direct-async", "litellm-sync", "litellm-async"]


def call(
    server: FaultServer, transport: str, use_async: bool, *, stream: bool = False, **settings: Any
) -> pl.Completion:
    s = Settings(
        **{
            "retries": 1,
            "backoff_s": 0.001,
            "backoff_max_s": 0.002,
            "timeout_s": 10,
            "deadline_s": 30,
            "transport": transport,
            **settings,
        }
    )
    kw: dict[str, Any] = {"api_base": server.url, "api_key": KEY, "cache": False, "settings": s}
    if stream:
        kw["on_token"] = lambda piece: None
    if use_async:
        return asyncio.run(pl.acomplete(server.model, "hi", **kw))
    return pl.complete(server.model, "hi", **kw)


def outcome(server: FaultServer, fault: Item, transport: str, use_async: bool, stream: bool) -> tuple[str, int, bool]:
    """(cause, requests the server got, retryable) of a call whose every request meets `fault`."""
    before = server.requests
    server.script(fault, fault)
    with pytest.raises(ProviderError) as info:
        call(server, transport, use_async, stream=stream)
    server.schedule.clear()
    return info.value.cause, server.requests - before, info.value.retryable


PLAIN_FAULTS = {
    "html": "invalid reply: not JSON",
    "truncated": "invalid reply: not JSON",
    "badutf8": "invalid reply: not UTF-8",
    "notchat": "invalid reply: not a chat completion",
    "cut": "connection dropped by the server during the reply",
    "drop": "connection dropped by the server before a reply",
    "429": "HTTP 429",
    "500": "HTTP 500",
    "503": "HTTP 503",
}


@pytest.mark.parametrize("fault", list(PLAIN_FAULTS))
def test_every_fault_reads_and_retries_the_same_on_the_four_paths(fault_server: FaultServer, fault: str) -> None:
    seen = [outcome(fault_server, fault, transport, use_async, False) for transport, use_async in PATHS]
    assert len(set(seen)) == 1, dict(zip(PATH_IDS, seen, strict=True))
    cause, requests, retryable = seen[0]
    assert cause.startswith(PLAIN_FAULTS[fault]) and requests == 2 and retryable, seen[0]


STREAM_FAULTS = {
    "html": ("a stream was asked for and the server answered text/html", 2),
    "truncated": ("the stream ended with no finish reason and no [DONE]", 2),
    "cut": ("the stream ended with no finish reason and no [DONE]", 2),
    "badutf8": ("not UTF-8", 2),
    "drop": ("connection dropped by the server before a reply", 2),
    "500": ("HTTP 500", 2),
    "plain": ("a stream was asked for and the server answered one application/json reply (it ignores `stream`", 1),
}


@pytest.mark.parametrize("fault", list(STREAM_FAULTS))
def test_a_streamed_reply_is_valid_only_when_it_is_one(fault_server: FaultServer, fault: str) -> None:
    """A 200 HTML page, a stream cut after one piece (no finish reason, no [DONE]), a plain JSON answer to a
    stream: infrastructure errors, never an empty or partial reply (a JSON answer is not retried: the same
    server would answer the same way)."""
    seen = [outcome(fault_server, fault, transport, use_async, True) for transport, use_async in PATHS]
    assert len(set(seen)) == 1, dict(zip(PATH_IDS, seen, strict=True))
    cause, requests, retryable = seen[0]
    text, expected_requests = STREAM_FAULTS[fault]
    assert text in cause and requests == expected_requests and retryable == (expected_requests > 1), seen[0]


@pytest.mark.parametrize(("transport", "use_async"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_broken_reply_is_retried_and_never_cached(
    tmp_path: Path, transport: str, use_async: bool, stream: bool
) -> None:
    with FaultServer(["html", "cut", Reply("the real reply", 7, 3)]) as server:
        s = Settings(retries=3, backoff_s=0.001, backoff_max_s=0.002, timeout_s=10, transport=transport)
        pieces: list[str] = []
        kw: dict[str, Any] = {"api_base": server.url, "api_key": KEY, "cache": tmp_path, "settings": s}
        if stream:
            kw["on_token"] = pieces.append
        c = asyncio.run(pl.acomplete(server.model, "hi", **kw)) if use_async else pl.complete(server.model, "hi", **kw)
        again = pl.complete(server.model, "hi", **kw)
    assert (c.text, c.attempts, c.input_tokens, server.requests) == ("the real reply", 3, 7, 3)
    assert again.cache_hit and again.text == "the real reply"  # the only record is the real reply
    assert server.streamed == (3 if stream else 0)
    if stream:
        assert "".join(pieces).endswith("the real reply")


@pytest.mark.slow
@pytest.mark.parametrize(("transport", "use_async"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_slow_drip_is_cut_at_the_deadline(transport: str, use_async: bool, stream: bool) -> None:
    """One byte every 0.2 s never trips a read timeout; the call still ends at its deadline (it took 64 s)."""
    with FaultServer(default="drip", drip_s=0.2) as server:
        server.script(Reply("warm"))  # the first call of a process imports what the path needs: not timed
        call(server, transport, use_async, stream=stream)
        t0 = time.monotonic()
        with pytest.raises(ProviderError) as info:
            call(server, transport, use_async, stream=stream, retries=10, timeout_s=2, deadline_s=5)
        took = time.monotonic() - t0
    assert took >= 4.5, took  # not cut before the deadline; what cut it is the deadline or the timeout:
    assert "timed out" in info.value.cause or "deadline" in info.value.cause
    assert info.value.attempts == server.requests - 1 >= 2


@pytest.mark.parametrize(("transport", "use_async"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured(transport: str, use_async: bool, status: int) -> None:
    with FaultServer([Status(status, retry_after="1"), Reply("after the wait")]) as server:
        c = call(server, transport, use_async)
    gap = server.times[1] - server.times[0]
    assert c.text == "after the wait" and c.attempts == 2
    assert gap >= 0.95, gap  # the backoff alone is ~1 ms


@pytest.mark.parametrize(("transport", "use_async"), PATHS, ids=PATH_IDS)
def test_a_retry_after_past_the_deadline_fails_at_once(transport: str, use_async: bool) -> None:
    with FaultServer([Status(429, retry_after="60")] * 3) as server:
        with pytest.raises(ProviderError) as info:
            call(server, transport, use_async, retries=4, deadline_s=5)
    assert server.requests == 1  # failed at once: no second request after a wait
    assert "Retry-After" in str(info.value) and "60s" in str(info.value)


def test_retry_after_reads_seconds_and_http_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    class Limited(Exception):
        status_code = 429

        def __init__(self, value: str) -> None:
            self.litellm_response_headers = {"retry-after": value}

    from email.utils import formatdate

    from promptlab.llm.call.failures import retry_after

    assert retry_after(Limited("7")) == 7.0
    now = 1_800_000_000.0  # the clock stands still: a date 10 s ahead is read as 10 s, however busy the machine
    monkeypatch.setattr(time, "time", lambda: now)
    assert retry_after(Limited(formatdate(now + 10, usegmt=True))) == 10.0
    assert retry_after(Limited("soon")) is None
    other = Limited("7")
    other.status_code = 500  # type: ignore[misc]
    assert retry_after(other) is None


@pytest.mark.parametrize(("transport", "use_async"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_reply_over_the_size_cap_is_refused_and_never_stored(
    tmp_path: Path, transport: str, use_async: bool, stream: bool
) -> None:
    with FaultServer(default="big", big_bytes=3 * 2**20) as server:
        s = Settings(retries=2, backoff_s=0.001, timeout_s=10, transport=transport, max_reply_bytes=2**20)
        kw: dict[str, Any] = {"api_base": server.url, "api_key": KEY, "cache": tmp_path, "settings": s}
        if stream:
            kw["on_token"] = lambda piece: None
        with pytest.raises(ProviderError) as info:
            if use_async:
                asyncio.run(pl.acomplete(server.model, "hi", **kw))
            else:
                pl.complete(server.model, "hi", **kw)
    assert "larger than the cap of 1048576 bytes (Settings.max_reply_bytes)" in info.value.cause
    assert server.requests == 1 and not info.value.retryable
    assert len(open_cache(tmp_path)) == 0


def test_a_bad_size_cap_is_a_config_error() -> None:
    with pytest.raises(pl.ConfigError, match="max_reply_bytes"):
        Settings(max_reply_bytes=0)


@pytest.mark.parametrize("transport", ["auto", "litellm"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_usage_a_server_does_not_send_is_unknown(transport: str, stream: bool) -> None:
    """Tokens are never invented: no usage in the reply (or the stream) leaves tokens and cost unknown."""
    with FaultServer(default=Reply("no usage here", usage=False), model="gpt-4o-mini") as server:
        c = call(server, transport, False, stream=stream)
    assert (c.text, c.input_tokens, c.output_tokens, c.cost_usd) == ("no usage here", None, None, None)
