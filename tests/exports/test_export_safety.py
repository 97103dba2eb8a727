"""What the exports never do: run without their library unannounced (the error names the `pip install` that fixes
it, before any work), or carry a secret (an API key of the environment, a password in a URL) to MLflow's params,
tags or artifacts or into an Inspect log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from grounded import grounded_run

from promptlab.cli import main
from promptlab.record import Example, Split, Step
from promptlab.results.store import write_cell

KEY = "sk-planted-0123456789abcdefXYZ"
PASSWORD = "hunter2-planted-pw"


@pytest.mark.parametrize(
    ("module", "argv", "extra"),
    [
        ("mlflow", ["export", "mlflow", "RESULTS"], "mlflow"),
        ("inspect_ai", ["export", "inspect", "RESULTS"], "inspect"),
        ("mlflow", ["sweep", "EXPERIMENT", "--mlflow"], "mlflow"),
    ],
)
def test_without_its_extra_a_command_names_the_pip_install_that_fixes_it(
    module: str,
    argv: list[str],
    extra: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from exported import write_experiment

    results = write_secret_results(tmp_path / "results")
    experiment = write_experiment(tmp_path / "exp", replicates=1)
    monkeypatch.setitem(sys.modules, module, None)  # what an environment without the package gives
    monkeypatch.chdir(tmp_path)
    argv = [str(results) if a == "RESULTS" else str(experiment) if a == "EXPERIMENT" else a for a in argv]
    assert main([*argv, *(["--out", str(tmp_path / "out")] if argv[0] == "sweep" else [])]) == 2
    err = capsys.readouterr().err
    assert f"pip install 'promptlab-loops[{extra}]'" in err
    assert not (tmp_path / "out").exists()  # the sweep did not start
    assert not (results / "mlflow.db").exists() and not (results / "inspect").exists()


def write_secret_results(results: Path) -> Path:
    """A results dir whose run record, written under another environment, holds KEY and a URL with PASSWORD in its
    task, config, provenance and an example reply; its experiment file holds them too."""
    run = grounded_run({"loop": "p3ro", "finish_threshold": 8.0, "max_iterations": 3}, "t1", 0)
    run.task.goal = f"Use the key {KEY} nowhere."
    run.task.examples = [Example(input=f"item {i}", target="yes") for i in range(4)]
    run.task.scorer = {"kind": "exact"}
    run.task.split = Split(seed=0, dev=2, test=2)
    run.config["api_base"] = f"http://user:{PASSWORD}@proxy.example/v1"
    run.provenance["models"] = {"target": {"endpoint": f"http://user:{PASSWORD}@proxy.example/v1"}}
    run.iterations[0].steps.append(
        Step(
            iteration=1,
            phase="score_dev",
            role="target",
            model="fake/t",
            output={"text": f"{KEY} yes", "example": 0, "score": 0.0},
        )
    )
    write_cell(results, "c1", {"loop": "p3ro", "finish_threshold": 8.0, "max_iterations": 3}, [run])
    (results / "experiment.yaml").write_text(f"name: secret\ndescription: key {KEY} at http://u:{PASSWORD}@h/\n")
    return results


def test_no_secret_reaches_mlflow_params_tags_or_artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from promptlab.exports.mlflow_export import default_tracking_uri, export_mlflow

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    results = write_secret_results(tmp_path / "results")
    summary = export_mlflow(results)
    assert summary.created == 1
    client = MlflowClient(default_tracking_uri(results))
    texts: list[str] = []
    for run in client.search_runs([summary.experiment_id], ""):
        texts += [json.dumps(run.data.params), json.dumps(run.data.tags), run.info.run_name or ""]
        folder = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / run.info.run_id)))
        texts += [p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()]
    everything = "\n".join(texts)
    assert "[REDACTED:OPENAI_API_KEY]" in everything  # the record and the params are there, cleaned
    assert KEY not in everything and PASSWORD not in everything


def test_no_secret_reaches_an_inspect_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log

    from promptlab.exports.inspect_log import export_inspect

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    [path] = export_inspect(write_secret_results(tmp_path / "results"))
    text = read_eval_log(str(path)).model_dump_json()
    assert "[REDACTED:OPENAI_API_KEY]" in text
    assert KEY not in text and PASSWORD not in text
