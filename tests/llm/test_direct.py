"""The direct transport against loopback servers: for the same reply it gives the same Completion, usage,
cost, cache record and errors as litellm; `Settings.transport` picks the path; anything it does not handle
goes through litellm."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Raw, Reply, fault_server_fixture, free_port  # noqa: F401
from pydantic import BaseModel

import promptlab as pl
from promptlab.errors import ConfigError, ProviderError
from promptlab.llm.cache.location import open_cache
from promptlab.llm.call.settings import Settings
from promptlab.llm.concurrency.limits import Limiter
from promptlab.llm.providers import openai_http
from promptlab.llm.providers.resolved import resolve_model

KEY = "sk-test-direct"
FAST = Settings(backoff_s=0.001, backoff_max_s=0.002, timeout_s=5, deadline_s=20)
VOLATILE = {"latency_s"}


class Verdict(BaseModel):
    score: int


def canned_server(body: dict[str, Any], status: int = 200) -> FaultServer:
    """A started loopback server that answers every request with one fixed JSON body and status."""
    return FaultServer(default=Raw(body, status)).start()


def reply_body(text: str, *, model: str = "gpt-4o-mini-2024-07-18", logprobs: bool = False) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": text}}
    if logprobs:
        choice["logprobs"] = {
            "content": [
                {
                    "token": "7",
                    "logprob": -0.25,
                    "bytes": [55],
                    "top_logprobs": [
                        {"token": "7", "logprob": -0.25, "bytes": [55]},
                        {"token": "8", "logprob": -1.5, "bytes": [56]},
                    ],
                }
            ]
        }
    return {
        "id": "chatcmpl-canned",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290},
    }


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each request the direct transport makes: 'apost' (plain) or 'astream' (streamed)."""
    made: list[str] = []
    apost, astream = openai_http.apost, openai_http.astream

    async def counted_apost(r: openai_http.Route, kwargs: dict[str, Any], max_bytes: int) -> Any:
        made.append("apost")
        return await apost(r, kwargs, max_bytes)

    async def counted_astream(r: openai_http.Route, kwargs: dict[str, Any], on_token: Any, max_bytes: int) -> Any:
        made.append("astream")
        return await astream(r, kwargs, on_token, max_bytes)

    monkeypatch.setattr(openai_http, "apost", counted_apost)
    monkeypatch.setattr(openai_http, "astream", counted_astream)
    return made


@pytest.fixture
def canned() -> Iterator[FaultServer]:
    with FaultServer(default=Raw(reply_body("7"))) as server:
        yield server


def both(
    server_url: str, model: str, tmp_path: Path, *, use_async: bool = False, **kw: Any
) -> tuple[pl.Completion, pl.Completion, Any, Any]:
    """The same call through litellm and through the default transport, each on its own cache."""
    out = []
    for transport in ("litellm", "auto"):
        cache = tmp_path / transport
        settings = Settings(transport=transport, timeout_s=5)
        if use_async:
            c = asyncio.run(
                pl.acomplete(model, "Rate it.", api_base=server_url, api_key=KEY, cache=cache, settings=settings, **kw)
            )
        else:
            c = pl.complete(model, "Rate it.", api_base=server_url, api_key=KEY, cache=cache, settings=settings, **kw)
        out.append((c, open_cache(cache).get(c.key)))
    (slow, slow_stored), (fast, fast_stored) = out
    return slow, fast, slow_stored, fast_stored


def same(a: pl.Completion, b: pl.Completion) -> None:
    assert a.model_dump(exclude=VOLATILE) == b.model_dump(exclude=VOLATILE)


