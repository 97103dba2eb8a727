"""The MLflow export against a real tracking server the tests start on 127.0.0.1 (`mlflow server`, SQLite store):
what an export writes reads back through `MlflowClient` equal to the tidy frames, row for row; a second export
adds no run; a live sweep logs its runs as its cells finish (inline, Dask and papermill); a tracker killed mid-sweep
costs no run and no cell, is named in one line, and a later export fills in what it missed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exported import TARGET, register_target, start_mlflow_server, stop_server, write_experiment
from fault_server import free_port
from overlap import eventually

from promptlab.exports.mlflow_export import export_mlflow
from promptlab.exports.mlflow_live import LiveMlflow
from promptlab.exports.mlflow_payload import FINALS, HISTORIES, text_of
from promptlab.record import Run
from promptlab.results.configs import run_configs
from promptlab.results.store import load, read_runs
from promptlab.sweeps.plan import CellOutcome
from promptlab.sweeps.run import sweep

mlflow = pytest.importorskip("mlflow", reason="mlflow is not installed (pip install 'promptlab-loops[mlflow]')")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, uri = start_mlflow_server(tmp_path_factory.mktemp("mlflow-server"))
    yield uri
    stop_server(proc)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished grounded sweep (16 runs: 2 loops x 2 caps x 2 tasks x 2 replicates) with its report."""
    from promptlab.reports.summary import report

    root = tmp_path_factory.mktemp("sweep")
    register_target()
    sweep(write_experiment(root, target=TARGET), root / "results", progress=False, cache=root / "cache")
    report(root / "results", bias_budget=0)
    return root / "results"


def nested(client: Any, uri_parent: str, experiment_id: str) -> dict[str, Any]:
    """promptlab run id -> the nested MLflow run under the sweep's parent run."""
    runs = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{uri_parent}'", max_results=1000)
    return {r.data.tags["promptlab.run_id"]: r for r in runs}


def present(value: Any) -> bool:
    return (
        value is not None
        and value is not __import__("pandas").NA
        and not (isinstance(value, float) and math.isnan(value))
    )


