"""The core call path: cache, structured output, retries, errors, streaming, Jupyter-safety."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Reply
from overlap import InFlight
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.llm.call.completion import FLOOR_LOGPROB, TokenLogprob, TopLogprob, logprobs_of
from promptlab.llm.call.settings import Settings
from promptlab.llm.providers import litellm_lazy as model_names
from promptlab.llm.providers.resolved import resolve_model
from promptlab.llm.providers.scripted import ScriptedReply

FAST = Settings(backoff_s=0.001, backoff_max_s=0.002)


class Verdict(BaseModel):
    score: int = Field(ge=1, le=10)
    reason: str


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_miss_then_hit_adds_no_tokens(cache_dir: Path) -> None:
    m = pl.scripted("hit", ["first answer", "second answer"])
    a = pl.complete(m.name, "Say something", cache=cache_dir)
    b = pl.complete(m.name, "Say something", cache=cache_dir)
    assert (a.cache_hit, b.cache_hit) == (False, True)
    assert b.text == a.text == "first answer"
    assert len(m.requests) == 1
    usage = pl.Usage()
    usage.add(a)
    usage.add(b)
    assert usage.calls == 2 and usage.cache_hits == 1
    assert usage.output_tokens == a.output_tokens == 2
    assert b.billed_output_tokens == 0 and b.billed_cost_usd == 0.0


def test_sample_index_gives_independent_cached_draws(cache_dir: Path) -> None:
    m = pl.scripted("samples", ["draw0", "draw1", "draw2"])
    texts = [pl.complete(m.name, "Pick", temperature=0.9, sample=s, cache=cache_dir).text for s in range(3)]
    assert texts == ["draw0", "draw1", "draw2"]
    again = [pl.complete(m.name, "Pick", temperature=0.9, sample=s, cache=cache_dir) for s in range(3)]
    assert [c.text for c in again] == texts and all(c.cache_hit for c in again)
    assert len({c.key for c in again}) == 3


def test_a_scripted_respond_may_read_the_calls_parameters_and_sample(cache_dir: Path) -> None:
    def draw(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        return f"draw {params['sample']} at temperature {params['temperature']}"

    def by_keyword(messages: list[dict[str, Any]], *, params: dict[str, Any]) -> str:
        return f"sample {params['sample']}"

    m = pl.scripted("sampled", respond=draw)
    texts = [pl.complete(m.name, "Pick", temperature=0.9, sample=s, cache=cache_dir).text for s in range(3)]
    assert texts == ["draw 0 at temperature 0.9", "draw 1 at temperature 0.9", "draw 2 at temperature 0.9"]
    assert pl.complete(pl.scripted("kw", respond=by_keyword).name, "Pick", sample=7, cache=cache_dir).text == "sample 7"
    # a function of the messages alone, or with defaults after them, is called as before
    old = pl.scripted("old", respond=lambda messages, suffix="!": messages[-1]["content"] + suffix)
    assert pl.complete(old.name, "Pick", sample=3, cache=cache_dir).text == "Pick!"


def test_every_generation_parameter_enters_the_key(cache_dir: Path) -> None:
    m = pl.scripted("params", respond=lambda msgs: '{"score": 5, "reason": "r"}')
    keys = {
        pl.complete(m.name, "p", cache=cache_dir).key,
        pl.complete(m.name, "p", temperature=0.5, cache=cache_dir).key,
        pl.complete(m.name, "p", max_tokens=7, cache=cache_dir).key,
        pl.complete(m.name, "p", top_p=0.5, cache=cache_dir).key,
        pl.complete(m.name, "p", system="be brief", cache=cache_dir).key,
        pl.complete(m.name, "p", schema=Verdict, cache=cache_dir).key,
    }
    assert len(keys) == 6


def test_api_keys_and_base_urls_never_reach_key_or_disk(cache_dir: Path) -> None:
    secret, host = "sk-test-SECRET-4242", "https://secret-gateway.example.internal"
    m = pl.scripted("secret", ["fine", "fine again"])
    a = pl.complete(m.name, "hello", cache=cache_dir, api_key=secret, api_base=host)
    b = pl.complete(m.name, "hello", cache=cache_dir)  # same request without them: same key, a hit
    assert b.cache_hit and a.key == b.key
    assert secret not in a.key and secret not in a.model_dump_json()
    for path in cache_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data, path
            assert host.encode() not in data, path


def test_errors_are_never_cached(cache_dir: Path) -> None:
    lm = model_names.litellm()
    m = pl.scripted(
        "boom", [lm.BadRequestError("provider refused", model="fake/boom", llm_provider="fake"), "recovered"]
    )
    with pytest.raises(pl.ProviderError, match="provider refused"):
        pl.complete(m.name, "q", cache=cache_dir, settings=FAST)
    c = pl.complete(m.name, "q", cache=cache_dir, settings=FAST)
    assert c.text == "recovered" and not c.cache_hit


def test_corrupted_entry_is_a_logged_miss(cache_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = pl.scripted("corrupt", ["one", "two"])
    first = pl.complete(m.name, "q", cache=cache_dir)
    store = pl.open_cache(cache_dir)
    store._dc.set(first.key, "{not json at all")
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        again = pl.complete(m.name, "q", cache=cache_dir)
    assert again.text == "two" and not again.cache_hit
    assert "corrupted" in caplog.text
    assert pl.complete(m.name, "q", cache=cache_dir).cache_hit  # rewritten cleanly


def test_parse_error_carries_raw_text_and_attempts(cache_dir: Path) -> None:
    bad = ["not json", '{"score": 99, "reason": "too high"}', '```json\n{"score": \n```']
    m = pl.scripted("bad-json", bad)
    with pytest.raises(pl.ParseError) as info:
        pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir, settings=Settings(parse_attempts=3))
    err = info.value
    assert [a["raw"] for a in err.attempts] == bad
    assert "score" in err.attempts[1]["error"] and err.raw == bad[-1]
    # the re-ask shows the model its reply and the problem
    assert m.requests[1]["messages"][-2] == {"role": "assistant", "content": "not json"}
    assert "could not be used" in m.requests[1]["messages"][-1]["content"]
    # the replies (not the error) are cached: a replay fails the same way without asking the model again
    with pytest.raises(pl.ParseError) as again:
        pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir, settings=Settings(parse_attempts=3))
    assert again.value.attempts == err.attempts and len(m.requests) == 3
    # with more attempts allowed, the replay goes on past the cached replies to a fresh one
    m.queue('{"score": 6, "reason": "fixed"}')
    c = pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir, settings=Settings(parse_attempts=4))
    assert c.parsed == Verdict(score=6, reason="fixed") and len(m.requests) == 4


def test_structured_reply_repaired_on_a_later_attempt(cache_dir: Path) -> None:
    m = pl.scripted("repair", ['{"score": 0}', 'Here you go:\n```json\n{"score": 7, "reason": "clear"}\n```'])
    c = pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir)
    assert c.parsed == Verdict(score=7, reason="clear") and c.attempts == 2
    hit = pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir)
    assert hit.cache_hit and hit.parsed == c.parsed


def test_schema_told_in_prompt_when_provider_has_no_native_support(cache_dir: Path) -> None:
    m = pl.scripted("no-native", ['{"score": 3, "reason": "ok"}'], native_schema=False)
    pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir)
    req = m.requests[0]
    assert "response_format" not in req["params"]
    assert '"score"' in req["messages"][-1]["content"] and "JSON schema" in req["messages"][-1]["content"]


def test_rate_limit_is_retried_then_succeeds(cache_dir: Path) -> None:
    lm = model_names.litellm()
    m = pl.scripted("429", [lm.RateLimitError("slow down", llm_provider="fake", model="fake/429"), "done"])
    c = pl.complete(m.name, "q", cache=cache_dir, settings=FAST)
    assert c.text == "done" and c.attempts == 2 and len(m.requests) == 2


def test_retries_are_bounded(cache_dir: Path) -> None:
    lm = model_names.litellm()
    errors = [lm.RateLimitError("slow down", llm_provider="fake", model="fake/x") for _ in range(5)]
    m = pl.scripted("429-forever", errors)
    with pytest.raises(pl.ProviderError) as info:
        pl.complete(m.name, "q", cache=cache_dir, settings=Settings(retries=2, backoff_s=0.001))
    assert info.value.retryable and info.value.attempts == 3 and len(m.requests) == 3


def test_authentication_error_is_not_retried(cache_dir: Path) -> None:
    lm = model_names.litellm()
    m = pl.scripted("401", [lm.AuthenticationError("bad key", llm_provider="fake", model="fake/401"), "never"])
    with pytest.raises(pl.ProviderError, match="authentication") as info:
        pl.complete(m.name, "q", cache=cache_dir, settings=FAST)
    assert not info.value.retryable and len(m.requests) == 1


def test_missing_key_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(pl.MissingKeyError, match="OPENAI_API_KEY"):
        pl.complete("gpt-4o-mini", "hi", cache=cache_dir)
    with pytest.raises(pl.MissingKeyError, match="ANTHROPIC_API_KEY"):
        pl.complete("anthropic/claude-3-5-haiku-latest", "hi", cache=cache_dir)


def test_unknown_model_says_how_models_are_named(cache_dir: Path) -> None:
    with pytest.raises(pl.UnknownModelError) as info:
        pl.complete("nonexistent-model-xyz", "hi", cache=cache_dir)
    text = str(info.value)
    assert "nonexistent-model-xyz" in text and "local/smollm2" in text and "gpt-4o-mini" in text
    with pytest.raises(pl.UnknownModelError, match="fake/nobody"):
        pl.complete("fake/nobody", "hi", cache=cache_dir)
    with pytest.raises(pl.UnknownModelError, match="no GGUF file"):
        pl.complete("local/does/not/exist.gguf", "hi", cache=cache_dir)


def test_cost_known_for_priced_models_and_none_for_unknown_prices(cache_dir: Path) -> None:
    priced = pl.complete("gpt-4o-mini", "hi", cache=cache_dir, mock_response="hello")
    assert priced.cost_usd is not None and priced.cost_usd > 0
    unpriced = pl.complete("openai/promptlab-unpriced-model", "hi", cache=cache_dir, mock_response="hello")
    assert unpriced.cost_usd is None
    usage = pl.Usage()
    usage.add(priced)
    usage.add(unpriced)
    assert usage.cost_usd is None  # a sum with an unknown part is unknown


def test_sync_complete_works_inside_a_running_event_loop(cache_dir: Path) -> None:
    m = pl.scripted("jupyter", ["from inside a loop"])

    async def notebook_cell() -> str:
        return pl.complete(m.name, "q", cache=cache_dir).text  # what a user types in a Jupyter cell

    assert asyncio.run(notebook_cell()) == "from inside a loop"


def test_async_concurrency_is_limited_per_model(cache_dir: Path) -> None:
    calls = InFlight(2)  # each call waits until 2 are in flight: the peak the limit allows, however busy the machine

    def slow(messages: list[dict]) -> str:
        with calls.call():
            time.sleep(0.01)  # a third call, were the limit passed, has time to enter
        return "ok"

    m = pl.scripted("limited", respond=slow)

    async def many() -> list[pl.Completion]:
        settings = Settings(max_concurrency=2)
        return await asyncio.gather(
            *[pl.acomplete(m.name, f"q{i}", cache=cache_dir, settings=settings) for i in range(6)]
        )

    assert len(asyncio.run(many())) == 6
    assert calls.peak == 2


def test_streaming_sends_pieces_and_a_hit_sends_the_whole_text(cache_dir: Path) -> None:
    m = pl.scripted("stream", ["one two three"])
    pieces: list[str] = []
    c = pl.complete(m.name, "q", cache=cache_dir, on_token=pieces.append)
    assert "".join(pieces) == c.text == "one two three" and len(pieces) == 3
    assert c.output_tokens == 3
    pieces.clear()
    assert pl.complete(m.name, "q", cache=cache_dir, on_token=pieces.append).cache_hit
    assert pieces == ["one two three"]


@pytest.mark.slow
def test_two_processes_share_one_cache_directory(tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    script = textwrap.dedent(
        """
        import sys, promptlab as pl
        worker = sys.argv[1]
        for i in range(40):
            pl.complete("fake/auto", f"shared question {i}", cache=sys.argv[2])
            pl.complete("fake/auto", f"own question {worker}-{i}", cache=sys.argv[2])
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w), str(cache)]) for w in (1, 2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store = pl.Cache(cache)
    assert len(store) == 40 + 2 * 40
    for key in list(store._dc.iterkeys()):
        assert store.get(key) is not None


@pytest.mark.slow
def test_litellm_price_map_is_not_fetched() -> None:
    code = "import promptlab, os; promptlab.llm.providers.litellm_lazy.litellm(); print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])"
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True"
    assert "cost map fetch" not in out.stderr


@pytest.mark.slow
def test_import_promptlab_stays_light() -> None:
    code = "import sys, promptlab; print(json.dumps(sorted(m for m in ('litellm', 'pandas', 'matplotlib', 'llama_cpp') if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", "import json;" + code], capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout) == []


