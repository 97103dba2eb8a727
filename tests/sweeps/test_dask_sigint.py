"""#41 item 9: Ctrl-C on `promptlab sweep --executor dask` stops the sweep as on the inline executor (exit 130,
the "interrupted" summary and nothing else: no KeyboardInterrupt traceback from the sweep, its workers or its
nanny), and the next sweep resumes it to the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from executions import FOREGROUND
from experiment_files import topics, write_experiment

from promptlab.results.store import cell_status

pytest.importorskip("distributed")


IN_BACKGROUND = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
"""Prefix for a child started as a shell starts a background job (`cmd &`): SIGINT ignored."""


def start_sweep(
    exp: Path, out: Path, toy_dir: Path, *, start: str = FOREGROUND, **extra: str
) -> subprocess.Popen[bytes]:
    """`promptlab sweep EXP --executor dask` in its own session, as a terminal runs a foreground command (or, with
    `start=IN_BACKGROUND`, a background one)."""
    code = (
        start + "import sys, toyloop; from promptlab.cli import main; "
        f"sys.exit(main(['sweep', {str(exp)!r}, '--out', {str(out)!r}, '--executor', 'dask', '--workers', '1', "
        "'--no-progress']))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]),
        "DASK_DISTRIBUTED__WORKER__PRELOAD": '["toyloop"]',  # the workers know the "toy" loop
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


def held_after_a_cell(exp: Path, out: Path, toy_dir: Path, *, start: str = FOREGROUND) -> subprocess.Popen[bytes]:
    """`start_sweep` with its later cells waiting once one is done, returned once that cell is recorded and the
    sweep still runs."""
    proc = start_sweep(exp, out, toy_dir, start=start, TOYLOOP_HOLD_AFTER_A_CELL=str(out))
    deadline = time.monotonic() + 300  # a hang guard only
    while not list(out.glob("cells/*/status.json")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()
    return proc


@pytest.mark.slow
def test_ctrl_c_stops_a_dask_sweep_with_one_message_and_it_resumes(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    exp = write_experiment(
        tmp_path,
        {
            "name": "intr",
            "loops": ["toy"],
            "config": {"model": "fake/auto", "max_iterations": 1},
            "grid": {"style": ["a", "b", "c"]},
        },
        topics(2),
    )
    proc = held_after_a_cell(exp, out, toy_dir)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the whole foreground group
    _, err = proc.communicate(timeout=300)  # a hang guard only (beside CPU hogs a dask sweep ends slowly)
    said = err.decode()
    assert proc.returncode == 130, said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    lines = [line for line in said.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith("interrupted: "), said
    assert lines[1] == "promptlab: interrupted", said

    resumed = start_sweep(exp, out, toy_dir)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    assert all(cell_status(out, d.name) for d in (out / "cells").iterdir())
    assert len(list(out.glob("cells/*/status.json"))) == 3


@pytest.mark.slow
def test_a_sweep_started_in_the_background_ignores_ctrl_c_and_stops_on_sigterm(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    exp = write_experiment(
        tmp_path,
        {
            "name": "bg",
            "loops": ["toy"],
            "config": {"model": "fake/auto", "max_iterations": 1},
            "grid": {"style": ["a", "b"]},
        },
        topics(1),
    )
    proc = held_after_a_cell(exp, out, toy_dir, start=IN_BACKGROUND)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(5)  # a bounded wait for a stop that must not come  # noqa
    assert proc.poll() is None, proc.communicate()[1].decode()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)  # a hang guard only
    said = err.decode()
    assert proc.returncode == 143, said
    assert "promptlab: terminated (SIGTERM)" in said and "Traceback" not in said, said
