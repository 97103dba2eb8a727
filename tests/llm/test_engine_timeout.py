"""The batching engine's timeout counts from a call's admission into the batch, not its wait in the queue, a
hung worker is still given up on, and a prompt reads only what no slot holds: the real call path and worker loop over a scripted engine model
(tests/support/fake_engine.py), served from a thread."""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_engine import FakeModel, spawner

import promptlab as pl
from promptlab.llm.local import engine, engine_worker, inprocess


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "scripted.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00 scripted engine model")
    return path


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeModel]]:
    """Serve local models from a scripted engine model (the test appends it before its first call)."""
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "batch")
    models: list[FakeModel] = []
    monkeypatch.setattr(engine, "spawn_worker", lambda path, opts: spawner(models[0])(path, opts))
    yield models
    for model in models:
        model.gate.set()
        model.freed.set()
    engine.close_all()


def ask(gguf: Path, prompt: str, max_tokens: int, timeout: float) -> pl.Completion:
    settings = pl.Settings(timeout_s=timeout, retries=0)
    return pl.complete(f"local/{gguf}", prompt, max_tokens=max_tokens, cache=False, settings=settings)


def chain(e: BaseException | None) -> str:
    """The messages of an exception and its causes (the in-process model's own words are under the
    ProviderError's generic "timed out")."""
    seen = []
    while e is not None:
        seen.append(str(e))
        e = e.__cause__ or e.__context__
    return " | ".join(seen)


def wait_until(check: object, what: str) -> None:
    for _ in range(2000):
        if check():  # type: ignore[operator]
            return
        time.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


def test_calls_queued_past_their_timeout_all_finish(gguf: Path, serve: list[FakeModel]) -> None:
    """Six calls on two sequence slots wait in the queue longer than their 1 s timeout (the worker is held at
    the first prompt until then); each one's own decoding (4 tokens) fits its timeout, so every one finishes."""
    model = FakeModel(gguf, n_seq=2)
    model.gate.clear()
    serve.append(model)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(ask, gguf, f"call {i}", 4, 1.0) for i in range(6)]
        eng = engine.engine_for(gguf, 4096)
        wait_until(lambda: len(eng.pending) == 6, "six calls submitted")
        time.sleep(1.5)  # every call has now waited in the queue longer than its timeout
        model.gate.set()
        replies = [f.result() for f in futures]
    assert [r.output_tokens for r in replies] == [4] * 6
    assert eng.stats()["max_batch"] == 2  # queued beyond the batch's capacity


def test_a_sequence_past_its_own_timeout_is_cut_and_the_others_go_on(gguf: Path, serve: list[FakeModel]) -> None:
    """A 10,000-token call with a 0.5 s timeout is cut at its deadline (after at most 50 steps of >= 10 ms), while
    a 200-token call decoding beside it in the batch goes on to its last token."""
    serve.append(FakeModel(gguf, n_seq=2, step_s=0.01))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        long = pool.submit(ask, gguf, "a long one", 10_000, 0.5)
        other = pool.submit(ask, gguf, "the other", 200, 60.0)
        with pytest.raises(pl.ProviderError, match="timed out") as info:
            long.result()
        assert other.result().output_tokens == 200
    said = re.search(
        r"passed the call's deadline \(its timeout, 0.5s from admission\) after (\d+) tokens", chain(info.value)
    )
    assert said is not None
    assert int(said[1]) < 150  # cut while the other sequence, admitted with it, had 50 or more of its 200 to go


