"""Call settings reach every executor's cells: a sweep's `settings` (`--max-concurrency`) hold in papermill
kernels (handed over in PROMPTLAB_SETTINGS) and on Dask workers (a task argument), each process taking its
share of a limit (PROMPTLAB_LIMIT_SHARE); a bad handed-over value is a ConfigError naming where it came from."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from experiment_files import write_experiment
from fault_server import FaultServer, Gather, Reply

from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.llm.call.settings import SETTINGS_ENV, Settings, settings_from_env, settings_from_json
from promptlab.results.store import load
from promptlab.sweeps.run import sweep

WORKERS, LIMIT, RUNS = 2, 8, 6
"""2 processes share `--max-concurrency writer=8`: each allows 4 in flight, of the 6 runs a cell starts at once
(without the settings a process allows the default 4 // 2 = 2; without the share, all 6)."""
KEY_ENV = "LOOPBACK_SETTINGS_KEY"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, toy_dir: Path) -> Iterator[FaultServer]:
    """A loopback server whose every reply is a valid Grade (writer and judge read it), held 0.4 s so a cell's
    calls overlap; the calls in flight are counted per cell (by the cell's max_tokens)."""
    with FaultServer(default=Reply('{"score": 7}', delay_s=0.4), group=lambda body: str(body.get("max_tokens"))) as s:
        monkeypatch.setenv(KEY_ENV, "sk-loopback")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]))
        monkeypatch.delenv("PROMPTLAB_LIMIT_SHARE", raising=False)
        monkeypatch.delenv(SETTINGS_ENV, raising=False)
        yield s


def experiment(tmp_path: Path, url: str) -> Path:
    """2 cells (max_tokens 100 and 101, so each cell's requests are told apart), 1 task x RUNS replicates."""
    data: dict[str, Any] = {
        "name": "limits",
        "loops": ["toy"],
        "replicates": RUNS,
        "models": {"writer": {"model": "openai/test-model", "api_base": url, "api_key_env": KEY_ENV}},
        "config": {"model": "writer", "max_iterations": 1},
        "grid": {"max_tokens": [100, 101]},
    }
    return write_experiment(tmp_path, data, [{"id": "a", "prompt": "Write about rain.", "goal": "Vivid."}])


