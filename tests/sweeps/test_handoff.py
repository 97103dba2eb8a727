"""Handing a hosted-model sweep to a colleague: its results directory and its cache, copied elsewhere, re-run there
with PROMPTLAB_REPLAY=1, no API key and the server gone, make no model call and give the same frames; a request
the cache does not hold fails before it is sent (docs/reproducibility.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from fault_server import FaultServer, Raw

import promptlab as pl
from promptlab.errors import ProviderError
from promptlab.llm.call.replay import REPLAY_ENV, replay_only
from promptlab.sweeps.run import sweep

KEY_ENV = "HANDOFF_TEST_KEY"
VOLATILE = {"run_id", "started_at", "wall_time_s", "cache_hits", "latency_s", "cell_wall_time_s"}
"""Columns that differ between a run and its replay by design (ids, clocks, whether a call was a cache hit)."""


def reply(text: str) -> Raw:
    """A chat completion that reports a dated model id and a system fingerprint, as OpenAI's do."""
    return Raw(
        {
            "id": "chatcmpl-handoff",
            "object": "chat.completion",
            "created": 1,
            "model": "test-model-2026-01-01",
            "system_fingerprint": "fp_handoff1",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
        }
    )


def experiment(folder: Path, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tasks = [{"id": f"t{i}", "prompt": f"Write about rain {i}.", "goal": "Vivid."} for i in (0, 1)]
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    data: dict[str, Any] = {
        "name": "handoff",
        "loops": ["creator_critic"],
        "tasks": "tasks.jsonl",
        "models": {"hosted": {"model": "openai/test-model", "api_key_env": KEY_ENV, "api_base": url}},
        "config": {"model": "hosted", "max_iterations": 2},
        "grid": {"temperature": [0.0, 0.3]},
    }
    path = folder / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    kept = [c for c in frame.columns if c not in VOLATILE and not c.startswith("spent")]
    return frame[kept].reset_index(drop=True)


def test_replay_only_is_one_setting_and_a_bad_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REPLAY_ENV, raising=False)
    assert replay_only() is False
    monkeypatch.setenv(REPLAY_ENV, "yes")
    assert replay_only() is True
    monkeypatch.setenv(REPLAY_ENV, "sometimes")
    with pytest.raises(pl.ConfigError, match="PROMPTLAB_REPLAY must be"):
        replay_only()


@pytest.mark.slow
def test_a_sweep_handed_over_with_its_cache_replays_exactly_with_no_key_and_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REPLAY_ENV, raising=False)
    monkeypatch.setenv(KEY_ENV, "sk-mine")
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    with FaultServer(default=reply('{"score": 7, "reason": "ok", "prompt": "Rain falls."}')) as server:
        exp = experiment(mine, server.url)
        first = sweep(exp, mine / "results", executor="inline", progress=False, cache=mine / "cache")
        made = server.requests
    assert made > 0 and all(c.status == "ok" for c in first.cells), [c.error for c in first.cells]

    # the hand-off: the experiment folder, its results and its cache, copied; the colleague has no key and no server
    shutil.copytree(mine, theirs)
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv(REPLAY_ENV, "1")
    again = sweep(theirs / "exp.yaml", theirs / "rerun", executor="inline", progress=False, cache=theirs / "cache")
    assert all(c.status == "ok" for c in again.cells), [c.error for c in again.cells]

    original, replayed = pl.load(mine / "results"), pl.load(theirs / "rerun")
    assert (replayed.runs["cache_hits"] == replayed.runs["calls"]).all() and replayed.runs["calls"].sum() > 0
    pd.testing.assert_frame_equal(comparable(original.runs), comparable(replayed.runs))
    pd.testing.assert_frame_equal(comparable(original.trajectories), comparable(replayed.trajectories))
    prints = json.loads(replayed.runs["fingerprints"].iloc[0])["hosted"]
    [fp] = prints.values()
    assert fp["system_fingerprint"] == "fp_handoff1" and fp["model"] == "test-model-2026-01-01"

    # a request the handed-over cache does not hold is not sent: it fails at once, naming the setting
    with pytest.raises(ProviderError, match=REPLAY_ENV):
        pl.complete(
            "openai/test-model", "Something new.", api_base=server.url, cache=theirs / "cache", settings=pl.Settings()
        )


@pytest.mark.parametrize("schema", [False, True])
def test_replay_only_without_the_key_names_the_missing_call_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: bool
) -> None:
    """An alias whose key variable is unset, a call the cache does not hold: the error is that the call is not in
    the cache (its model and key first), never "set the key" (the key is not needed: nothing is sent)."""
    from pydantic import BaseModel

    from promptlab.llm.call.replay import NotCached
    from promptlab.llm.providers.aliases import register_model

    class Score(BaseModel):
        score: int

    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(REPLAY_ENV, "1")
    register_model("handed", model="openai/test-model", api_key_env=KEY_ENV, api_base="http://127.0.0.1:9/v1")
    with pytest.raises(NotCached) as err:
        pl.complete("handed", "Something new.", cache=tmp_path / "cache", schema=Score if schema else None)
    message = str(err.value)
    assert (
        message.startswith("handed: this call (key ") and "is not in the cache, and PROMPTLAB_REPLAY is set" in message
    )
    assert KEY_ENV not in message and message.endswith("(after 0 attempts)")
    assert isinstance(err.value, ProviderError) and err.value.infrastructure
