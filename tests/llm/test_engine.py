"""The batching engine for local models (`promptlab.llm.local.engine`), the direct in-process call path and the CPU
guard: offline tests first, then a few on the real SmolLM2 (marked local_model and slow)."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.llm.local import cpu, engine
from promptlab.llm.local import pool as local
from promptlab.llm.local.engine_plan import chunks, decode_groups
from promptlab.llm.local.engine_worker import TEST_ABORT_ENV

SMOLLM = local.resolve_model_path("smollm2")
AMX_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8\n"
PLAIN_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2\n"


@pytest.fixture
def batched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "batch")


@pytest.mark.parametrize(
    ("start", "length", "planned"),
    [
        (0, 100, (0, [100])),
        (0, 512, (0, [512])),
        (0, 513, (0, [512, 1])),  # read alone, its last token is a chunk of its own: so here too
        (99, 100, (98, [2])),  # one token left would be read alone: one fewer is reused
        (10, 523, (10, [511, 2])),  # 513 left: not 512 + 1
        (500, 1025, (500, [512, 12, 1])),
        (1024, 1025, (1024, [1])),
    ],
)
def test_a_prompt_is_read_in_the_chunks_it_is_read_in_alone(
    start: int, length: int, planned: tuple[int, list[int]]
) -> None:
    assert chunks(start, length, 512) == planned


def test_every_chunk_plan_reads_each_token_as_the_whole_prompt_does() -> None:
    for length in range(1, 1600, 7):
        for start in range(0, length, 5):
            begin, sizes = chunks(start, length, 512)
            assert begin <= start and begin + sum(sizes) == length and all(0 < n <= 512 for n in sizes)
            alone = length % 512 == 1
            assert [n for n in sizes if n == 1] == ([1] if alone else []) and (sizes[-1] == 1) == alone


@pytest.mark.parametrize(
    ("lengths", "groups"),
    [
        ([200] * 8, [(0, 8)]),
        ([1500] + [200] * 7, [(0, 1), (1, 8)]),
        ([200] * 3 + [1500] + [200] * 4, [(0, 3), (3, 4), (4, 8)]),
        ([1500, 1400, 200, 200], [(0, 2), (2, 4)]),
        ([300, 600, 900, 1200], [(0, 4)]),
        ([2], [(0, 1)]),
        ([], []),
    ],
)
def test_a_decode_step_decodes_a_far_longer_sequence_apart(lengths: list[int], groups: list[tuple[int, int]]) -> None:
    """Sequences of like lengths share one `llama_decode`; one holding far more cells is decoded apart, so the
    others do not compute attention over its length; every sequence is in exactly one run, in slot order."""
    assert decode_groups(lengths) == groups


def test_cpu_flags_read_amx_from_cpuinfo() -> None:
    assert cpu.cpu_flags(AMX_CPUINFO) >= {"amx_tile", "amx_int8"}
    assert not cpu.cpu_flags(PLAIN_CPUINFO) & cpu.AMX_FLAGS


@pytest.mark.parametrize(("text", "safe"), [(AMX_CPUINFO, False), (PLAIN_CPUINFO, True)])
def test_an_amx_cpu_loads_without_extra_buffer_types(
    text: str, safe: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "cpuinfo"
    fake.write_text(text)
    monkeypatch.setattr(cpu, "CPUINFO", fake)
    cpu.has_amx.cache_clear()
    try:
        assert cpu.extra_bufts_safe() is safe
        assert engine.options(4096)["extra_bufts"] is safe  # what the engine's worker loads with
        seen: list[bool] = []

        class Llama:  # the instance pool's loader, recording the model parameters it starts from
            def __init__(self, **kwargs: Any) -> None:
                import llama_cpp.llama as high

                seen.append(bool(high.llama_cpp.llama_model_default_params().use_extra_bufts))

        monkeypatch.setattr("llama_cpp.Llama", Llama)
        local._new_slot(SMOLLM, False)
        assert seen == [safe]
        import llama_cpp

        assert llama_cpp.llama_model_default_params().use_extra_bufts  # restored after the load
    finally:
        cpu.has_amx.cache_clear()


def test_the_engine_mode_is_one_setting_and_a_bad_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "pool")
    assert engine.mode() == "pool"
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "fast")
    with pytest.raises(pl.ConfigError, match="PROMPTLAB_LOCAL_ENGINE"):
        engine.mode()


def test_a_scripted_call_makes_no_litellm_call(monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("litellm was called for an in-process model")

    for name in ("completion", "acompletion", "stream_chunk_builder", "completion_cost"):
        monkeypatch.setattr(litellm, name, refuse)
    model = pl.scripted("engine-direct", ["one", "two three"])
    c = pl.complete(model.name, "hi", cache=False, logprobs=True, top_logprobs=1)
    assert c.text == "one" and c.cost_usd == 0.0 and c.input_tokens == 1
    pieces: list[str] = []
    d = asyncio.run(pl.acomplete(model.name, "again", cache=False, on_token=pieces.append))
    assert d.text == "two three" and "".join(pieces) == "two three" and len(pieces) == 2


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["batch", "pool"])
def test_a_local_call_makes_no_litellm_call(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", mode)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("litellm was called for a local model")

    for name in ("completion", "acompletion", "stream_chunk_builder", "completion_cost"):
        monkeypatch.setattr(litellm, name, refuse)
    c = pl.complete("local/smollm2", "Say yes.", max_tokens=4, cache=False)
    assert c.output_tokens and c.cost_usd == 0.0 and c.response_model == SMOLLM.name


class Label(BaseModel):
    label: str = Field(pattern="^(positive|negative)$")
    confidence: int = Field(ge=1, le=5)


@pytest.mark.local_model
@pytest.mark.slow
def test_engine_batches_structured_logprob_and_plain_calls_at_once(batched: None) -> None:
    """Three kinds of request in one batch, each with its own parameters."""

    async def run() -> list[pl.Completion]:
        return list(
            await asyncio.gather(
                pl.acomplete("local/smollm2", "Is 'I loved it' positive or negative?", schema=Label, cache=False),
                pl.acomplete("local/smollm2", "Say hello.", max_tokens=6, logprobs=True, top_logprobs=3, cache=False),
                pl.acomplete("local/smollm2", "Count: one, two,", max_tokens=30, stop=["four"], cache=False),
            )
        )

    structured, scored, stopped = asyncio.run(run())
    assert isinstance(structured.parsed, Label)
    assert scored.logprobs and len(scored.logprobs) == scored.output_tokens
    assert "".join(t.token for t in scored.logprobs) == scored.text
    first = scored.logprobs[0]
    assert len(first.top_logprobs) == 3 and first.top_logprobs[0].logprob >= first.top_logprobs[1].logprob
    assert all(t.logprob <= 0 for t in scored.logprobs)
    assert "four" not in stopped.text


@pytest.mark.local_model
@pytest.mark.slow
def test_engine_logprobs_match_the_instance_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A greedy token's log-probability and its alternatives from the batched engine agree with llama-cpp-python's,
    up to the float order of a differently shaped matrix product (measured: 0.08 nats apart on a logprob of -2;
    reading another row's logits would be off by whole nats and name other tokens)."""
    got = {}
    for mode in ("batch", "pool"):
        monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", mode)
        c = pl.complete("local/smollm2", "Say hello.", max_tokens=1, logprobs=True, top_logprobs=2, cache=False)
        assert c.logprobs
        got[mode] = c.logprobs[0]
    assert got["batch"].token == got["pool"].token
    assert got["batch"].logprob == pytest.approx(got["pool"].logprob, abs=0.25)
    assert [t.token for t in got["batch"].top_logprobs] == [t.token for t in got["pool"].top_logprobs]


