"""#41 item 9: SIGTERM on `promptlab sweep` stops it as Ctrl-C does (running writes finish) and says so, exit 143
(it used to die at -15 with no message); papermill leaves no hidden `.run_cell.partial.ipynb` behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from experiment_files import topics, write_experiment

from promptlab.sweeps.papermill import tidy_notebooks
from promptlab.sweeps.results_dir import PARTIAL_NOTEBOOK


@pytest.mark.slow
def test_sigterm_stops_a_sweep_with_a_message(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    exp = write_experiment(
        tmp_path,
        {
            "name": "term",
            "loops": ["toy"],
            "config": {"model": "fake/auto", "max_iterations": 1},
            "grid": {"style": ["a", "b", "c"]},
        },
        topics(2),
    )
    code = (
        "import sys, toyloop; from promptlab.cli import main; "
        f"sys.exit(main(['sweep', {str(exp)!r}, '--out', {str(out)!r}, '--workers', '1', '--no-progress']))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]),
        "TOYLOOP_HOLD_AFTER_A_CELL": str(out),  # the later cells' runs wait once one cell is done
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # a hang guard only
    while not list(out.glob("cells/*/status.json")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()
    said = err.decode()
    assert "promptlab: terminated (SIGTERM)" in said and "Traceback" not in said


def test_no_hidden_partial_notebook_is_left(tmp_path: Path) -> None:
    cells = tmp_path / "out" / "cells"
    whole, cut = cells / "a", cells / "b"
    for d in (whole, cut):
        d.mkdir(parents=True)
    (whole / PARTIAL_NOTEBOOK).write_text(json.dumps({"cells": []}))
    (cut / PARTIAL_NOTEBOOK).write_text('{"cells": [')
    tidy_notebooks(tmp_path / "out")
    assert not list(cells.rglob(PARTIAL_NOTEBOOK))
    assert (whole / "run_cell.ipynb").is_file() and not (cut / "run_cell.ipynb").exists()
