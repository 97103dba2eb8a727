"""#28 items 6-9: one rule for what a reply is (`promptlab.llm.call.wire`), the same on the direct transport and through
litellm: each shape of body gets the same answer (a reply, or the same invalid reply, retried alike), a gzip body
is bounded after inflating, a lone surrogate is stored and replayed, a stream of only [DONE] is no reply."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Raw, Reply

import promptlab as pl
from promptlab.errors import ProviderError
from promptlab.llm.call.settings import Settings

TRANSPORTS = ["auto", "litellm"]
DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000


def body(content: Any = "hi", **over: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        **over,
    }


SHAPES: dict[str, tuple[Raw, str]] = {
    # shape: (what the server sends, what the call gives: "text=<text> in=<input tokens>" or the invalid reply's words)
    "deep-json": (Raw(DEEP), "JSON nested deeper than 64 levels"),
    "deep-in-a-field": (Raw(json.dumps(body())[:-1] + ', "x": ' + DEEP + "}"), "JSON nested deeper than 64 levels"),
    "list-content": (Raw(body(["a"])), "its message content is not text"),
    "number-content": (Raw(body(5)), "its message content is not text"),
    "error-in-a-200": (Raw({"error": {"message": "overloaded"}}), "the server answered 200 with an error"),
    "byte-order-mark": (Raw(b"\xef\xbb\xbf" + json.dumps(body()).encode()), "text='hi' in=3"),
    "string-usage": (Raw(body(usage={"prompt_tokens": "3", "completion_tokens": "x"})), "text='hi' in=None"),
    "fraction-usage": (
        Raw(body(usage={"prompt_tokens": 3.5, "completion_tokens": 2})),
        "usage.prompt_tokens is 3.5, out",
    ),
    "negative-usage": (
        Raw(body(usage={"prompt_tokens": -(10**6), "completion_tokens": 2})),
        "usage.prompt_tokens is -1000000, out of range",
    ),
    "huge-usage": (
        Raw(body(usage={"prompt_tokens": 3, "completion_tokens": 10**30})),
        "usage.completion_tokens is 1e+30, out of range",
    ),
    "lone-surrogate": (Raw(json.dumps(body("a\ud83d"))), "text='a\ufffd' in=3"),
}


def outcome(server: FaultServer, transport: str, **kw: Any) -> tuple[str, int]:
    settings = Settings(transport=transport, retries=1, backoff_s=0.001, timeout_s=10, deadline_s=30)
    try:
        c = pl.complete(server.model, "hi", api_base=server.url, api_key="sk-x", settings=settings, **kw)
    except ProviderError as e:
        return e.cause, server.requests
    return f"text={c.text!r} in={c.input_tokens}", server.requests


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_gets_one_answer_on_both_transports(shape: str) -> None:
    sent, expected = SHAPES[shape]
    seen = {}
    for transport in TRANSPORTS:
        with FaultServer(default=sent) as server:
            seen[transport] = outcome(server, transport, cache=False)
    assert seen["auto"] == seen["litellm"], seen
    said, requests = seen["auto"]
    assert expected in said, seen
    # an invalid reply is retried, on both; a count out of range is not (the server would count the same way)
    assert requests == (1 if said.startswith("text=") or "out of range" in said else 2)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_gzip_body_is_bounded_after_it_inflates(transport: str) -> None:
    inflated = json.dumps(body("x" * (64 * 2**20))).encode()  # 64 MiB of reply in about 64 KiB of gzip
    bomb = Raw(gzip.compress(inflated, 9), headers={"Content-Encoding": "gzip"})
    with FaultServer(default=bomb) as server:
        said, requests = outcome(server, transport, cache=False)
    assert "larger than the cap of 8388608 bytes" in said and requests == 1  # refused, not read again


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_small_gzip_reply_is_read(transport: str) -> None:
    small = Raw(gzip.compress(json.dumps(body("zipped")).encode()), headers={"Content-Encoding": "gzip"})
    with FaultServer(default=small) as server:
        assert outcome(server, transport, cache=False) == ("text='zipped' in=3", 1)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_lone_surrogate_is_stored_and_replayed(transport: str, tmp_path: Path) -> None:
    with FaultServer(default=SHAPES["lone-surrogate"][0]) as server:
        first = outcome(server, transport, cache=tmp_path)
        again = outcome(server, transport, cache=tmp_path)
    assert first == again == ("text='a\ufffd' in=3", 1)  # the second from the cache, no request


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_half_an_emoji_pair_is_replaced_plain_and_streamed_and_replays(
    transport: str, streamed: bool, tmp_path: Path
) -> None:
    """The lone surrogate in a Reply the server sends (plain, or as a stream's last piece) reaches neither the
    record nor `on_token`: both are text UTF-8 can write, and the stored reply replays without a request."""
    pieces: list[str] = []
    kw: dict[str, Any] = {"on_token": pieces.append} if streamed else {}
    with FaultServer(default=Reply("ab\ud83d", prompt_tokens=3, pieces=3)) as server:
        first = outcome(server, transport, cache=tmp_path, **kw)
        again = outcome(server, transport, cache=tmp_path, **kw)
        assert server.streamed == (1 if streamed else 0)
    assert first == again == ("text='ab\ufffd' in=3", 1)  # the second from the cache, no request
    if streamed:  # the pieces too, once as they came and once replayed whole
        assert pieces == ["a", "b", "\ufffd", "ab\ufffd"], pieces


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stream_of_only_done_is_no_reply(transport: str) -> None:
    only_done = Raw(b"data: [DONE]\n\n", content_type="text/event-stream")
    with FaultServer(default=only_done) as server:
        said, requests = outcome(server, transport, cache=False, on_token=lambda piece: None)
    assert "no choice" in said and requests == 2
