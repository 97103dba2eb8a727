"""The dask executor: a LocalCluster of 2 worker processes gives the inline executor's results; a worker killed
mid-sweep still ends in a complete sweep, with no paid call made twice."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import toyloop  # the "toy" loop; its folder goes on the workers' PYTHONPATH
import yaml
from executions import RUN_ORDER, WALL_CLOCK, comparable, killed_and_seen, worker_owning
from fault_server import FaultServer, Reply, free_port
from overlap import eventually

from promptlab.errors import ConfigError
from promptlab.results.store import cell_status, load, read_runs
from promptlab.sweeps.executors import EXECUTORS
from promptlab.sweeps.experiment import Experiment
from promptlab.sweeps.run import sweep

pytest.importorskip("distributed")


def grid_experiment(tmp_path: Path) -> Experiment:
    (tmp_path / "tasks.jsonl").write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"Write a poem about {w}.", "goal": "A haiku."}) + "\n"
            for i, w in enumerate(["rain", "salt"])
        ),
        encoding="utf-8",
    )
    return Experiment.from_dict(
        {
            "name": "dk",
            "loops": ["p3ro", "creator_critic"],
            "tasks": "tasks.jsonl",
            "config": {"model": "fake/auto", "max_tokens": 64},
            "grid": {"max_iterations": [1, 2]},
        },
        tmp_path,
    )


def test_an_unknown_executor_lists_the_known_ones(tmp_path: Path) -> None:
    assert {"inline", "papermill", "dask"} <= set(EXECUTORS)
    with pytest.raises(ConfigError, match="known: dask, inline, papermill"):
        sweep(grid_experiment(tmp_path), tmp_path / "out", executor="ray", progress=False)
    with pytest.raises(ConfigError, match="scheduler: only the dask executor"):
        sweep(grid_experiment(tmp_path), tmp_path / "out", scheduler="tcp://127.0.0.1:1", progress=False)
    import dask

    with (
        pytest.raises(ConfigError, match="scheduler: cannot reach the Dask scheduler at 'tcp://127.0.0.1:"),
        dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
    ):
        sweep(
            grid_experiment(tmp_path),
            tmp_path / "out",
            executor="dask",
            progress=False,
            scheduler=f"tcp://127.0.0.1:{free_port()}",
        )


@pytest.mark.slow
def test_a_local_cluster_gives_the_inline_results(tmp_path: Path) -> None:
    exp = grid_experiment(tmp_path)
    inline = sweep(exp, tmp_path / "inline", cache=tmp_path / "cache1", progress=False)
    dask = sweep(exp, tmp_path / "dask", executor="dask", workers=2, cache=tmp_path / "cache2", progress=False)
    assert (dask.done, dask.failed, dask.executor) == (4, 0, "dask"), str(dask)
    assert [c.cell_id for c in dask.cells] == [c.cell_id for c in inline.cells]
    for cell in dask.cells:
        a = {(r.task.id, r.sample): comparable(r) for r in read_runs(tmp_path / "inline", cell.cell_id)}
        b = {(r.task.id, r.sample): comparable(r) for r in read_runs(tmp_path / "dask", cell.cell_id)}
        assert a == b and len(a) == 2
    frames = [load(tmp_path / d).runs.sort_values(RUN_ORDER, ignore_index=True) for d in ("inline", "dask")]
    keep = [c for c in frames[0].columns if c not in WALL_CLOCK]
    assert frames[0][keep].equals(frames[1][keep])
    # the progress figures are the runs' totals
    runs, spend = frames[1], dask.spend
    assert (spend.calls, spend.cache_hits) == (int(runs["calls"].sum()), int(runs["cache_hits"].sum()))
    assert spend.tokens == int(runs["spent_tokens"].sum()) > 0
    assert spend.cost_usd == pytest.approx(float(runs["spent_cost_usd"].sum()))
    # a second dask sweep into the same dir has nothing to do
    again = sweep(exp, tmp_path / "dask", executor="dask", workers=2, cache=tmp_path / "cache2", progress=False)
    assert (again.skipped, again.spend.calls) == (4, 0)


def reply_for(body: dict[str, Any]) -> Reply:
    """A reply that depends on the request, so different requests never share a body downstream."""
    text = json.dumps(body["messages"])
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    if "Grade 1-10" in text:
        return Reply(json.dumps({"score": int(digest, 16) % 5 + 1}), 20, 4, delay_s=0.15)
    return Reply(f"Improved prompt {digest[:12]}", 15, 6, delay_s=0.15)


@pytest.mark.slow
def test_a_killed_worker_ends_in_a_complete_sweep_without_paying_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dask

    tests_dir = Path(toyloop.__file__).parent
    (tmp_path / "tasks.jsonl").write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"Describe place {i}.", "goal": "Vivid."}) + "\n" for i in range(2)
        ),
        encoding="utf-8",
    )
    path = tmp_path / "exp.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "kill",
                "loops": ["toy"],
                "tasks": "tasks.jsonl",
                "config": {"model": "openai/test-model", "max_iterations": 2, "env_log": str(tmp_path / "env.txt")},
                "grid": {"style": ["plain", "terse", "lush", "dry"]},
            }
        ),
        encoding="utf-8",
    )
    killed: list[int] = []  # the killed worker's pid
    killed_at: list[int] = []  # the index of the request it was killed at
    sent: Counter[int] = Counter()  # requests by worker pid
    lock = threading.Lock()

    def kill_at_a_workers_third(index: int, address: tuple[str, int]) -> None:
        # the first worker to send its third request dies while that reply is held back: it is never delivered.
        # A worker runs one cell at a time and a cell's calls one at a time (8 per cell), so its first two calls
        # were answered and stored in the shared cache, and the cell's retry must replay them (on a loaded machine
        # a fixed request number could be a worker's first, with nothing to replay)
        with lock:
            if killed:
                return
            pid = worker_owning(address, server.port)
            assert pid is not None and pid != os.getpid()
            sent[pid] += 1
            if sent[pid] == 3:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                killed_at.append(index)
                # the reply goes out only once the worker is gone and the server has seen its connection close
                # (its main thread is a zombie before its other threads end and its sockets close)
                assert eventually(lambda: killed_and_seen(pid, address, server.port), within_s=60)

    with FaultServer(responder=reply_for, on_request=kill_at_a_workers_third) as server:
        for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
            monkeypatch.setenv(name, server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tests_dir), os.environ.get("PYTHONPATH", "")]))

        with dask.config.set({"distributed.worker.preload": ["toyloop"]}):
            result = sweep(
                path,
                tmp_path / "out",
                executor="dask",
                workers=2,
                cell_concurrency=1,
                cache=tmp_path / "cache",
                progress=False,
            )
        bodies = [json.dumps(b, sort_keys=True) for b in server.bodies]
        delivered = [b for b, ok in zip(bodies, server.delivered, strict=True) if ok]

    assert killed, "no worker was killed"
    assert (result.done, result.failed) == (4, 0), str(result)
    assert all(cell_status(tmp_path / "out", c.cell_id)["status"] == "ok" for c in result.cells)  # type: ignore[index]
    runs = load(tmp_path / "out").runs
    assert len(runs) == 8 and (runs["n_errors"] == 0).all()
    assert not server.delivered[killed_at[0]]  # the killed worker's third request
    # each of the LocalCluster's 2 worker processes (and the restarted one) took half of each model's limits
    lines = (tmp_path / "env.txt").read_text().split("\n")[:-1]
    assert len({line.split()[0] for line in lines}) >= 2 and {line.split()[1] for line in lines} == {"2"}
    twice = {b: n for b, n in Counter(delivered).items() if n > 1}
    assert not twice, f"{len(twice)} paid request(s) answered more than once"
    # the retried cell replayed from the shared cache the two calls its killed attempt had paid for: every call
    # of the final runs was paid exactly once
    assert result.spend.cache_hits >= 2
    assert int(runs["calls"].sum()) == len(delivered)


@pytest.mark.slow
def test_failures_are_recorded_on_a_scheduler_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dask
    from distributed import LocalCluster

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(toyloop.__file__).parent), os.environ.get("PYTHONPATH", "")])
    )

    (tmp_path / "tasks.jsonl").write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"Describe place {i}.", "goal": "Vivid."}) + "\n" for i in range(2)
        ),
        encoding="utf-8",
    )
    path = tmp_path / "exp.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "fails",
                "loops": ["toy"],
                "tasks": "tasks.jsonl",
                "config": {"model": "fake/auto", "max_iterations": 1},
                "grid": {"fail_on": [None, "t0"], "exit_on": [None, "t1"]},
            }
        ),
        encoding="utf-8",
    )
    # a worker that dies fails its tasks at once (no retry on another worker). Dask places each of the 4 cells on
    # a worker as it is submitted (too few to be held on the scheduler), so a dying worker may hold another cell
    # too: with 4 threads a worker runs every cell it holds at once, and a dying one waits until the other two
    # cells have written their status, so which cells shared its worker does not decide what is recorded
    monkeypatch.setenv("TOYLOOP_EXIT_AFTER_CELLS", f"2:{tmp_path / 'out'}")
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.worker.preload": ["toyloop"]}),
        LocalCluster(n_workers=2, threads_per_worker=4, processes=True, dashboard_address=":0") as cluster,
    ):
        result = sweep(
            path,
            tmp_path / "out",
            executor="dask",
            scheduler=cluster.scheduler_address,
            cell_concurrency=1,
            progress=False,
        )
    assert (result.done, result.failed) == (1, 3), str(result)
    errors = {
        json.dumps(c.params, sort_keys=True): cell_status(tmp_path / "out", c.cell_id)["error"]  # type: ignore[index]
        for c in result.cells
        if c.status == "failed"
    }
    raised = errors.pop(json.dumps({"loop": "toy", "fail_on": "t0", "exit_on": None}, sort_keys=True))
    assert (raised["kind"], raised["ename"]) == ("SweepCellError", "RuntimeError")
    assert "fails on task t0" in raised["evalue"]
    for err in errors.values():  # the two cells whose worker died: an outage, never ok
        assert (err["kind"], err["ename"]) == ("infrastructure", "KilledWorker"), err
    assert len(load(tmp_path / "out").runs) == 2  # the ok cell's


@pytest.mark.slow
def test_a_local_cluster_gives_each_worker_one_cell_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first cell kills its worker at once (and a dead worker fails its tasks, with no retry): the 3 others
    finish ok, as none of them was waiting on the worker that died."""
    import dask

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(toyloop.__file__).parent), os.environ.get("PYTHONPATH", "")])
    )
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "t0", "prompt": "Describe a harbour.", "goal": "Vivid."}) + "\n", encoding="utf-8"
    )
    path = tmp_path / "exp.yaml"
    spec = {"name": "one-each", "loops": ["toy"], "tasks": "tasks.jsonl", "config": {"model": "fake/auto"}}
    path.write_text(yaml.safe_dump({**spec, "grid": {"exit_on": ["t0", "x1", "x2", "x3"]}}), encoding="utf-8")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.worker.preload": ["toyloop"]}):
        result = sweep(path, tmp_path / "out", executor="dask", workers=2, progress=False)
    failed = [c for c in result.cells if c.status == "failed"]
    assert (result.done, [c.params["exit_on"] for c in failed]) == (3, ["t0"]), str(result)
    assert cell_status(tmp_path / "out", failed[0].cell_id)["error"]["ename"] == "KilledWorker"  # type: ignore[index]


