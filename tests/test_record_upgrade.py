"""A run's models are its roles, each once (issue 53): a one-critic Creator/Critic run names one critic, `critic`,
in its record, its frames, its MLflow params and its Inspect header; several critics are `critic[1]`, `critic[2]`,
...; and a record written before, with `critic[1]` beside a copy named `critic`, reads as a new one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exported import tasks

from promptlab.exports.mlflow_payload import run_payloads
from promptlab.loops.creator_critic import CreatorCriticConfig, run_creator_critic
from promptlab.record import Run, Task
from promptlab.results.store import load, read_runs, write_cell


def one_critic_run(tmp_path: Path, **config: object) -> Run:
    task = Task.model_validate(tasks()[0])
    cfg = CreatorCriticConfig.model_validate(
        {"model": "fake/auto", "critic_model": "sim/oracle", "max_iterations": 1, "max_tokens": 64, **config}
    )
    return run_creator_critic(task, cfg, cache=tmp_path / "cache")


def names_of(run: Run) -> set[str]:
    """Every judge, step role, error role and info critic the record names."""
    judges = {s.judge for it in run.iterations for s in it.scores}
    roles = {s.role for it in run.iterations for s in it.steps} | {e.role for e in run.errors}
    return judges | roles | {c["judge"] for c in run.info["critics"]} | set(run.info["per_critic"])


def test_a_one_critic_run_names_one_critic_in_its_record_frames_mlflow_params_and_inspect_header(
    tmp_path: Path,
) -> None:
    pytest.importorskip("inspect_ai")
    from promptlab.exports.inspect_log import eval_log
    from promptlab.sanitize import Cleaner

    run = one_critic_run(tmp_path)
    assert run.models == {"creator": "fake/auto", "critic": "sim/oracle", "target": "fake/auto"}
    assert "critic" in names_of(run) and not any("[" in n for n in names_of(run))
    write_cell(tmp_path / "results", "c1", {"loop": "creator_critic"}, [run])
    frames = load(tmp_path / "results")
    assert set(frames.trajectories["judge"].dropna()) == {"critic"}
    assert set(frames.trajectories["critic_model"].dropna()) == {"sim/oracle"}
    (payload,) = run_payloads(read_runs(tmp_path / "results", "c1"), "c1", {"loop": "creator_critic"})
    models = {k: v for k, v in payload.params.items() if k.startswith("model.")}
    assert models == {"model.creator": "fake/auto", "model.critic": "sim/oracle", "model.target": "fake/auto"}
    log = eval_log(run, "c1", {"loop": "creator_critic"}, Cleaner())
    assert {role: m.model for role, m in (log.eval.model_roles or {}).items()} == {
        "creator": "fake/auto",
        "critic": "sim/oracle",
    }


def test_several_critics_are_numbered_from_the_first_with_no_joined_entry(tmp_path: Path) -> None:
    run = one_critic_run(tmp_path, critic_models=["sim/oracle", "sim/noisy?sd=2"])
    assert run.models == {
        "creator": "fake/auto",
        "critic[1]": "sim/oracle",
        "critic[2]": "sim/noisy?sd=2",
        "target": "fake/auto",
    }
    assert {s.judge for it in run.iterations for s in it.scores} == {"critic[1]", "critic[2]"}


def old_record(run: Run) -> str:
    """The run as the promptlab before issue 53 wrote it: its one critic as `critic[1]` (judge, step role, info),
    plus a copy named `critic` in its models."""
    data = json.loads(run.model_dump_json())
    for it in data["iterations"]:
        for score in it["scores"]:
            score["judge"] = "critic[1]"
        for step in it["steps"]:
            step["role"] = "critic[1]" if step["role"] == "critic" else step["role"]
    data["info"]["critics"][0]["judge"] = "critic[1]"
    data["info"]["per_critic"] = {"critic[1]": data["info"]["per_critic"]["critic"]}
    data["models"] = {"creator": "fake/auto", "critic[1]": "sim/oracle", "critic": "sim/oracle", "target": "fake/auto"}
    return json.dumps(data)


def test_a_results_directory_that_recorded_critic_1_reads_as_one_critic(tmp_path: Path) -> None:
    run = one_critic_run(tmp_path)
    old = old_record(run)
    assert '"critic[1]"' in old and json.loads(old)["iterations"][0]["scores"][0]["judge"] == "critic[1]"
    cell = tmp_path / "results" / "cells" / "c1"
    write_cell(tmp_path / "results", "c1", {"loop": "creator_critic"}, [run])
    (cell / "runs.jsonl").write_text(old + "\n", encoding="utf-8")  # the file as the old version left it
    (read,) = read_runs(tmp_path / "results", "c1")
    assert read == run  # upgraded on load; the file itself is unchanged
    assert '"critic[1]"' in (cell / "runs.jsonl").read_text(encoding="utf-8")
    assert set(load(tmp_path / "results").trajectories["judge"].dropna()) == {"critic"}


def test_an_old_several_critic_record_drops_only_its_joined_entry() -> None:
    data = {
        "run_id": "a" * 32,
        "loop": "creator_critic",
        "task": {"id": "t", "prompt": "p"},
        "config": {},
        "models": {"creator": "m", "critic": "x, y", "critic[1]": "x", "critic[2]": "y"},
        "iterations": [{"index": 1, "scores": [{"criterion": "overall", "score": 5, "judge": "critic[1]"}]}],
    }
    run = Run.model_validate(data)
    assert run.models == {"creator": "m", "critic[1]": "x", "critic[2]": "y"}
    assert run.iterations[0].scores[0].judge == "critic[1]"
