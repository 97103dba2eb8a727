"""Runs in flight follow the model limits (#19 item 3): without `--cell-concurrency`, a cell runs as many of its
tasks x replicates at once as the most limited of its models takes calls at once (an alias's max_concurrency, a
`--max-concurrency` override, else Settings.max_concurrency; a local model at most its llama.cpp instances), so
raising a model's limit raises the throughput with no second flag; a `--cell-concurrency` given wins. Counted at
a loopback server, which holds each call 0.4 s so that a cell's calls overlap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Gather, Reply

import promptlab as pl
from promptlab.cli import main
from promptlab.llm.call.request import concurrency_limit
from promptlab.llm.call.settings import Settings
from promptlab.llm.concurrency.limits import SHARE_ENV
from promptlab.llm.local.inprocess import MODEL_THREADS
from promptlab.llm.providers.resolved import resolve_model
from promptlab.sweeps.cells import runs_in_flight
from promptlab.sweeps.run import sweep

RUNS = 10
"""Runs of the one cell (5 tasks x 2 replicates): more than any limit below, so the limit shows."""
KEY_ENV = "LOOPBACK_FLIGHT_KEY"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, toy_dir: Path) -> Iterator[FaultServer]:
    """Every reply is a valid Grade (the toy loop's writer and judge both read it), held 0.4 s."""
    with FaultServer(default=Reply('{"score": 7}', delay_s=0.4)) as s:
        monkeypatch.setenv(KEY_ENV, "sk-loopback")
        monkeypatch.delenv(SHARE_ENV, raising=False)
        yield s


def experiment(tmp_path: Path, url: str, max_concurrency: int | None = 6) -> Path:
    """One toy cell of RUNS runs, one iteration each (a writer call, then a judge call), through the alias
    `writer` (its `max_concurrency` as given)."""
    alias: dict[str, Any] = {"model": "openai/test-model", "api_base": url, "api_key_env": KEY_ENV}
    if max_concurrency is not None:
        alias["max_concurrency"] = max_concurrency
    data = {
        "name": "flight",
        "loops": ["toy"],
        "replicates": 2,
        "models": {"writer": alias},
        "config": {"model": "writer", "max_iterations": 1},
    }
    return write_experiment(tmp_path, data, topics(RUNS // 2))


def test_the_runs_in_flight_follow_the_aliases_limit(server: FaultServer, tmp_path: Path) -> None:
    server.on_request = Gather(server, 6)  # the peak the limit allows, however busy the machine
    result = sweep(experiment(tmp_path, server.url), tmp_path / "out", progress=False)
    assert (result.done, result.failed) == (1, 0), str(result)
    assert server.requests == RUNS + 2  # a writer call per run; the judge sees one reply text: one call per sample
    assert server.peak == {"": 6}  # the alias's 6, not a fixed 4


def test_raising_max_concurrency_raises_the_runs_in_flight_without_a_second_flag(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = experiment(tmp_path, server.url, max_concurrency=None)  # an alias with no limit of its own: 4
    server.on_request = Gather(server, 8)
    assert (
        main(["sweep", str(path), "--out", str(tmp_path / "out"), "--max-concurrency", "writer=8", "--no-progress"])
        == 0
    ), capsys.readouterr().err
    assert "1 cells: 1 done, 0 failed" in capsys.readouterr().out
    assert server.peak == {"": 8}


def test_an_explicit_cell_concurrency_wins(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = experiment(tmp_path, server.url)
    server.on_request = Gather(server, 3)
    assert (
        main(
            [
                "sweep",
                str(path),
                "--out",
                str(tmp_path / "out"),
                "--max-concurrency",
                "writer=8",
                "--cell-concurrency",
                "3",
                "--no-progress",
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert server.peak == {"": 3}


def test_a_cell_run_by_id_follows_the_limits_of_its_process(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a papermill kernel or a Dask task runs: no concurrency given, the process's share of the limit."""
    from promptlab.sweeps.execute import run_cell_by_id
    from promptlab.sweeps.experiment import load_experiment

    path = experiment(tmp_path, server.url, max_concurrency=None)
    cell = load_experiment(path).cells()[0]
    monkeypatch.setenv(SHARE_ENV, "2")  # two kernels share writer=8
    server.on_request = Gather(server, 4)
    _, status, exc = run_cell_by_id(
        str(tmp_path / "out"),
        cell.cell_id,
        experiment_path=str(path),
        settings_json=Settings(per_model_concurrency={"writer": 8}).to_json(),
    )
    assert exc is None and status["status"] == "ok" and status["n_runs"] == RUNS
    assert server.peak == {"": 4}


# the rule ---------------------------------------------------------------------------------------------------------
def test_the_most_limited_model_sets_the_runs_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    pl.register_model("big", model="openai/big", api_base="http://127.0.0.1:9/v1", max_concurrency=32)
    pl.register_model("small", model="openai/small", api_base="http://127.0.0.1:9/v1", max_concurrency=3)
    assert runs_in_flight(["big"]) == 32
    assert runs_in_flight(["big", "small"]) == 3
    assert runs_in_flight(["big", "fake/auto"]) == 4  # a model with no limit of its own: Settings.max_concurrency
    assert runs_in_flight(["big", "fake/auto"], Settings(max_concurrency=9)) == 9
    assert runs_in_flight(["big"], Settings(per_model_concurrency={"big": 12})) == 12  # the override wins
    assert runs_in_flight(["big"], Settings(per_model_concurrency={"openai/big": 40})) == 40  # by what it stands for
    assert runs_in_flight([]) == 4
    monkeypatch.setenv(SHARE_ENV, "4")  # four kernels share each limit
    assert runs_in_flight(["big"]) == 8 and runs_in_flight(["small"]) == 1


def test_a_local_model_takes_no_more_runs_than_it_has_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "pool")
    monkeypatch.setenv("PROMPTLAB_LOCAL_INSTANCES", "2")
    assert runs_in_flight(["local/smollm2"]) == 2
    assert runs_in_flight(["local/smollm2"], Settings(per_model_concurrency={"local/smollm2": 64})) == 2
    pl.register_model("smol", model="local/smollm2", max_concurrency=16)
    assert runs_in_flight(["smol"]) == 2  # an alias of a local model too
    monkeypatch.setenv("PROMPTLAB_LOCAL_INSTANCES", "8")
    assert runs_in_flight(["local/smollm2"]) == 8  # its instances are its limit
    assert runs_in_flight(["local/smollm2"], Settings(per_model_concurrency={"local/smollm2": 6})) == 6


def test_a_local_model_on_the_batching_engine_takes_as_many_runs_as_it_decodes_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "batch")
    monkeypatch.setenv("PROMPTLAB_LOCAL_INSTANCES", "2")  # the pool's setting: not the engine's limit
    monkeypatch.setenv("PROMPTLAB_ENGINE_SEQS", "24")
    assert runs_in_flight(["local/smollm2"]) == 24
    assert runs_in_flight(["local/smollm2"], Settings(per_model_concurrency={"local/smollm2": 6})) == 6


def test_a_local_model_lets_its_waiting_calls_queue_at_its_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls beyond the instances wait in the instance queue (where prefix affinity picks among them), not at a
    limit of a few calls in front of it; an override or an alias still sets the limit."""
    monkeypatch.delenv(SHARE_ENV, raising=False)
    assert concurrency_limit(resolve_model("local/smollm2")) == MODEL_THREADS
    assert concurrency_limit(resolve_model("local/smollm2"), Settings(per_model_concurrency={"local/smollm2": 3})) == 3
    pl.register_model("smol2", model="local/smollm2", max_concurrency=5)
    assert concurrency_limit(resolve_model("smol2")) == 5
    assert (
        concurrency_limit(resolve_model("fake/auto")) == Settings().max_concurrency
    )  # other in-process models keep the default


def test_the_run_cell_notebook_leaves_the_runs_in_flight_to_the_models() -> None:
    """The papermill executor hands its kernels plan.cell_concurrency, None unless the sweep was given one."""
    from promptlab.sweeps.notebook import TEMPLATE

    source = "".join(json.loads(TEMPLATE.read_text())["cells"][1]["source"])
    assert "concurrency = None" in source
