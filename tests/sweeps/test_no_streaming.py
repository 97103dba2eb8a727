"""No sweep streams (#19): replies are streamed only for an `on_event` handler that asks for tokens (a live view);
the inline executor's progress handler does not, nor do papermill kernels, so no sweep request carries
`"stream": true`. Counted at a loopback server, over Creator/Critic, whose roles stream when asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fault_server import FaultServer, Reply

from promptlab.events import EventList, PrintLog, wants_tokens
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.sweeps.run import sweep

KEY_ENV = "LOOPBACK_STREAM_KEY"
ALIAS = {"model": "openai/test-model", "api_key_env": KEY_ENV}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    """Every reply validates as a critique; the creator takes it as its prompt text."""
    with FaultServer(default=Reply('{"score": 7}')) as s:
        monkeypatch.setenv(KEY_ENV, "sk-loopback")
        yield s


def experiment(tmp_path: Path, url: str) -> Path:
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "a", "prompt": "Write about rain.", "goal": "Vivid."}) + "\n", encoding="utf-8"
    )
    data: dict[str, Any] = {
        "name": "nostream",
        "loops": ["creator_critic"],
        "tasks": "tasks.jsonl",
        "replicates": 2,
        "models": {"writer": {**ALIAS, "api_base": url}},
        "config": {"model": "writer", "max_iterations": 2},
        "grid": {"temperature": [0.0, 0.5]},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_an_inline_sweep_never_streams(server: FaultServer, tmp_path: Path) -> None:
    events = EventList(tokens=True)  # even a handler that asks for tokens: a sweep is no live view
    result = sweep(experiment(tmp_path, server.url), tmp_path / "out", executor="inline", on_event=events)
    assert result.done == 2 and result.failed == 0
    assert server.requests >= 8 and server.streamed == 0
    assert "model_call" in events.kinds() and "token" not in events.kinds()


@pytest.mark.slow
def test_a_papermill_sweep_never_streams(server: FaultServer, tmp_path: Path) -> None:
    result = sweep(experiment(tmp_path, server.url), tmp_path / "out", executor="papermill", workers=1)
    assert result.done == 2 and result.failed == 0
    assert server.requests >= 8 and server.streamed == 0


def test_a_run_streams_only_for_a_handler_that_asks(server: FaultServer) -> None:
    import promptlab as pl

    pl.register_model("writer", **ALIAS, api_base=server.url)
    task = {"id": "t", "prompt": "Write about rain.", "goal": "Vivid."}
    quiet = EventList()
    run_creator_critic(task, {"model": "writer", "max_iterations": 1}, on_event=quiet)
    assert server.requests == 2 and server.streamed == 0 and "token" not in quiet.kinds()
    live = EventList(tokens=True)
    run = run_creator_critic(task, {"model": "writer", "max_iterations": 1, "temperature": 0.3}, on_event=live)
    assert server.requests == 4 and server.streamed == 2  # the creator's and the critic's
    tokens = "".join(e.data["text"] for e in live if e.kind == "token" and e.data["token_type"] == "creator")
    assert tokens == '{"score": 7}' and run.iterations[0].candidate is not None
    assert not run.errors


def test_which_handlers_ask_for_tokens() -> None:
    def plain(event: Any) -> None:
        pass

    assert not wants_tokens(None) and not wants_tokens(plain) and not wants_tokens(EventList())
    assert not wants_tokens(PrintLog()) and wants_tokens(PrintLog(tokens=True)) and wants_tokens(EventList(tokens=True))
    plain.wants_tokens = True  # type: ignore[attr-defined]
    assert wants_tokens(plain)