@pytest.mark.local_model
@pytest.mark.slow
def test_a_deadline_ends_one_sequence_and_leaves_the_others(batched: None) -> None:
    eng = engine.engine_for(SMOLLM, local.N_CTX)
    messages = [{"role": "user", "content": "Write a long story about a lighthouse."}]
    slow, quick = engine.Pending(), engine.Pending()
    # 400 tokens take seconds on any CPU: the one-second timeout (from admission) passes mid-reply
    eng.submit(messages, {**local.engine_params({"max_tokens": 400}), "timeout": 1.0}, slow)
    eng.submit(messages, local.engine_params({"max_tokens": 8}), quick)
    ended = slow.last(timeout=120)
    assert ended[0] == "error" and ended[2] == "timeout" and "deadline" in ended[3]
    finished = quick.last(timeout=120)
    assert finished[0] == "done" and finished[2]["usage"][1] == 8 and finished[2]["finish_reason"] == "length"


@pytest.mark.local_model
@pytest.mark.slow
def test_a_deadline_through_the_call_path_is_a_timeout(batched: None) -> None:
    settings = pl.Settings(timeout_s=0.5, deadline_s=1.0, retries=0)
    with pytest.raises(pl.ProviderError, match="timed out|deadline"):
        pl.complete(
            "local/smollm2", "Write a long story about a lighthouse.", max_tokens=2000, cache=False, settings=settings
        )