@pytest.mark.hosted
@pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY (a hosted model)")
def test_hosted_structured_call(cache_dir: Path) -> None:
    c = pl.complete(
        "gpt-4o-mini",
        "Score the prompt 'write a poem' for clarity, 1-10, with a reason.",
        schema=Verdict,
        cache=cache_dir,
        max_tokens=100,
    )
    assert isinstance(c.parsed, Verdict) and c.input_tokens and c.cost_usd is not None


def test_preflight_lists_every_problem_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from promptlab.errors import ConfigError
    from promptlab.llm.call.preflight import preflight

    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    text_file = tmp_path / "notes.gguf"
    text_file.write_text("not weights")
    ok = pl.scripted("preflight-ok", ["x"])
    with pytest.raises(ConfigError) as info:
        preflight(
            [
                "gpt-4o-mini",
                ok.name,
                "anthropic/claude-3-5-haiku-latest",
                f"local/{tmp_path}/missing.gguf",
                "fake/never-registered",
                "gpt-4o-mini",
                f"local/{gguf}",
                f"local/{text_file}",
            ]
        )
    text = str(info.value)
    assert text.startswith("5 model problem(s)")
    assert "notes.gguf is not a GGUF file" in text
    assert "OPENAI_API_KEY" in text and "ANTHROPIC_API_KEY" in text
    assert "missing.gguf" in text and "fake/never-registered" in text
    assert ok.name not in text and str(gguf) + "'" not in text
    preflight([ok.name, "fake/auto", f"local/{gguf}"])  # nothing to complain about
    preflight(["gpt-4o-mini"], params={"api_key": "sk-given"})
    assert ok.requests == []  # nothing was called