def run_cell_template(tmp_path: Path) -> Path:
    """The run_cell notebook, importing the toy loop first."""
    import nbformat
    from nbformat import v4

    from promptlab.sweeps.notebook import run_cell_notebook

    nb = run_cell_notebook()
    nb.cells.insert(2, v4.new_code_cell("import toyloop"))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    path = tmp_path / "template.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_max_concurrency_reaches_each_papermill_kernel_divided_by_the_kernels(
    server: FaultServer, tmp_path: Path
) -> None:
    server.on_request = Gather(server, {"100": LIMIT // WORKERS, "101": LIMIT // WORKERS})  # however busy the machine
    result = sweep(
        experiment(tmp_path, server.url),
        tmp_path / "out",
        executor="papermill",
        workers=WORKERS,
        cell_concurrency=RUNS,
        progress=False,
        cache=tmp_path / "cache",
        settings=Settings(per_model_concurrency={"writer": LIMIT}),
        template=run_cell_template(tmp_path),
    )
    assert (result.done, result.failed) == (2, 0), str(result)
    assert len(load(tmp_path / "out").runs) == 2 * RUNS
    assert server.peak == {"100": LIMIT // WORKERS, "101": LIMIT // WORKERS}
    assert SETTINGS_ENV not in os.environ  # handed to the kernels only


@pytest.mark.slow
def test_max_concurrency_reaches_each_dask_worker_divided_by_the_workers(server: FaultServer, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    import dask

    server.on_request = Gather(server, {"100": LIMIT // WORKERS, "101": LIMIT // WORKERS})  # however busy the machine
    with dask.config.set({"distributed.worker.preload": ["toyloop"]}):
        result = sweep(
            experiment(tmp_path, server.url),
            tmp_path / "out",
            executor="dask",
            workers=WORKERS,
            cell_concurrency=RUNS,
            progress=False,
            cache=tmp_path / "cache",
            settings=Settings(per_model_concurrency={"writer": LIMIT}),
        )
    assert (result.done, result.failed) == (2, 0), str(result)
    assert server.peak == {"100": LIMIT // WORKERS, "101": LIMIT // WORKERS}


@pytest.mark.slow
def test_the_cli_hands_max_concurrency_to_papermill_kernels(
    server: FaultServer,
    tmp_path: Path,
    toy_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the CLI runs the shipped run_cell notebook: each kernel imports the toy loop from an IPython startup file
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-toyloop.py").write_text("import toyloop\n", encoding="utf-8")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    path = experiment(tmp_path, server.url)
    assert (
        main(
            [
                "sweep",
                str(path),
                "--out",
                str(tmp_path / "out"),
                "--executor",
                "papermill",
                "--workers",
                "2",
                "--cell-concurrency",
                str(RUNS),
                "--max-concurrency",
                "writer=2",
                "--cache",
                str(tmp_path / "cache"),
                "--no-progress",
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert "2 cells: 2 done, 0 failed" in capsys.readouterr().out
    assert server.peak == {"100": 1, "101": 1}  # writer=2 shared by 2 kernels (without it: 4 // 2 = 2 each)


def test_settings_round_trip_through_json() -> None:
    settings = Settings(
        retries=1, timeout_s=None, max_concurrency=3, per_model_concurrency={"judge": 32}, transport="litellm"
    )
    assert settings_from_json(settings.to_json(), "x") == settings
    assert settings_from_json(Settings().to_json(), "x") == Settings()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "PROMPTLAB_SETTINGS: not valid JSON"),
        ("[1]", "PROMPTLAB_SETTINGS: expected a JSON object of Settings fields, got list"),
        ('{"retries": 1, "retry": 2}', "PROMPTLAB_SETTINGS: unknown field(s) retry; known:"),
        ('{"max_concurrency": "many"}', "PROMPTLAB_SETTINGS: max_concurrency: 'many': Input should be a valid integer"),
        ('{"per_model_concurrency": {"judge": 2.5}}', "PROMPTLAB_SETTINGS: per_model_concurrency.judge: 2.5:"),
        ('{"transport": "carrier-pigeon"}', "PROMPTLAB_SETTINGS: Settings.transport: 'carrier-pigeon' is not one of"),
    ],
)
def test_a_bad_handed_over_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str, message: str) -> None:
    monkeypatch.setenv(SETTINGS_ENV, raw)
    with pytest.raises(ConfigError) as info:
        settings_from_env()
    assert message in str(info.value)
    monkeypatch.delenv(SETTINGS_ENV)
    assert settings_from_env() is None


def test_a_cell_run_by_hand_refuses_bad_settings_before_running(
    tmp_path: Path, toy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptlab.sweeps.execute import run_cell_by_id

    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "p", "goal": "g"}) + "\n")
    path = tmp_path / "exp.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "byhand",
                "loops": ["toy"],
                "tasks": "tasks.jsonl",
                "config": {"model": "fake/auto", "max_iterations": 1},
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="settings_json: not valid JSON"):
        run_cell_by_id(
            str(tmp_path / "out"), experiment_path=str(path), params_json='{"loop": "toy"}', settings_json="{"
        )
    monkeypatch.setenv(SETTINGS_ENV, '{"retries": -}')
    with pytest.raises(ConfigError, match="PROMPTLAB_SETTINGS: not valid JSON"):
        run_cell_by_id(str(tmp_path / "out"), experiment_path=str(path), params_json='{"loop": "toy"}')
    assert not (tmp_path / "out" / "cells").exists()  # refused before the cell ran
