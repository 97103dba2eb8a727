"""The reproducibility check: local/smollm2 on the default path (the instance pool) gives exactly the committed
greedy replies (tests/llm/reference/smollm2_greedy.json), and every local reply carries the fingerprint it rests
on. A machine or build that does not reproduce them fails with both fingerprints and the first differing reply
(docs/reproducibility.md; regenerate with benchmarks/reference_replies.py --write)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import greedy_reference as ref
import llama_cpp
import pytest

import promptlab as pl
from promptlab.llm.local import engine
from promptlab.llm.local.pool import resolve_model_path

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

SETTINGS = ("PROMPTLAB_LOCAL_ENGINE", "PROMPTLAB_LOCAL_THREADS", "PROMPTLAB_LOCAL_INSTANCES", "PROMPTLAB_ENGINE_SEQS")


@pytest.fixture
def default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


def test_the_reference_file_is_whole() -> None:
    data = ref.load_reference()
    replies = [item["reply"] for item in data["items"]]
    assert len(replies) >= 60 and data["sha256"] == ref.replies_hash(replies)
    assert [item["prompt"] for item in data["items"]] == ref.reference_prompts()
    assert data["max_tokens"] == ref.MAX_TOKENS and data["fingerprint"]["engine"] == engine.DEFAULT_MODE == "pool"


@pytest.mark.usefixtures("default_path")
def test_the_default_path_reproduces_the_reference_exactly() -> None:
    reference = ref.load_reference()
    replies = ref.greedy_replies(ref.reference_prompts())
    if replies != [item["reply"] for item in reference["items"]]:
        pytest.fail(ref.mismatch_report(reference, replies, ref.current_fingerprint()), pytrace=False)
    assert ref.replies_hash(replies) == reference["sha256"]


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
    assert fp["engine"] == "pool" and "AVX2 = 1" in fp["system_info"] and fp["kind"] == "local"
    recorded = Path(sys.prefix) / "promptlab-llama-build.json"
    if recorded.is_file() and Path(str(llama_cpp.__file__)).resolve().is_relative_to(Path(sys.prefix).resolve()):
        assert fp["build"] == json.loads(recorded.read_text())["variant"]
    hit = pl.complete("local/smollm2", "Say hi.", max_tokens=4, cache=tmp_path)
    assert hit.cache_hit and hit.fingerprint == fp