def test_errors_say_whether_they_are_infrastructure() -> None:
    from promptlab.errors import ConfigError, MissingKeyError, ParseError, ProviderError

    assert ProviderError("m", "down", attempts=1, retryable=True).infrastructure
    assert MissingKeyError("m", ["K"]).infrastructure and ConfigError("x").infrastructure
    assert not ParseError("m", "S", [{"raw": "", "error": "bad"}]).infrastructure


# --- token log-probabilities and provenance -------------------------------------------------------------

JUDGED = ScriptedReply(
    '{"score": 7}',
    [('{"', -0.01), ("score", -0.02), ('":', -0.01), (" 7", -0.4, {" 7": -0.4, " 8": -1.2, " 6": -2.3}), ("}", 0.0)],
    model="judge-2026-01-01",
)


def test_logprobs_enter_the_key_and_a_replay_returns_the_same_completion(cache_dir: Path) -> None:
    m = pl.scripted("lp-replay", [JUDGED, JUDGED.text])
    c = pl.complete(m.name, "judge", cache=cache_dir, logprobs=True, top_logprobs=2)
    assert c.logprobs is not None and "".join(t.token for t in c.logprobs) == c.text
    value = c.logprobs[3]
    assert (value.token, value.logprob) == (" 7", -0.4)
    assert [(a.token, a.logprob) for a in value.top_logprobs] == [(" 7", -0.4), (" 8", -1.2)]  # the 2 best
    assert (c.response_model, c.endpoint) == ("judge-2026-01-01", "fake:lp-replay")
    hit = pl.complete(m.name, "judge", cache=cache_dir, logprobs=True, top_logprobs=2)
    assert hit.cache_hit and hit.model_dump(exclude={"cache_hit"}) == c.model_dump(exclude={"cache_hit"})
    plain = pl.complete(m.name, "judge", cache=cache_dir)  # not asked for: another key, and none reported
    assert not plain.cache_hit and plain.key != c.key and plain.logprobs is None
    assert m.requests[0]["params"]["logprobs"] is True and m.requests[0]["params"]["top_logprobs"] == 2