@pytest.mark.parametrize("use_async", [False, True])
def test_same_completion_usage_cost_and_record_as_litellm(
    canned: FaultServer, spy: list[str], tmp_path: Path, use_async: bool
) -> None:
    slow, fast, slow_stored, fast_stored = both(
        canned.url, "openai/gpt-4o-mini", tmp_path, use_async=use_async, max_tokens=5, seed=3, stop=["x"], top_p=0.5
    )
    assert spy == ["apost"]  # one request made directly (the blocking path too), one through litellm
    same(slow, fast)
    same(slow_stored, fast_stored)
    assert (fast.text, fast.input_tokens, fast.output_tokens, fast.finish_reason) == ("7", 1234, 56, "length")
    assert fast.cost_usd is not None and fast.cost_usd > 0  # litellm's price for gpt-4o-mini
    assert fast.response_model == "gpt-4o-mini-2024-07-18"
    assert fast.endpoint == slow.endpoint == f"litellm:openai@{canned.url.split('/')[2]}"
    assert canned.bodies[0] == canned.bodies[1]  # the very same JSON body
    assert canned.headers[1]["authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(fast_stored.stored())


def test_unknown_price_is_none_on_both_paths(spy: list[str], tmp_path: Path) -> None:
    server = canned_server(reply_body("fine", model="my-llama"))
    try:
        slow, fast, _, _ = both(server.url, "openai/my-llama", tmp_path)
    finally:
        server.close()
    assert spy == ["apost"]
    same(slow, fast)
    assert fast.cost_usd is None and fast.input_tokens == 1234


def test_logprobs_and_structured_replies_match(spy: list[str], tmp_path: Path) -> None:
    server = canned_server(reply_body('{"score": 7}', logprobs=True))
    try:
        slow, fast, _, _ = both(
            server.url, "openai/gpt-4o-mini", tmp_path, schema=Verdict, logprobs=True, top_logprobs=2
        )
    finally:
        server.close()
    assert spy == ["apost"]
    same(slow, fast)
    assert fast.parsed == Verdict(score=7)
    assert fast.logprobs is not None and [t.token for t in fast.logprobs[0].top_logprobs] == ["7", "8"]
    assert server.bodies[0] == server.bodies[1] and "response_format" in server.bodies[1]


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("fault", ["429", "500", "503", "drop"])
def test_errors_read_the_same(fault_server: FaultServer, spy: list[str], fault: str, use_async: bool) -> None:
    texts = []
    for transport in ("litellm", "auto"):
        fault_server.script(fault, fault)
        settings = Settings(retries=1, backoff_s=0.001, backoff_max_s=0.002, timeout_s=5, transport=transport)
        with pytest.raises(ProviderError) as info:
            if use_async:  # the async direct path posts over aiohttp, litellm's over its own aiohttp transport
                asyncio.run(
                    pl.acomplete(
                        fault_server.model, "hi", api_base=fault_server.url, api_key=KEY, cache=False, settings=settings
                    )
                )
            else:
                pl.complete(
                    fault_server.model, "hi", api_base=fault_server.url, api_key=KEY, cache=False, settings=settings
                )
        texts.append((str(info.value), info.value.retryable, info.value.attempts))
    assert texts[0] == texts[1], texts
    way = "apost"
    assert spy == [way, way] and fault_server.requests == 4


@pytest.mark.parametrize("status", [400, 401, 404])
def test_refusals_read_the_same_and_are_not_retried(
    status: int, spy: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # a 401 with the key set: 'authentication failed', not 'missing'
    server = canned_server(
        {"error": {"message": "no such thing", "type": "invalid_request_error", "code": status}}, status=status
    )
    seen = []
    try:
        for transport in ("litellm", "auto"):
            with pytest.raises(pl.PromptlabError) as info:
                pl.complete(
                    "openai/gpt-4o-mini",
                    "hi",
                    api_base=server.url,
                    api_key=KEY,
                    cache=False,
                    settings=Settings(backoff_s=0.001, transport=transport),
                )
            seen.append((type(info.value).__name__, str(info.value)))
    finally:
        server.close()
    assert seen[0] == seen[1], seen
    assert len(server.bodies) == 2 and spy == ["apost"]


def test_refused_connection_reads_the_same(spy: list[str]) -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"
    texts = []
    for transport in ("litellm", "auto"):
        with pytest.raises(ProviderError) as info:
            asyncio.run(
                pl.acomplete(
                    "openai/nobody-home",
                    "hi",
                    api_base=base,
                    api_key=KEY,
                    cache=False,
                    settings=Settings(retries=1, backoff_s=0.001, transport=transport),
                )
            )
        texts.append(str(info.value))
    assert texts[0] == texts[1] and "connection refused" in texts[1] and KEY not in texts[1]
    assert spy == ["apost", "apost"]


def test_a_hang_is_bounded_by_the_deadline_on_the_direct_path(fault_server: FaultServer, spy: list[str]) -> None:
    fault_server.script(*["hang"] * 5)
    with pytest.raises(ProviderError) as info:
        pl.complete(
            fault_server.model,
            "hi",
            api_base=fault_server.url,
            api_key=KEY,
            cache=False,
            settings=Settings(retries=5, timeout_s=30, deadline_s=1.0, backoff_s=0.001),
        )
    assert "timed out" in str(info.value) or "deadline" in str(info.value)
    assert spy and set(spy) == {"apost"}


def test_base_and_key_from_the_environment(
    fault_server: FaultServer, spy: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", fault_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fault_server.script(Reply("env routed"), Reply("env routed"))
    slow = pl.complete(fault_server.model, "hi", cache=False, settings=Settings(transport="litellm"))
    fast = pl.complete(fault_server.model, "hi", cache=False)
    assert spy == ["apost"] and fast.text == "env routed"
    same(slow, fast)  # litellm reports the provider's default endpoint for a base from the environment
    assert fault_server.bodies[0] == fault_server.bodies[1]


@pytest.mark.parametrize(
    "case", ["litellm transport", "logit_bias", "extra_headers", "o-series", "no base", "content parts"]
)
def test_what_the_direct_path_leaves_to_litellm(
    fault_server: FaultServer, spy: list[str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    kw: dict[str, Any] = {"api_base": fault_server.url, "api_key": KEY, "cache": False, "settings": FAST}
    model, prompt = fault_server.model, "hi"
    if case == "litellm transport":
        kw["settings"] = Settings(transport="litellm")
    elif case == "logit_bias":  # any parameter outside PLAIN_PARAMS (tools, provider options ...)
        kw["logit_bias"] = {"50256": -100}
    elif case == "extra_headers":
        kw["extra_headers"] = {"X-Team": "a"}
    elif case == "o-series":
        model = "openai/o3-mini"
        kw["temperature"] = 1.0  # the only one litellm lets through for an o-series model
    elif case == "no base":
        kw.pop("api_base")
    elif case == "content parts":
        prompt = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]  # type: ignore[assignment]
    if case == "no base":  # a call would go to api.openai.com: only ask the router
        assert (
            openai_http.route(
                resolve_model(model), {"model": model, "messages": [{"role": "user", "content": "hi"}], "api_key": KEY}
            )
            is None
        )
        return
    pl.complete(model, prompt, **kw)
    assert spy == [] and fault_server.requests == 1


def test_unknown_transport_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="transport"):
        Settings(transport="carrier-pigeon")


def test_limits_follow_each_call_and_a_release_lets_one_in() -> None:
    async def scenario() -> tuple[int, int, list[str]]:
        limiter = Limiter()
        active = {"n": 0, "peak_small": 0, "peak_all": 0}
        order: list[str] = []

        async def one(name: str, limit: int) -> None:
            async with limiter.slot(limit):
                active["n"] += 1
                active["peak_all"] = max(active["peak_all"], active["n"])
                if limit == 1:
                    active["peak_small"] = max(active["peak_small"], active["n"])
                order.append(name)
                await asyncio.sleep(0.01)
                active["n"] -= 1

        wide = [one(f"w{i}", 3) for i in range(6)]
        narrow = [one(f"n{i}", 1) for i in range(3)]
        await asyncio.gather(*wide, *narrow)
        assert limiter.active == 0
        return active["peak_small"], active["peak_all"], order

    peak_small, peak_all, order = asyncio.run(scenario())
    assert peak_all == 3  # the wide calls' own limit, not the narrow calls' 1
    assert peak_small == 1  # a narrow call only ever entered alone
    assert sorted(order) == sorted([f"w{i}" for i in range(6)] + [f"n{i}" for i in range(3)])


def test_a_cancelled_waiter_gives_its_place_back() -> None:
    async def scenario() -> int:
        limiter = Limiter()
        gate = asyncio.Event()

        async def hold() -> None:
            async with limiter.slot(1):
                await gate.wait()

        first = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiting = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiting.cancel()
        gate.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await waiting
        async with limiter.slot(1):  # would hang if the cancelled waiter kept a place
            pass
        return limiter.active

    assert asyncio.run(asyncio.wait_for(scenario(), 5)) == 0


def test_the_default_cache_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLAB_CACHE_DIR", str(tmp_path / "one"))
    first = open_cache()
    assert open_cache() is first
    monkeypatch.setenv("PROMPTLAB_CACHE_DIR", str(tmp_path / "two"))
    assert open_cache().directory == (tmp_path / "two").resolve()


@pytest.mark.parametrize("use_async", [False, True])
def test_a_streamed_call_goes_direct_and_matches_litellm(
    fault_server: FaultServer, spy: list[str], tmp_path: Path, use_async: bool
) -> None:
    """Someone watching tokens gets them over the direct transport (SSE over aiohttp), not through litellm."""
    out = []
    for transport in ("litellm", "auto"):
        fault_server.script(Reply("a streamed answer", 9, 4, model="gpt-4o-mini-2024-07-18", pieces=3))
        pieces: list[str] = []
        kw: dict[str, Any] = {
            "api_base": fault_server.url,
            "api_key": KEY,
            "cache": tmp_path / transport,
            "settings": Settings(transport=transport, timeout_s=5),
            "on_token": pieces.append,
        }
        c = (
            asyncio.run(pl.acomplete("openai/gpt-4o-mini", "Rate it.", **kw))
            if use_async
            else pl.complete("openai/gpt-4o-mini", "Rate it.", **kw)
        )
        out.append((c, pieces))
    (slow, slow_pieces), (fast, fast_pieces) = out
    assert spy == ["astream"] and fault_server.streamed == 2
    assert fast_pieces == slow_pieces == ["a stre", "amed a", "nswer"]
    same(slow, fast)
    assert (fast.text, fast.input_tokens, fast.output_tokens, fast.finish_reason) == ("a streamed answer", 9, 4, "stop")
    assert fast.cost_usd is not None and fast.cost_usd > 0 and fast.response_model == "gpt-4o-mini-2024-07-18"
    assert fault_server.bodies[0] == fault_server.bodies[1]  # the same JSON body, stream options included
    assert fault_server.bodies[1]["stream"] is True and fault_server.bodies[1]["stream_options"] == {
        "include_usage": True
    }


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_an_ignored_stream_is_an_infrastructure_error_naming_the_server(
    fault_server: FaultServer, transport: str
) -> None:
    """A server that answers a streamed request with one plain JSON reply: not an empty reply (the model's
    failure, with made-up usage), but an infrastructure error naming the server; not retried."""
    fault_server.script("plain", "plain")
    with pytest.raises(ProviderError) as info:
        pl.complete(
            fault_server.model,
            "hi",
            api_base=fault_server.url,
            api_key=KEY,
            cache=False,
            settings=Settings(retries=3, backoff_s=0.001, transport=transport),
            on_token=lambda p: None,
        )
    e = info.value
    assert e.infrastructure and not e.retryable and fault_server.requests == 1
    assert f"at {fault_server.host}:" in str(e) and "ignores `stream`" in str(e)
