"""The reproducibility check: local/smollm2 on the default path (the batching engine) gives exactly the committed
greedy replies (tests/llm/reference/smollm2_greedy.json), alone, in batches of 4 and 16, in reversed and shuffled
orders, with the prefixes its slots keep from earlier prompts and sequences moved down into freed slots; every local reply carries the fingerprint it rests
on, and the AMX guard, which turns off extra buffer types no tensor of the model uses, does not change its id. A
machine or build that does not reproduce them fails with both fingerprints and the first differing reply
(docs/reproducibility.md; regenerate with benchmarks/reference_replies.py --write)."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

import greedy_reference as ref
import llama_cpp
import pytest

import promptlab as pl
from promptlab.llm.local import cpu, engine
from promptlab.llm.local.fingerprint import local_fingerprint
from promptlab.llm.local.pool import N_CTX, resolve_model_path

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

SETTINGS = ("PROMPTLAB_LOCAL_ENGINE", "PROMPTLAB_LOCAL_THREADS", "PROMPTLAB_LOCAL_INSTANCES", "PROMPTLAB_ENGINE_SEQS")
WAYS: dict[str, tuple[int, Callable[[int], list[int]]]] = {
    "4 at once": (4, lambda n: list(range(n))),
    "16 at once": (16, lambda n: list(range(n))),
    "16 at once, reversed": (16, lambda n: list(reversed(range(n)))),
    "4 at once, shuffled": (4, lambda n: random.Random(50).sample(range(n), n)),
    "16 at once, shuffled": (16, lambda n: random.Random(51).sample(range(n), n)),
}
"""How the prompts are asked beside the one-at-a-time run: calls in flight at once (the engine batches them as
they come and go) and the order they are asked in."""


@pytest.fixture
def default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


def test_the_reference_file_is_whole() -> None:
    data = ref.load_reference()
    replies = [item["reply"] for item in data["items"]]
    assert len(replies) >= 60 and data["sha256"] == ref.replies_hash(replies)
    assert [item["prompt"] for item in data["items"]] == ref.reference_prompts()
    assert data["max_tokens"] == ref.MAX_TOKENS and data["fingerprint"]["engine"] == engine.DEFAULT_MODE == "batch"


@pytest.mark.usefixtures("default_path")
def test_the_default_path_reproduces_the_reference_exactly() -> None:
    reference = ref.load_reference()
    replies = ref.greedy_replies(ref.reference_prompts())
    if replies != [item["reply"] for item in reference["items"]]:
        pytest.fail(ref.mismatch_report(reference, replies, ref.current_fingerprint()), pytrace=False)
    assert ref.replies_hash(replies) == reference["sha256"]


@pytest.mark.usefixtures("default_path")
@pytest.mark.parametrize("way", list(WAYS))
def test_the_default_path_gives_every_reference_reply_batched_in_any_order(way: str) -> None:
    at_once, order = WAYS[way]
    reference = ref.load_reference()
    prompts = ref.reference_prompts()
    eng = engine.engine_for(resolve_model_path("smollm2"), N_CTX)
    before = eng.stats()
    replies = ref.greedy_replies(prompts, at_once=at_once, order=order(len(prompts)))
    after = eng.stats()
    if replies != [item["reply"] for item in reference["items"]]:
        pytest.fail(f"{way}: " + ref.mismatch_report(reference, replies, ref.current_fingerprint()), pytrace=False)
    decoded, steps = after["decoded"] - before["decoded"], after["decode_steps"] - before["decode_steps"]
    assert decoded / steps > 2  # the sequences were decoded together, not one after another
    assert after["moves"] > before["moves"]  # and some moved between slots as others ended (`Worker._compact`)


@pytest.mark.usefixtures("default_path")
def test_the_amx_guard_leaves_the_id_alone_where_no_tensor_uses_an_extra_buffer_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = resolve_model_path("smollm2")
    plain = local_fingerprint(path)
    amx = tmp_path / "cpuinfo"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8\n")
    with monkeypatch.context() as m:
        m.setattr(cpu, "CPUINFO", amx)
        cpu.has_amx.cache_clear()
        guarded = local_fingerprint(path)
    cpu.has_amx.cache_clear()
    assert plain["extra_bufts"] is True and guarded["extra_bufts"] is False
    assert plain["weight_buffers"] == guarded["weight_buffers"] == ["CPU"]
    assert guarded["id"] == plain["id"]


def test_a_mismatch_names_both_fingerprints_and_the_first_differing_reply() -> None:
    reference = ref.load_reference()
    replies = [item["reply"] for item in reference["items"]]
    replies[3], replies[7] = "changed", "changed too"
    here = {**reference["fingerprint"], "system_info": "CPU : AVX512 = 1 |", "build": "native"}
    text = ref.mismatch_report(reference, replies, here)
    assert text.startswith("2 of 66 greedy replies differ from the reference")
    assert "fields that differ: build, system_info" in text and "first differing reply: #3" in text
    assert f"  expected: {reference['items'][3]['reply']!r}" in text and "  got:      'changed'" in text
    assert f"  prompt:   {reference['items'][3]['prompt']!r}" in text


@pytest.mark.usefixtures("default_path")
def test_a_local_reply_carries_its_fingerprint_and_a_replay_keeps_it(tmp_path: Path) -> None:
    c = pl.complete("local/smollm2", "Say hi.", max_tokens=4, cache=tmp_path)
    fp = c.fingerprint
    assert fp is not None and fp == ref.current_fingerprint()
    path = resolve_model_path("smollm2")
    assert fp["model_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and fp["model"] == path.name
    assert fp["engine"] == engine.DEFAULT_MODE and "AVX2 = 1" in fp["system_info"] and fp["kind"] == "local"
    recorded = Path(sys.prefix) / "promptlab-llama-build.json"
    if recorded.is_file() and Path(str(llama_cpp.__file__)).resolve().is_relative_to(Path(sys.prefix).resolve()):
        assert fp["build"] == json.loads(recorded.read_text())["variant"]
    hit = pl.complete("local/smollm2", "Say hi.", max_tokens=4, cache=tmp_path)
    assert hit.cache_hit and hit.fingerprint == fp