def test_a_task_run_again_returns_its_cell_s_outcome_without_running_it(tmp_path: Path) -> None:
    """Dask recomputes a finished task whose result was lost with its worker: the cell has this sweep's status
    already (the sweep removed the old ones), so the task returns it, and runs and rewrites nothing."""
    from promptlab.sweeps.dask import run_cell_task

    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "t0", "prompt": "Describe a harbour.", "goal": "Vivid."}) + "\n", encoding="utf-8"
    )
    counter = tmp_path / "runs.txt"
    path = tmp_path / "exp.yaml"
    spec = {"name": "again", "loops": ["toy"], "tasks": "tasks.jsonl"}
    path.write_text(yaml.safe_dump({**spec, "config": {"model": "fake/auto", "counter": str(counter)}}))
    out = tmp_path / "out"
    result = sweep(path, out, cache=tmp_path / "cache", progress=False)
    (cell,) = result.cells
    before = {p.name: p.stat().st_mtime_ns for p in (out / "cells" / cell.cell_id).iterdir()}
    status = run_cell_task(str(out), cell.cell_id, json.dumps(cell.params), str(tmp_path / "cache"), 1, {})
    assert status == cell_status(out, cell.cell_id) and status["status"] == "ok"  # type: ignore[index]
    assert counter.read_text().count("\n") == 1  # the sweep's run only
    assert {p.name: p.stat().st_mtime_ns for p in (out / "cells" / cell.cell_id).iterdir()} == before