def test_an_exported_sweep_reads_back_equal_to_the_frames_and_a_second_export_adds_no_run(
    server: str, results: Path, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    frames = load(results)
    first = export_mlflow(results, server)
    assert (first.created, first.updated, first.unchanged) == (len(frames.runs), 0, 0)
    client = MlflowClient(server)
    experiment = client.get_experiment_by_name("exp")
    assert experiment is not None
    parents = client.search_runs([experiment.experiment_id], "tags.`promptlab.role` = 'sweep'")
    assert [p.info.run_id for p in parents] == [first.parent_run_id]
    assert parents[0].data.tags["promptlab.results_dir"] == str(results.resolve())
    runs = nested(client, first.parent_run_id, experiment.experiment_id)
    assert sorted(runs) == sorted(frames.runs["run_id"])

    configs = run_configs(frames)
    iterations = frames.iterations()
    for row in frames.runs.to_dict("records"):
        got = runs[row["run_id"]]
        params, metrics, tags = got.data.params, got.data.metrics, got.data.tags
        for name in ("loop", "task_id", "cell_id", "critic_model", "target_model"):
            assert params[name] == row[name], name
        assert params["sample"] == str(row["sample"])
        assert params["max_iterations"] == str(row["max_iterations"])
        assert {k: params[k] for k in configs[row["run_id"]]} == {
            k: text_of(v) for k, v in configs[row["run_id"]].items()
        }
        for key, column in FINALS.items():  # final metrics: equal to the runs frame, absent where it has no value
            assert (metrics.get(key) == float(row[column])) if present(row[column]) else key not in metrics, key
        its = iterations[iterations["run_id"] == row["run_id"]].sort_values("iteration")
        for key, read in HISTORIES.items():  # histories: one point per iteration that has a value, step = iteration
            cols = [read] if isinstance(read, str) else list(read)
            expected = [
                (int(it["iteration"]), float(sum(it[c] for c in cols)))
                for it in its.to_dict("records")
                if all(present(it[c]) for c in cols)
            ]
            history = sorted((m.step, m.value) for m in client.get_metric_history(got.info.run_id, key))
            assert history == expected, key
        assert tags["provenance.promptlab_version"] == row["promptlab_version"]
        assert tags["provenance.task_hash"] == row["task_hash"]
        assert tags["provenance.experiment_hash"] == row["experiment_hash"]
        assert got.info.status == "FINISHED"
    # the record artifact is the run's JSON record, whole
    some = frames.runs.iloc[0]
    record = Path(client.download_artifacts(runs[some["run_id"]].info.run_id, "record/run.json", str(tmp_path)))
    [original] = [r for r in read_runs(results, some["cell_id"]) if r.run_id == some["run_id"]]
    assert Run.model_validate_json(record.read_text()) == original
    # the sweep's parent holds the experiment file and the report's summary and charts
    artifacts = {a.path for a in client.list_artifacts(first.parent_run_id)} | {
        a.path for a in client.list_artifacts(first.parent_run_id, "report")
    }
    assert {"experiment.yaml", "report/summary.md"} <= artifacts
    assert any(a.endswith(".png") for a in artifacts)

    second = export_mlflow(results, server)
    assert (second.created, second.updated, second.unchanged) == (0, 0, len(frames.runs))
    assert second.parent_run_id == first.parent_run_id
    assert len(nested(client, first.parent_run_id, experiment.experiment_id)) == len(frames.runs)
    assert len(client.search_runs([experiment.experiment_id], "")) == len(frames.runs) + 1

    # a run left incomplete (its digest tag not yet written) is completed in place: no point is logged twice
    incomplete = runs[some["run_id"]].info.run_id
    client.delete_tag(incomplete, "promptlab.export_digest")
    before = {k: len(client.get_metric_history(incomplete, k)) for k in HISTORIES}
    third = export_mlflow(results, server)
    assert (third.created, third.updated, third.unchanged) == (0, 1, len(frames.runs) - 1)
    assert {k: len(client.get_metric_history(incomplete, k)) for k in HISTORIES} == before


def test_a_live_sweep_logs_each_cell_s_runs_while_the_sweep_runs(server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    register_target()
    exp = write_experiment(tmp_path, target=TARGET, name="live")
    out = tmp_path / "results"
    lines: list[str] = []
    live = LiveMlflow(out, server, say=lines.append, drain_s=300)
    client = MlflowClient(server)
    seen_during: list[bool] = []

    def on_cell(outcome: CellOutcome) -> None:
        live.cell_finished(outcome)
        # while the sweep still runs, this cell's runs reach the tracker (one worker: the next cell waits here)
        ids = {r.run_id for r in read_runs(out, outcome.cell_id)}
        seen_during.append(eventually(lambda: ids <= logged_ids(client, "live"), within_s=120))

    result = sweep(exp, out, workers=1, progress=False, on_cell=on_cell, cache=tmp_path / "cache")
    live.close()
    assert result.failed == 0 and seen_during == [True] * len(result.cells)
    assert live.problem is None
    assert logged_ids(client, "live") == set(load(out).runs["run_id"])
    # it ends with one line: the tracker, the experiment and the runs logged
    runs, cells = len(load(out).runs), len(result.cells)
    experiment = client.get_experiment_by_name("live").experiment_id
    assert lines == [
        f"promptlab: MLflow tracker {server}: {runs} run(s) of {cells} cell(s) logged to experiment 'live' "
        f"(id {experiment}), under sweep run {live.summary.parent_run_id if live.summary else None}"
    ]


def logged_ids(client: Any, experiment: str) -> set[str]:
    """The promptlab run ids the tracker holds complete in `experiment` (none while it does not answer)."""
    from mlflow.exceptions import MlflowException

    try:
        return complete_ids(client, experiment)
    except (MlflowException, OSError):
        return set()


def complete_ids(client: Any, experiment: str) -> set[str]:
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return set()
    runs = client.search_runs([found.experiment_id], "tags.`promptlab.role` = 'run'", max_results=1000)
    return {r.data.tags["promptlab.run_id"] for r in runs if "promptlab.export_digest" in r.data.tags}


@pytest.mark.parametrize("executor", ["dask", "papermill"])
def test_a_live_sweep_in_other_processes_logs_its_runs(executor: str, server: str, tmp_path: Path) -> None:
    if executor == "dask":
        pytest.importorskip("distributed")
    from mlflow.tracking import MlflowClient

    name = f"live-{executor}"
    exp = write_experiment(tmp_path, target="fake/auto", replicates=1, name=name)
    out = tmp_path / "results"
    lines: list[str] = []
    live = LiveMlflow(out, server, say=lines.append, drain_s=300)
    result = sweep(
        exp, out, executor=executor, workers=1, progress=False, on_cell=live.cell_finished, cache=tmp_path / "cache"
    )
    live.close()
    assert result.failed == 0 and result.done == len(result.cells) == 4
    assert len(lines) == 1 and f"{len(load(out).runs)} run(s) of 4 cell(s) logged to experiment '{name}'" in lines[0]
    assert logged_ids(MlflowClient(server), name) == set(load(out).runs["run_id"])


def test_a_tracker_killed_mid_sweep_costs_no_run_and_no_cell_and_is_named_once(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    register_target()
    store = tmp_path / "tracker"
    proc, uri = start_mlflow_server(store)
    port = int(uri.rsplit(":", 1)[1])
    exp = write_experiment(tmp_path, target=TARGET, name="killed")
    out = tmp_path / "results"
    lines: list[str] = []
    live = LiveMlflow(out, uri, say=lines.append, drain_s=60)
    client = MlflowClient(uri)
    try:

        def on_cell(outcome: CellOutcome) -> None:
            live.cell_finished(outcome)
            if proc.poll() is None:  # after the first cell is on the tracker, the tracker dies
                ids = {r.run_id for r in read_runs(out, outcome.cell_id)}
                assert eventually(lambda: ids <= logged_ids(client, "killed"), within_s=120)
                stop_server(proc, kill=True)

        result = sweep(exp, out, workers=1, progress=False, on_cell=on_cell, cache=tmp_path / "cache")
        live.close()
        frames = load(out)
        assert result.failed == 0 and result.done == len(result.cells) == 4  # no cell lost
        assert len(frames.runs) == 16  # no run lost
        assert len(lines) == 1 and uri in lines[0] and "promptlab export mlflow" in lines[0]
        assert live.problem is not None

        proc, uri = start_mlflow_server(store, port)  # the same store, back up: an export fills in what was missed
        summary = export_mlflow(out, uri)
        assert summary.created == 16 - 4 and summary.unchanged == 4
        assert logged_ids(MlflowClient(uri), "killed") == set(frames.runs["run_id"])
    finally:
        stop_server(proc)


def test_the_sweep_command_with_its_tracker_down_ends_normally_and_names_it_once(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path, target="fake/auto", replicates=1, name="down")
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "promptlab.cli", "sweep", str(exp), "--out", str(tmp_path / "out"), "--mlflow", uri],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    named = [line for line in done.stderr.splitlines() if uri.removeprefix("http://") in line]
    assert len(named) == 1 and "live logging stopped, the sweep goes on" in named[0]
    assert (load(tmp_path / "out").cells["status"] == "ok").all()


def test_a_live_sweep_command_ends_with_one_line_naming_the_tracker_the_experiment_and_the_runs(
    server: str, tmp_path: Path
) -> None:
    exp = write_experiment(tmp_path, target="fake/auto", replicates=1, name="told")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "promptlab.cli", "sweep", str(exp), "--out", str(tmp_path / "out"), "--mlflow", server],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    named = [line for line in done.stderr.splitlines() if server in line]
    runs = len(load(tmp_path / "out").runs)
    assert len(named) == 1, done.stderr
    assert f"MLflow tracker {server}: {runs} run(s) of 4 cell(s) logged to experiment 'told'" in named[0]
