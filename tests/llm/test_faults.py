"""Outages and accounting against a loopback fault server: promptlab owns retries (attempts equal real
requests), a per-call deadline, errors that name model, host and cause, single-flight, write-once records,
two processes on one cache, and failed parses that still count what they spent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from fault_server import FaultServer, Reply, fault_server_fixture, free_port  # noqa: F401
from pydantic import BaseModel

import promptlab as pl
from promptlab.errors import ParseError, ProviderError
from promptlab.llm.cache.location import open_cache
from promptlab.llm.call.settings import Settings
from promptlab.llm.concurrency.single_flight import ASYNC_FLIGHTS, THREAD_FLIGHTS
from promptlab.llm.spending.tally import Usage

FAST = Settings(backoff_s=0.001, backoff_max_s=0.002, timeout_s=5, deadline_s=20)
KEY = "sk-test-not-a-real-key"


class Verdict(BaseModel):
    score: int
    reason: str


VERDICT = json.dumps({"score": 7, "reason": "clear"})


def call(server: FaultServer, prompt: str = "hi", **kw: object) -> pl.Completion:
    kw.setdefault("cache", False)
    kw.setdefault("settings", FAST)
    return pl.complete(server.model, prompt, api_base=server.url, api_key=KEY, **kw)  # type: ignore[arg-type]


def test_429_then_ok_is_two_attempts_and_two_requests(fault_server: FaultServer) -> None:
    fault_server.script("429", Reply("fine"))
    c = call(fault_server)
    assert c.text == "fine"
    assert (c.attempts, fault_server.requests) == (2, 2)


@pytest.mark.parametrize("faults", [["500", "503", "drop"], ["503", "429", "500"]])
def test_attempts_equal_real_requests_when_every_retry_fails(fault_server: FaultServer, faults: list[str]) -> None:
    fault_server.script(*faults)
    with pytest.raises(ProviderError) as info:
        call(fault_server, settings=Settings(retries=2, backoff_s=0.001, backoff_max_s=0.002, timeout_s=5))
    assert info.value.attempts == 3 == fault_server.requests  # not 3 x the client's own retries
    assert info.value.infrastructure and info.value.retryable


def test_error_names_model_host_and_http_status(fault_server: FaultServer) -> None:
    fault_server.script(*["500"] * 5)
    with pytest.raises(ProviderError) as info:
        call(fault_server, settings=Settings(retries=1, backoff_s=0.001, backoff_max_s=0.002))
    text = str(info.value)
    assert fault_server.model in text and f"127.0.0.1:{fault_server.port}" in text and "HTTP 500" in text


def test_refused_port_names_host_and_cause() -> None:
    port = free_port()
    with pytest.raises(ProviderError) as info:
        pl.complete(
            "openai/nobody-home",
            "hi",
            api_base=f"http://127.0.0.1:{port}/v1",
            api_key=KEY,
            cache=False,
            settings=Settings(retries=1, backoff_s=0.001, backoff_max_s=0.002),
        )
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text and "connection refused" in text and "openai/nobody-home" in text
    assert info.value.attempts == 2
    assert KEY not in text


def test_dropped_connection_is_retried_and_named(fault_server: FaultServer) -> None:
    fault_server.script("drop", Reply("after the drop"))
    c = call(fault_server)
    assert (c.text, c.attempts, fault_server.requests) == ("after the drop", 2, 2)


def test_hung_provider_is_bounded_by_the_deadline(fault_server: FaultServer) -> None:
    fault_server.script(*["hang"] * 10)
    with pytest.raises(ProviderError) as info:
        call(fault_server, settings=Settings(retries=5, timeout_s=30, deadline_s=1.5, backoff_s=0.001))
    assert "deadline" in info.value.cause  # ended by the 1.5 s deadline, not after retries x the 30 s timeout
    assert "timed out" in str(info.value) or "deadline" in str(info.value)
    assert f"127.0.0.1:{fault_server.port}" in str(info.value)


def test_async_call_owns_its_retries_too(fault_server: FaultServer) -> None:
    fault_server.script("503", "429", Reply("async fine"))
    c = asyncio.run(
        pl.acomplete(fault_server.model, "hi", api_base=fault_server.url, api_key=KEY, cache=False, settings=FAST)
    )
    assert (c.text, c.attempts, fault_server.requests) == ("async fine", 3, 3)


def test_unknown_price_is_none_not_zero(fault_server: FaultServer) -> None:
    fault_server.script(Reply("priced?"))
    c = call(fault_server)
    assert c.cost_usd is None and c.input_tokens == 11
    usage = Usage()
    usage.add(c)
    assert usage.cost_usd is None


def test_in_process_models_stay_free() -> None:
    m = pl.scripted("free-model", ["x"])
    assert pl.complete(m.name, "p", cache=False).cost_usd == 0.0


def test_failed_parse_still_counts_its_requests(fault_server: FaultServer) -> None:
    fault_server.script(Reply("nope", 10, 3), "429", Reply("still nope", 20, 4), Reply("never", 30, 5))
    with pytest.raises(ParseError) as info:
        call(fault_server, schema=Verdict)
    e = info.value
    assert fault_server.requests == 4 == e.requests and len(e.attempts) == 3
    assert (e.input_tokens, e.output_tokens) == (60, 12) and e.cost_usd is None  # unknown price
    assert not e.infrastructure
    usage = Usage()
    usage.add_failure(fault_server.model, e.input_tokens, e.output_tokens, e.cost_usd)
    assert (usage.failed_calls, usage.input_tokens, usage.output_tokens, usage.cost_usd) == (1, 60, 12, None)


def test_loop_totals_count_a_critic_that_never_parsed() -> None:
    from promptlab.loops.creator_critic.config import CreatorCriticConfig
    from promptlab.loops.creator_critic.loop import run_creator_critic
    from promptlab.record import Task

    creator = pl.scripted("acct-creator", respond=lambda m: "V1")
    critic = pl.scripted("acct-critic", respond=lambda m: "not json at all")
    run = run_creator_critic(
        Task(id="t", prompt="Write.", goal="Good."),
        CreatorCriticConfig(model=creator.name, critic_model=critic.name, max_iterations=1),
        settings=Settings(parse_attempts=2),
    )
    creator_tokens = sum(
        s.call.input_tokens or 0 for it in run.iterations for s in it.steps if s.role == "creator" and s.call
    )
    assert len(critic.requests) == 2
    assert run.totals.failed_calls == 1
    assert run.totals.input_tokens > creator_tokens  # the critic's two paid replies are in the totals


def test_a_failed_structured_calls_step_records_every_request(fault_server: FaultServer) -> None:
    """The critic's step says how many requests the server got (4: three replies and a 429), not how many
    replies failed to parse (3), nor 2."""
    from promptlab.loops.creator_critic.loop import run_creator_critic

    creator = pl.scripted("req-creator", respond=lambda m: "V1")
    pl.register_model("never-parses", model=fault_server.model, api_base=fault_server.url)
    fault_server.script(Reply("nope", 10, 3), "429", Reply("still nope", 20, 4), Reply("never", 30, 5))
    run = run_creator_critic(
        {"id": "t", "prompt": "Write.", "goal": "Good."},
        {"model": creator.name, "critic_model": "never-parses", "max_iterations": 1},
        settings=FAST,
    )
    [critic] = [s for s in run.iterations[0].steps if s.role.startswith("critic")]
    assert critic.error is not None and critic.error.kind == "ParseError"
    assert critic.call is not None and critic.call.attempts == fault_server.requests == 4


def test_structured_replay_after_a_lost_final_write_keeps_original_figures(
    tmp_path: Path, fault_server: FaultServer
) -> None:
    """A kill between the reply write and the final write: the replay must not record zeros."""
    fault_server.script(Reply("not json", 10, 2), Reply(VERDICT, 12, 3))
    first = call(fault_server, schema=Verdict, cache=tmp_path)
    assert (first.input_tokens, first.output_tokens, first.attempts) == (22, 5, 2)
    store = open_cache(tmp_path)
    store.discard(first.key)  # as if the process died before storing the final Completion
    again = call(fault_server, schema=Verdict, cache=tmp_path)
    assert fault_server.requests == 2  # replayed from the cached replies
    assert (again.input_tokens, again.output_tokens, again.attempts) == (22, 5, 2)  # the original figures
    assert (again.billed_input_tokens, again.billed_output_tokens, again.billed_cost_usd) == (0, 0, 0.0)
    stored = store.get(first.key)
    assert stored is not None and (stored.input_tokens, stored.output_tokens) == (22, 5)


def test_a_stored_record_is_never_overwritten(tmp_path: Path, fault_server: FaultServer) -> None:
    fault_server.script(Reply("original", 10, 2))
    first = call(fault_server, cache=tmp_path)
    store = open_cache(tmp_path)
    zeros = first.model_copy(update={"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
    assert store.add(first.key, zeros) is False
    kept = store.get(first.key)
    assert kept is not None and (kept.input_tokens, kept.output_tokens) == (10, 2)


def all_waiting(
    monkeypatch: pytest.MonkeyPatch, server: FaultServer, flights: object, n: int, timeout_s: float = 60.0
) -> None:
    """Hold the server's first reply until `n` calls have entered the single-flight `flights` (the one that
    sent it and those that wait for it), so the followers are shown to wait however slowly a busy machine starts
    them; a follower that skipped the single-flight would send its own request (a timeout is a hang guard)."""
    entered, everyone = [], threading.Event()
    real = flights.hold  # type: ignore[attr-defined]

    def counted(key: str) -> object:
        entered.append(key)
        if len(entered) >= n:
            everyone.set()
        return real(key)

    monkeypatch.setattr(flights, "hold", counted)
    server.on_request = lambda index, address: everyone.wait(timeout_s) if index == 0 else None


def test_identical_async_calls_in_flight_make_one_request(
    tmp_path: Path, fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault_server.default = Reply(VERDICT, 9, 4)
    all_waiting(monkeypatch, fault_server, ASYNC_FLIGHTS, 6)

    async def many() -> list[pl.Completion]:
        return await asyncio.gather(
            *[
                pl.acomplete(
                    fault_server.model,
                    "same",
                    schema=Verdict,
                    api_base=fault_server.url,
                    api_key=KEY,
                    cache=tmp_path,
                    settings=FAST,
                )
                for _ in range(6)
            ]
        )

    results = asyncio.run(many())
    assert fault_server.requests == 1
    assert sum(not c.cache_hit for c in results) == 1
    assert all((c.input_tokens, c.output_tokens) == (9, 4) for c in results)
    usage = Usage()
    for c in results:
        usage.add(c)
    assert (usage.calls, usage.cache_hits, usage.input_tokens) == (6, 5, 9)


def test_identical_blocking_calls_in_threads_make_one_request(
    tmp_path: Path, fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault_server.default = Reply("threaded", 9, 4)
    all_waiting(monkeypatch, fault_server, THREAD_FLIGHTS, 4)
    out: list[pl.Completion] = []
    threads = [
        threading.Thread(target=lambda: out.append(call(fault_server, "same", cache=tmp_path))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fault_server.requests == 1 and len(out) == 4
    assert sorted(c.cache_hit for c in out) == [False, True, True, True]


CHILD = textwrap.dedent("""
    import json, sys
    from pydantic import BaseModel
    import promptlab as pl
    from promptlab.llm.call.entry import Settings

    class Verdict(BaseModel):
        score: int
        reason: str

    url, model, cache, gate = sys.argv[1:5]
    import os, pathlib, time
    pathlib.Path(gate, f"ready-{os.getpid()}").touch()
    while not pathlib.Path(gate, "go").exists():  # both processes call at the same moment
        time.sleep(0.01)
    c = pl.complete(model, "shared", schema=Verdict, api_base=url, api_key="sk-test", cache=cache,
                    settings=Settings(timeout_s=20, deadline_s=60))
    print(json.dumps({"in": c.input_tokens, "out": c.output_tokens, "hit": c.cache_hit,
                      "billed": c.billed_input_tokens}))
