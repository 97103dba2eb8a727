"""#28 item 3: a full results disk stops the sweep with a named error (the file, "no space left"), exit 4 (not 2,
"refused before it started"), nothing half-written, and the same sweep resumes once there is room. The full disk
is injected into the results writer (ENOSPC from os.fsync after a few writes)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from experiment_files import topics, write_experiment

from promptlab.cli import main
from promptlab.results.store import load


def test_a_full_results_disk_is_named_exits_4_and_resumes(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {"name": "full", "loops": ["toy"], "config": {"model": "fake/auto", "max_iterations": 1}}
    exp = write_experiment(tmp_path, {**spec, "grid": {"style": ["a", "b", "c"]}}, topics(2))
    out = tmp_path / "out"
    args = ["sweep", str(exp), "--out", str(out), "--workers", "1", "--no-progress", "--cache", str(tmp_path / "c")]
    real_fsync, calls = os.fsync, []

    def full_after_four(fd: int) -> None:
        calls.append(fd)
        if len(calls) > 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_after_four)
    assert main(args) == 4
    err = capsys.readouterr().err.strip()
    assert "no space left" in err and str(out) in err and "run the same sweep again" in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not [p for p in out.rglob("*.tmp")]  # nothing half-written
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert main(args) == 0
    assert sorted(load(out).cells["status"]) == ["ok", "ok", "ok"]


def test_a_notebook_cut_short_is_removed_and_a_whole_one_kept(tmp_path: Path) -> None:
    """What a sweep killed, or a disk filled, while papermill wrote the notebook leaves: only whole JSON is kept."""
    from promptlab.sweeps.results_dir import PARTIAL_NOTEBOOK, keep_notebook

    (tmp_path / "run_cell.ipynb").write_text('{"cells": "before"}')
    (tmp_path / PARTIAL_NOTEBOOK).write_text('{"cells": [{"source": "cut he')
    keep_notebook(tmp_path)
    assert (
        not (tmp_path / PARTIAL_NOTEBOOK).exists()
        and (tmp_path / "run_cell.ipynb").read_text() == '{"cells": "before"}'
    )
    (tmp_path / PARTIAL_NOTEBOOK).write_text('{"cells": "whole"}')
    keep_notebook(tmp_path)
    assert (tmp_path / "run_cell.ipynb").read_text() == '{"cells": "whole"}'


def test_a_full_disk_reported_by_another_process_is_the_same_error() -> None:
    """A papermill kernel reports only the error's name and message; a Dask task pickles it."""
    import pickle

    from promptlab.errors import ResultsDiskFull

    sent = ResultsDiskFull("/r/cells/c1/runs.jsonl", OSError(errno.ENOSPC, "No space left on device"))
    got = ResultsDiskFull.reported(str(sent))
    assert got is not None and (got.path, str(got)) == (sent.path, str(sent))
    assert str(pickle.loads(pickle.dumps(sent))) == str(sent)
    assert ResultsDiskFull.reported("RuntimeError: boom") is None