def test_a_call_queued_behind_a_working_batch_is_not_taken_for_hung(
    gguf: Path, serve: list[FakeModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one slot, a call waits behind a 100-step (>= 1 s) call for longer than its own timeout plus the
    hung-worker grace (0.3 + 0.3 s): the worker's heartbeats show it working, so the queued call waits on."""
    monkeypatch.setattr(inprocess, "HUNG_GRACE_S", 0.3)
    monkeypatch.setattr(engine_worker, "HEARTBEAT_S", 0.02)
    serve.append(FakeModel(gguf, n_seq=1, step_s=0.01))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(ask, gguf, "first", 100, 60.0)
        eng = engine.engine_for(gguf, 4096)
        wait_until(lambda: len(eng.pending) == 1, "the first call submitted")
        queued = pool.submit(ask, gguf, "queued", 3, 0.3)
        assert queued.result().output_tokens == 3
        assert first.result().output_tokens == 100


def test_a_hung_worker_is_given_up_on_by_decoding_and_queued_calls(
    gguf: Path, serve: list[FakeModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stuck in a decode (native code) sends nothing: the call it decodes and the call queued behind
    it both fail as timeouts naming the silent worker, after their timeout plus the grace."""
    monkeypatch.setattr(inprocess, "HUNG_GRACE_S", 0.3)
    model = FakeModel(gguf, n_seq=1)
    model.hang.set()
    serve.append(model)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(ask, gguf, f"call {i}", 5, 0.3) for i in range(2)]
        for future in futures:
            with pytest.raises(pl.ProviderError, match="timed out") as info:
                future.result(timeout=60)
            assert "worker sent nothing within 0.6s" in chain(info.value)
    assert model.steps == 0


def test_a_prompt_reads_only_what_differs_from_the_prefix_a_free_slot_holds(gguf: Path, serve: list[FakeModel]) -> None:
    """A 1,000-token prompt, then the same with 9 more tokens: the second starts from the first's cells in the
    same slot (nothing copied) and reads only its 9 new tokens."""
    serve.append(model := FakeModel(gguf, n_seq=4))
    ask(gguf, "c" * 1000, 2, 60.0)
    eng = engine.engine_for(gguf, 4096)
    before = eng.stats()["prompt_tokens_read"]
    ask(gguf, "c" * 1000 + " and more", 2, 60.0)
    assert eng.stats()["prompt_tokens_read"] - before == len(" and more")
    assert model.copies == 0


def test_a_prompt_copies_the_prefix_a_decoding_sequence_read(gguf: Path, serve: list[FakeModel]) -> None:
    """A prompt sharing 300 tokens with a sequence still decoding takes a copy of them into its own slot
    (`Model.copy_prefix`) and reads only the rest."""
    serve.append(model := FakeModel(gguf, n_seq=4, step_s=0.01))
    eng = engine.engine_for(gguf, 4096)
    first, second = engine.Pending(), engine.Pending()
    eng.submit([{"role": "user", "content": "p" * 300 + "first"}], {"max_tokens": 400}, first)
    wait_until(lambda: model.steps >= 5, "the first sequence decodes")
    before = eng.stats()["prompt_tokens_read"]
    eng.submit([{"role": "user", "content": "p" * 300 + "second"}], {"max_tokens": 2}, second)
    assert second.last(timeout=60)[0] == "done"
    assert model.copies == 1 and eng.stats()["prompt_tokens_read"] - before == len("second")
    eng.cancel(1)


def test_live_sequences_stay_in_consecutive_slots_so_a_step_is_one_ubatch(gguf: Path, serve: list[FakeModel]) -> None:
    """Three sequences in slots 0-2; the middle one ends early. llama.cpp makes one ubatch only of consecutive
    sequence ids (a non-unified cache), so the last one moves down into the freed slot (its cells copied) and
    every later decode step lists slots 0 and 1, not 0 and 2 (and slot 0 alone once one is left)."""
    serve.append(model := FakeModel(gguf, n_seq=4, step_s=0.002))
    eng = engine.engine_for(gguf, 4096)
    first, middle, last = engine.Pending(), engine.Pending(), engine.Pending()
    model.gate.clear()  # the worker holds at the first prompt until all three are sent
    eng.submit([{"role": "user", "content": "first"}], {"max_tokens": 60}, first)
    eng.submit([{"role": "user", "content": "middle"}], {"max_tokens": 3}, middle)
    eng.submit([{"role": "user", "content": "last"}], {"max_tokens": 60}, last)
    time.sleep(0.05)
    model.gate.set()
    for pending in (first, middle, last):
        assert pending.last(timeout=60)[0] == "done"
    three = [i for i, b in enumerate(model.batches) if b == (0, 1, 2)]
    assert three, f"the three never decoded together: {model.batches[:8]}"
    after = model.batches[three[-1] + 1 :]
    assert (0, 1) in after and all(b == tuple(range(len(b))) for b in after), sorted(set(after))
    assert eng.stats()["moves"] == model.copies >= 1


def test_a_far_longer_sequence_is_decoded_apart_from_the_short_ones(gguf: Path, serve: list[FakeModel]) -> None:
    """A 1,500-token prompt and three short ones decode together; each step is two `llama_decode` calls, the
    long sequence's alone and the three short ones' together (`decode_groups`), not one over the long one's
    cells."""
    serve.append(model := FakeModel(gguf, n_seq=4, step_s=0.002))
    eng = engine.engine_for(gguf, 4096)
    pending = [engine.Pending() for _ in range(4)]
    model.gate.clear()  # the worker holds at the first prompt until all four are sent
    for i, (text, p) in enumerate(zip(["l" * 1500, "short a", "short b", "short c"], pending, strict=True)):
        eng.submit([{"role": "user", "content": text}], {"max_tokens": 30 - i}, p)
    time.sleep(0.05)
    model.gate.set()
    for p in pending:
        assert p.last(timeout=60)[0] == "done"
    assert (0,) in model.batches and (1, 2, 3) in model.batches
    assert (0, 1, 2, 3) not in model.batches