""")


@pytest.mark.slow
def test_two_processes_on_one_cache_keep_the_original_record(tmp_path: Path, fault_server: FaultServer) -> None:
    # a bad reply first, so each structured call writes a raw reply before its final record
    fault_server.script(Reply("oops", 10, 2, delay_s=0.4), Reply("oops", 10, 2, delay_s=0.4))
    fault_server.default = Reply(VERDICT, 12, 3, delay_s=0.4)
    cache = tmp_path / "shared"
    env = {**os.environ, "PYTHONPATH": str(Path(pl.__file__).parent.parent), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    gate = tmp_path / "gate"
    gate.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, fault_server.url, fault_server.model, str(cache), str(gate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 180
    while len(list(gate.glob("ready-*"))) < 2 and time.monotonic() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.05)
    (gate / "go").touch()
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert fault_server.requests == 4  # the race happened: each process paid for a bad reply and a good one
    stored = open_cache(cache).get(_final_key(cache))
    assert stored is not None and stored.input_tokens and stored.output_tokens
    # whichever process won, both report the stored original record, never a replay's zeros ...
    assert all((r["in"], r["out"]) == (stored.input_tokens, stored.output_tokens) for r in results), results
    # ... and together they were billed for exactly what the server sent
    assert sum(r["billed"] for r in results) == fault_server.tokens_served[0]
    again = call(fault_server, "shared", schema=Verdict, cache=cache)
    assert again.cache_hit and (again.input_tokens, again.output_tokens) == (stored.input_tokens, stored.output_tokens)


def _final_key(cache: Path) -> str:
    """The key of the one final Completion in a cache (provider replies carry no 'key' field)."""
    import diskcache

    with diskcache.Cache(str(cache)) as dc:
        for key in dc.iterkeys():
            if "key" in json.loads(dc.get(key)):
                return str(key)
    raise AssertionError("no final record stored")


def test_streamed_call_after_a_fault_counts_requests_and_tokens(fault_server: FaultServer) -> None:
    fault_server.script("503", Reply("streamed reply", 8, 3))
    pieces: list[str] = []
    c = call(fault_server, on_token=pieces.append)
    assert "".join(pieces) == c.text == "streamed reply"
    assert (c.attempts, fault_server.requests, c.input_tokens, c.output_tokens) == (2, 2, 8, 3)


def test_a_call_that_loses_the_race_adopts_the_stored_record(tmp_path: Path) -> None:
    """Another process stores this request while our call is out: we keep its record, bill our spend."""
    rival_store = open_cache(tmp_path)
    rival_key: list[str] = []

    def respond(messages: list[dict[str, object]]) -> str:
        if rival_key:  # the rival finishes while our request is at the provider
            rival_store.add(
                rival_key[0],
                pl.Completion(
                    model=m.name,
                    text="the rival's text",
                    input_tokens=40,
                    output_tokens=9,
                    cost_usd=0.0,
                    key=rival_key[0],
                ),
            )
        return "our text"

    m = pl.scripted("race-loser", respond=respond)
    probe = pl.complete(m.name, "race", cache=False)
    rival_key.append(probe.key)
    c = pl.complete(m.name, "race", cache=tmp_path)
    assert (c.text, c.input_tokens, c.output_tokens, c.cache_hit) == ("the rival's text", 40, 9, False)
    assert (c.billed_input_tokens, c.billed_output_tokens) == (probe.input_tokens, probe.output_tokens)
    stored = rival_store.get(c.key)
    assert stored is not None and stored.text == "the rival's text"


def test_only_drops_name_the_dropped_connection(fault_server: FaultServer) -> None:
    fault_server.script(*["drop"] * 3)
    with pytest.raises(ProviderError) as info:
        call(fault_server, settings=Settings(retries=2, backoff_s=0.001, backoff_max_s=0.002, timeout_s=5))
    assert "connection dropped" in str(info.value) and fault_server.requests == 3


def test_async_hang_is_bounded_by_the_deadline(fault_server: FaultServer) -> None:
    fault_server.script(*["hang"] * 10)
    with pytest.raises(ProviderError) as info:
        asyncio.run(
            pl.acomplete(
                fault_server.model,
                "hi",
                api_base=fault_server.url,
                api_key=KEY,
                cache=False,
                settings=Settings(retries=5, timeout_s=30, deadline_s=1.5, backoff_s=0.001),
            )
        )
    assert "deadline" in info.value.cause  # ended by the 1.5 s deadline, not after retries x the 30 s timeout