def test_stored_completion_is_json_and_round_trips(cache_dir: Path) -> None:
    m = pl.scripted("lp-stored", [JUDGED])
    c = pl.complete(m.name, "judge", cache=cache_dir, logprobs=True, top_logprobs=3)
    data = json.loads(json.dumps(c.stored()))
    assert pl.Completion.model_validate(data) == c
    assert data["logprobs"][3]["top_logprobs"][0] == {"token": " 7", "logprob": -0.4}


def test_unscripted_text_reports_certain_tokens_and_async_matches(cache_dir: Path) -> None:
    m = pl.scripted("lp-plain", respond=lambda msgs: '{"score": 10, "reason": "ok"}')
    c = asyncio.run(pl.acomplete(m.name, "judge", schema=Verdict, cache=cache_dir, logprobs=True, top_logprobs=5))
    assert c.parsed == Verdict(score=10, reason="ok") and c.logprobs is not None
    assert "".join(t.token for t in c.logprobs) == c.text and " 10" in [t.token for t in c.logprobs]
    assert all(t.logprob == 0.0 and [a.token for a in t.top_logprobs] == [t.token] for t in c.logprobs)
    assert (c.response_model, c.endpoint) == ("fake/lp-plain", "fake:lp-plain")
    assert (
        pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir, logprobs=True, top_logprobs=5).logprobs
        == c.logprobs
    )


