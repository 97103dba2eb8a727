"""#41 item 9: a credential in a server URL's query string (`?api-key=...`, `?key=`, `?token=`, `?sig=`) is refused
before any call, named and masked, as a password in the URL is (#28 item 12): it used to be copied into the results
directory's experiment.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Reply

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import ConfigError

SECRET = "qs-s3cret-Zq9"


@pytest.mark.parametrize("param", ["api-key", "key", "access_token", "sig", "API_KEY"])
def test_a_query_string_credential_is_refused_masked(param: str) -> None:
    with FaultServer(default=Reply("hi")) as server:
        base = f"{server.url}?api-version=2024&{param}={SECRET}"
        with pytest.raises(ConfigError) as info:
            pl.complete(server.model, "hi", api_base=base, api_key="sk-x", cache=False)
        message = str(info.value)
        assert SECRET not in message and f"{param}=***" in message and "api-version=***" in message
        assert "credential in its query string" in message and server.requests == 0
        pl.complete(server.model, "hi", api_base=f"{server.url}?api-version=2024", api_key="sk-x", cache=False)


def test_a_sweep_with_a_key_in_a_model_url_writes_no_experiment_yaml(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FaultServer(default=Reply('{"score": 7}')) as server:
        alias = {"judge": {"model": server.model, "api_base": f"{server.url}?api-key={SECRET}"}}
        exp = write_experiment(
            tmp_path,
            {"name": "q", "loops": ["toy"], "models": alias, "config": {"max_iterations": 1, "model": "judge"}},
            topics(1),
        )
        assert main(["sweep", str(exp), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
        said = capsys.readouterr()
        assert "api-key=***" in said.err and SECRET not in said.out + said.err
        assert not (tmp_path / "out" / "experiment.yaml").exists() and server.requests == 0
