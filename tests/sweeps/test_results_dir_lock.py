"""#28 item 2: a results directory is locked to one sweep. A second sweep on it stops before any call or write,
naming the holder (exit 2); once the first ends, or is killed, the directory is free again."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import pytest
import reliability_scenarios as rs
from fault_server import FaultServer, Reply

from promptlab.cli import main
from promptlab.results.store import load
from promptlab.sweeps.dirlock import LOCK_NAME, ResultsDirBusy, hold_results_dir


def test_a_second_sweep_in_this_process_is_stopped(tmp_path: Path) -> None:
    with hold_results_dir(tmp_path / "out"):
        with pytest.raises(ResultsDirBusy, match=r"in use by another sweep \(pid \d+ on .*started"):
            with hold_results_dir(tmp_path / "out"):
                pass
    with hold_results_dir(tmp_path / "out"):  # free again
        pass


def test_two_sweep_processes_on_one_results_dir(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rs.write_experiment(tmp_path, styles=("a", "b"), tasks=2, max_iterations=1)
    out, cache = tmp_path / "out", tmp_path / "cache"
    release = threading.Event()
    first_call = threading.Event()

    def hold_first(index: int, address: tuple[str, int]) -> None:
        first_call.set()
        release.wait(60)  # the first sweep stays in its first call until the second one has tried

    with FaultServer(default=Reply(rs.REPLY.text), on_request=hold_first) as server, rs.routed(server) as env:
        proc = rs.sweep_process(path, out, cache, env)
        assert first_call.wait(120), proc.communicate()
        holder = json.loads((out / LOCK_NAME).read_text())
        assert holder["pid"] == proc.pid
        requests = server.requests
        args = ["sweep", str(path), "--out", str(out), "--cache", str(tmp_path / "cache2"), "--no-progress"]
        assert main(args) == 2  # the second sweep, in this process
        err = capsys.readouterr().err
        assert f"in use by another sweep (pid {proc.pid}" in err and "--out" in err
        assert server.requests == requests  # it made no call
        release.set()
        assert proc.wait(120) == 0
        after_first = server.requests
        assert main(args) == 0  # free once the first ended: every cell was done, nothing is run again
        assert server.requests == after_first
    frame = load(out).runs
    assert frame["run_id"].is_unique and len(frame) == 4


def test_a_killed_holder_frees_the_results_dir(toy_dir: Path, tmp_path: Path) -> None:
    path = rs.write_experiment(tmp_path, styles=("a",), tasks=1, max_iterations=1)
    out, cache = tmp_path / "out", tmp_path / "cache"
    started = threading.Event()
    with FaultServer(default="hang", on_request=lambda i, a: started.set()) as server:
        with rs.routed(server) as env:
            proc = rs.sweep_process(path, out, cache, env)
            assert started.wait(120)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            with hold_results_dir(out):  # kill -9 released it: a resume can start
                pass