def test_structured_reask_keeps_the_logprobs_of_the_reply_that_validated(cache_dir: Path) -> None:
    good = ScriptedReply(
        '{"score": 6, "reason": "fine"}',
        [('{"score": ', -0.1), ("6", -0.7, {"6": -0.7, "5": -0.9}), (', "reason": "fine"}', -0.2)],
    )
    m = pl.scripted("lp-reask", ["not json", good])
    c = pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir, logprobs=True, top_logprobs=2)
    assert c.attempts == 2 and c.logprobs is not None and c.logprobs[1].token == "6"
    again = pl.complete(m.name, "judge", schema=Verdict, cache=cache_dir, logprobs=True, top_logprobs=2)
    assert again.cache_hit and again.logprobs == c.logprobs and len(m.requests) == 2


def test_streaming_with_logprobs_sends_the_whole_text_once(cache_dir: Path) -> None:
    m = pl.scripted("lp-stream", [JUDGED])
    pieces: list[str] = []
    c = pl.complete(m.name, "judge", cache=cache_dir, on_token=pieces.append, logprobs=True, top_logprobs=1)
    assert pieces == [c.text] and c.logprobs is not None and c.logprobs[3].top_logprobs[0].token == " 7"


def test_scripted_logprobs_must_spell_the_reply() -> None:
    with pytest.raises(pl.ConfigError, match="spell"):
        ScriptedReply("abc", [("a", -0.1), ("b", -0.1)])