@pytest.mark.local_model
@pytest.mark.slow
def test_concurrent_calls_share_one_batch(batched: None) -> None:
    """Calls made at once are decoded together: every one is admitted (in the worker's batch) before the
    first one ends, seen as each reply's first piece arriving before any reply is done."""
    eng = engine.engine_for(SMOLLM, local.N_CTX)
    calls = [engine.Pending() for _ in range(6)]
    for i, call in enumerate(calls):
        params = {**local.engine_params({"max_tokens": 12}), "stream": True}
        eng.submit([{"role": "user", "content": f"Say a word about number {i}."}], params, call)
    order: list[tuple[str, int]] = []
    lock = threading.Lock()

    def drain(i: int) -> None:
        while (event := calls[i].events.get(timeout=120))[0] in engine.PASSING:
            if event[0] == "piece":
                with lock:
                    order.append(("piece", i))
        with lock:
            order.append((event[0], i))

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first_done = next(k for k, (kind, _) in enumerate(order) if kind == "done")
    assert {i for kind, i in order[:first_done] if kind == "piece"} == set(range(6))
    assert sum(kind == "done" for kind, _ in order) == 6


@pytest.mark.local_model
@pytest.mark.slow
def test_a_native_crash_fails_its_cell_by_name_and_keeps_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: None
) -> None:
    """A worker that aborts natively (as llama.cpp does on NaN weights) fails the cell on that model as an
    infrastructure failure naming the file and the signal; the cell on the healthy model finishes ok, and a
    later call on the crashed model starts a fresh worker."""
    import experiment_files
    import toyloop  # noqa: F401 -- registers the "toy" loop

    from promptlab.results.store import cell_status
    from promptlab.sweeps.run import sweep

    crashing = tmp_path / "crashing.gguf"
    shutil.copyfile(SMOLLM, crashing)
    monkeypatch.setenv(TEST_ABORT_ENV, crashing.name)
    data = {
        "name": "crash",
        "loops": ["toy"],
        "config": {"max_iterations": 1, "max_tokens": 8},
        "grid": {"model": [f"local/{crashing}", "local/smollm2"]},
        "replicates": 1,
    }
    path = experiment_files.write_experiment(tmp_path, data)
    out = tmp_path / "out"
    result = sweep(path, out, progress=False, cache=tmp_path / "cache", settings=pl.Settings(retries=0))
    assert (result.done, result.failed) == (1, 1)
    statuses = {c.cell_id: cell_status(out, c.cell_id) for c in result.cells}
    failed = [s for s in statuses.values() if s and s["status"] == "failed"]
    ok = [s for s in statuses.values() if s and s["status"] == "ok"]
    assert len(failed) == 1 and len(ok) == 1
    message = failed[0]["error"]["message"]
    assert failed[0]["error"]["kind"] == "infrastructure"
    assert "crashing.gguf" in message and "crashed natively" in message and "SIGABRT" in message
    monkeypatch.delenv(TEST_ABORT_ENV)
    again = pl.complete(f"local/{crashing}", "Say yes.", max_tokens=2, cache=False)
    assert again.output_tokens


@pytest.mark.local_model
@pytest.mark.slow
def test_a_shared_prefix_is_read_once_and_copied(batched: None) -> None:
    """Six examples of one candidate prompt: the instruction they share is decoded for the first and copied to
    the others (`llama_memory_seq_cp`), so the prompt tokens read are about one instruction plus six examples."""
    eng = engine.engine_for(SMOLLM, local.N_CTX)
    instruction = "You label product reviews. " * 20 + "Answer positive or negative.\n\nReview: "
    before = eng.stats()
    calls = [engine.Pending() for _ in range(6)]
    for i, call in enumerate(calls):
        messages = [{"role": "user", "content": f"{instruction}item {i} was fine"}]
        eng.submit(messages, local.engine_params({"max_tokens": 2}), call)
    assert all(call.last(timeout=120)[0] == "done" for call in calls)
    after = eng.stats()
    asked = after["prompt_tokens"] - before["prompt_tokens"]
    read = after["prompt_tokens_read"] - before["prompt_tokens_read"]
    per_prompt = asked / 6
    assert per_prompt > 100  # the instruction is most of each prompt
    assert read < per_prompt + 6 * 15  # one full prompt, then only what differs
    assert after["max_batch"] >= 2


def test_a_gguf_file_llama_cpp_cannot_load_is_a_one_line_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: None
) -> None:
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00 not a model")  # passes the magic-byte check, fails to load
    with pytest.raises(pl.ConfigError, match=r"local model truncated.gguf: .*could not load") as info:
        pl.complete(f"local/{bad}", "hi", max_tokens=2, cache=False)
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_gguf_is_refused_before_any_call(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("my notes")
    with pytest.raises(pl.UnknownModelError, match="is not a GGUF file"):
        local.resolve_model_path(str(text))
    assert not any(text.name in str(p) for p in engine.running())  # no worker was started for it
