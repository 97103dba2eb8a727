"""#28 item 3, the papermill executor: a full results disk met by a cell's kernel (writing the cell's results) or
by papermill (writing the executed notebook) ends the sweep as the inline executor's does: one line naming the
file and "no space left", exit 4 (not 2, "refused before it started"), no notebook cut short and no failed cell
recorded for it, no call paid again past the calls in flight, and the same sweep resumes once there is room.

Two ways to fill the disk: a real 2 MiB tmpfs nearly filled beforehand (as root, where `mount` works), and, for
any user, ENOSPC injected into every kernel's results writer (a `sitecustomize` on the kernels' PYTHONPATH)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fault_server import FaultServer, Reply
from full_disk import enospc_in_kernels, fill

from promptlab.cli import main
from promptlab.results.store import load

pytestmark = pytest.mark.slow  # kernels start per cell

KEY_ENV = "DISKFULL_KEY"
WORKERS = 2


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    """Counts every request: what a provider would bill."""
    with FaultServer(default=Reply('{"score": 7}')) as s:
        monkeypatch.setenv(KEY_ENV, "sk-loopback")
        yield s


def experiment(tmp_path: Path, url: str) -> Path:
    """Creator/Critic on the loopback server, 4 cells of 2 runs."""
    (tmp_path / "tasks.jsonl").write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"Write about rain {i}.", "goal": "Vivid."}) + "\n" for i in (0, 1)
        ),
        encoding="utf-8",
    )
    data: dict[str, Any] = {
        "name": "diskfull",
        "loops": ["creator_critic"],
        "tasks": "tasks.jsonl",
        "models": {"writer": {"model": "openai/test-model", "api_key_env": KEY_ENV, "api_base": url}},
        "config": {"model": "writer", "max_iterations": 1},
        "grid": {"temperature": [0.0, 0.1, 0.2, 0.3]},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def sweep_args(exp: Path, out: Path, cache: Path) -> list[str]:
    return [
        "sweep",
        str(exp),
        "--out",
        str(out),
        "--executor",
        "papermill",
        "--workers",
        str(WORKERS),
        "--cell-concurrency",
        "1",
        "--no-progress",
        "--cache",
        str(cache),
    ]


def uninterrupted_requests(tmp_path: Path, server: FaultServer) -> int:
    """The requests one sweep of the experiment makes, on a disk with room and a fresh cache (run inline: the
    same calls as in kernels, without starting them)."""
    base = tmp_path / "base"
    base.mkdir()
    before = server.requests
    args = sweep_args(experiment(base, server.url), base / "out", base / "cache")
    assert main([*args, "--executor", "inline"]) == 0
    return server.requests - before


def assert_stopped_named_and_whole(err: str, out: Path) -> None:
    """One line naming a file under `out` and the full disk; no notebook cut short, no cell failed for it."""
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"promptlab: error: {out}" in err and "no space left on the device holding the results" in err, err
    assert "run the same sweep again" in err
    for notebook in out.rglob("*.ipynb"):
        json.loads(notebook.read_bytes())  # whole: a notebook papermill could not finish writing is removed
    statuses = [json.loads(p.read_text()) for p in out.glob("cells/*/status.json")]
    assert all(s["status"] == "ok" for s in statuses), statuses  # the disk, not the cell, failed
    assert not list(out.rglob("*.tmp"))


def resumes(exp: Path, out: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(sweep_args(exp, out, cache)) == 0, capsys.readouterr().err
    cells = load(out).cells
    assert len(cells) == 4 and set(cells["status"]) == {"ok"}


@pytest.fixture
def small_disk(tmpfs: Callable[[str], Path]) -> Path:
    """A 2 MiB tmpfs (root only), unmounted after."""
    return tmpfs("2m")


def test_a_full_tmpfs_stops_a_papermill_sweep_named_and_it_resumes(
    small_disk: Path, server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = uninterrupted_requests(tmp_path, server)
    exp, out, cache = experiment(tmp_path, server.url), small_disk / "out", tmp_path / "cache"
    filler = fill(small_disk, 120 * 2**10)  # room for a cell or two of results and notebooks
    capsys.readouterr()
    before = server.requests
    assert main(sweep_args(exp, out, cache)) == 4
    assert_stopped_named_and_whole(capsys.readouterr().err.strip(), out)
    filler.unlink()  # room again
    resumes(exp, out, cache, capsys)
    paid_again = server.requests - before - whole
    assert 0 <= paid_again <= WORKERS * 1  # at most the calls in flight: workers x cell concurrency x 1 call


def test_a_kernel_meeting_a_full_disk_stops_a_papermill_sweep_named_and_it_resumes(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = uninterrupted_requests(tmp_path, server)
    exp, out, cache = experiment(tmp_path, server.url), tmp_path / "out", tmp_path / "cache"
    capsys.readouterr()
    before = server.requests
    with enospc_in_kernels(tmp_path / "site", out / "cells"):  # kernels only: this process never fsyncs there
        assert main(sweep_args(exp, out, cache)) == 4
    err = capsys.readouterr().err.strip()
    assert_stopped_named_and_whole(err, out)
    assert f"{out}/cells/" in err and "OSError: No space left on device" in err  # the kernel's own words
    assert not list(out.glob("cells/*/status.json"))
    resumes(exp, out, cache, capsys)
    assert 0 <= server.requests - before - whole <= WORKERS * 1