def test_logprobs_of_reads_objects_and_dicts_and_floors_minus_infinity() -> None:
    tokens = logprobs_of(
        {
            "content": [
                {"token": "a", "logprob": float("-inf"), "top_logprobs": [{"token": "b", "logprob": float("-inf")}]}
            ]
        }
    )
    assert tokens == [
        TokenLogprob(token="a", logprob=FLOOR_LOGPROB, top_logprobs=[TopLogprob(token="b", logprob=FLOOR_LOGPROB)])
    ]
    assert logprobs_of(None) is None and logprobs_of({"content": None}) is None


def test_supports_logprobs() -> None:
    pl.scripted("lp-support")
    assert resolve_model("fake/lp-support").logprobs and resolve_model("local/smollm2").logprobs
    assert resolve_model("gpt-4o-mini").logprobs
    assert not resolve_model("anthropic/claude-3-5-haiku-latest").logprobs
    assert not resolve_model("no-such-model-xyz").logprobs


def test_endpoint_identity_keeps_only_the_host(tmp_path: Path) -> None:
    assert (
        resolve_model(
            "openai/m", {"api_base": "https://user:sk-secret@gw.example.com:8443/v1/k-123?key=s"}
        ).endpoint_of()
        == "litellm:openai@gw.example.com:8443"
    )
    assert resolve_model("gpt-4o-mini").endpoint_of() == "litellm:openai"
    weights = tmp_path / "private-dir" / "tiny-q4.gguf"
    weights.parent.mkdir()
    weights.write_bytes(b"GGUF")
    assert resolve_model(f"local/{weights}").endpoint_of() == "local:tiny-q4.gguf"
    assert resolve_model("fake/judge").endpoint_of() == "fake:judge"


def dated_with_logprobs(body: dict[str, Any]) -> Reply:
    """An OpenAI-style reply that reports a dated model and the token logprobs the request asked for."""
    top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in (("8", -0.3), ("9", -1.5))]
    return Reply(
        "8",
        5,
        1,
        model="gpt-4o-mini-2024-07-18",
        logprobs=[{"token": "8", "logprob": -0.3, "bytes": None, "top_logprobs": top[: body.get("top_logprobs") or 0]}],
    )


def test_hosted_provider_logprobs_model_and_endpoint_through_litellm(cache_dir: Path) -> None:
    secret = "sk-loopback-SECRET-77"
    with FaultServer(responder=dated_with_logprobs) as server:
        kwargs = {"api_base": server.url, "api_key": secret, "cache": cache_dir}
        c = pl.complete("openai/gpt-4o-mini", "score it", logprobs=True, top_logprobs=2, **kwargs)
        hit = pl.complete("openai/gpt-4o-mini", "score it", logprobs=True, top_logprobs=2, **kwargs)
    sent = server.bodies[0]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 2 and secret in server.headers[0]["authorization"]
    assert c.text == "8" and c.response_model == "gpt-4o-mini-2024-07-18"
    assert c.endpoint == f"litellm:openai@{server.host}"
    assert c.logprobs == [
        TokenLogprob(
            token="8",
            logprob=-0.3,
            top_logprobs=[TopLogprob(token="8", logprob=-0.3), TopLogprob(token="9", logprob=-1.5)],
        )
    ]
    assert hit.cache_hit and hit.model_dump(exclude={"cache_hit"}) == c.model_dump(exclude={"cache_hit"})
    assert server.requests == 1
    for path in cache_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


def test_a_schema_that_is_not_a_pydantic_model_is_named_before_any_call() -> None:
    """A dict JSON schema raised "TypeError: unhashable type: 'dict'" from the cache key; now a clear error."""
    m = pl.scripted("schema-dict")
    with pytest.raises(ValueError, match=r"schema must be a pydantic model class .*got dict"):
        pl.complete(m.name, "x", schema={"type": "object"})  # type: ignore[arg-type]
    assert m.requests == []
