"""#28 item 12: a user name and password in a server URL (`http://user:pass@host/v1`) are refused before any call,
with a clear message that masks them, wherever the URL comes from (a call, a model alias, an experiment file, the
environment); and no file a sweep writes, nor its output or log, ever holds one, even one a model's reply carries."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Reply

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.llm.call.settings import Settings

SECRET = "s3cret-pw-Zq9"


def with_password(server: FaultServer) -> str:
    return f"http://alice:{SECRET}@127.0.0.1:{server.port}/v1"


def text_of(path: Path) -> str:
    """A written file as text (a parquet frame as its CSV, so compression hides nothing)."""
    if path.suffix == ".parquet":
        return str(pd.read_parquet(path).to_csv())
    return path.read_bytes().decode("utf-8", "replace")


def leaks(root: Path) -> list[str]:
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and SECRET in text_of(p)]


@pytest.fixture
def server() -> FaultServer:
    with FaultServer(default=Reply('{"score": 7}')) as s:
        yield s


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_call_to_a_url_with_a_password_is_refused_masked(server: FaultServer, transport: str) -> None:
    with pytest.raises(ConfigError) as info:
        pl.complete(
            server.model,
            "hi",
            api_base=with_password(server),
            api_key="sk-x",
            cache=False,
            settings=Settings(transport=transport),
        )
    message = str(info.value)
    assert SECRET not in message and "alice" not in message
    assert "http://***@127.0.0.1" in message and "api_key" in message
    assert server.requests == 0


def test_a_model_alias_with_a_password_is_refused_masked(server: FaultServer) -> None:
    with pytest.raises(ConfigError) as info:
        pl.register_model("pw-alias", model=server.model, api_base=with_password(server))
    assert SECRET not in str(info.value) and "api_base" in str(info.value)


def test_the_environment_url_with_a_password_is_refused_before_any_call(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", with_password(server))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    with pytest.raises(ConfigError, match="OPENAI_API_BASE") as info:
        pl.complete(server.model, "hi", cache=False)
    assert SECRET not in str(info.value) and server.requests == 0


def sweep_args(tmp_path: Path, **over: Any) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    exp = write_experiment(
        tmp_path,
        {"name": "urls", "loops": ["toy"], "config": {"max_iterations": 1}, "grid": {"style": ["a", "b"]}, **over},
        topics(2),
    )
    return ["sweep", str(exp), "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"]


def test_a_sweep_with_a_password_in_a_model_url_stops_before_start_and_writes_none(
    toy_dir: Path,
    server: FaultServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    alias = {"judge": {"model": server.model, "api_base": with_password(server)}}
    args = sweep_args(tmp_path / "a", models=alias, config={"max_iterations": 1, "model": "judge"})
    assert main(args) == 2
    out = capsys.readouterr()
    assert "***@" in out.err and SECRET not in out.out + out.err + caplog.text
    monkeypatch.setenv("OPENAI_API_BASE", with_password(server))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    args = sweep_args(tmp_path / "b", config={"max_iterations": 1, "model": server.model})
    assert main(args) == 2
    out = capsys.readouterr()
    assert "OPENAI_API_BASE" in out.err and SECRET not in out.out + out.err + caplog.text
    assert server.requests == 0 and [p for p in leaks(tmp_path) if not p.endswith("exp.yaml")] == []


def test_a_password_a_reply_carries_is_masked_in_every_file_a_sweep_writes(
    toy_dir: Path,
    server: FaultServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.default = Reply(f'{{"score": 7, "note": "see http://bob:{SECRET}@example.org/x"}}')
    monkeypatch.setenv("OPENAI_API_BASE", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    args = sweep_args(tmp_path, config={"max_iterations": 1, "model": server.model})
    assert main([*args, "--cache", str(tmp_path / "cache")]) == 0
    assert server.requests > 0
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err + caplog.text
    written = leaks(tmp_path / "out")
    assert written == []
    assert "http://***@example.org" in text_of(next((tmp_path / "out").rglob("runs.jsonl")))
