"""Every reader of a results directory reads it one way (`promptlab.results.runs_file`): a damaged line of one cell's
runs.jsonl costs that record only. It is named by file and line with a short excerpt (the message under 1 KiB,
however long the line), skipped and counted, and the exports, the report and `load` keep every other run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from grounded import CELLS, grounded_run

from promptlab.cli import main
from promptlab.record import Example, Split
from promptlab.results import DamagedRecord, load, read_cell_runs, read_runs
from promptlab.results.store import write_cell

HUGE = 30 * 2**20
"""A damaged line of 30 MiB: no message about it may echo it."""


def write_results(results: Path) -> Path:
    """Two ok cells of three grounded runs each (examples, a scorer and a split, so Inspect exports them)."""
    for cell, params in zip(("c1", "c2"), CELLS.values(), strict=True):
        runs = []
        for sample, task in enumerate(("t1", "t2", "t3")):
            run = grounded_run(params, task, sample)
            run.task.examples = [Example(input=f"item {i}", target="yes") for i in range(4)]
            run.task.scorer = {"kind": "exact"}
            run.task.split = Split(seed=0, dev=2, test=2)
            runs.append(run)
        write_cell(results, cell, params, runs)
    return results


def damage(results: Path, line: int, text: bytes) -> str:
    """Replace line `line` (1-based) of c1's runs.jsonl with `text`; the run id that line held."""
    path = results / "cells" / "c1" / "runs.jsonl"
    lines = path.read_bytes().split(b"\n")
    lost = json.loads(lines[line - 1])["run_id"]
    lines[line - 1] = text
    path.write_bytes(b"\n".join(lines))
    return str(lost)


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, str]:
    results = write_results(tmp_path / "results")
    lost = damage(results, 2, b'{"version": 1, "run_id": "' + b"x" * HUGE)  # cut mid-record, 30 MiB long
    return results, lost


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"version": 1, "run_id": "' + b"x" * HUGE, "not JSON"),
        (b'{"run_id": 5}', "not a run record"),
        (b"\xff\xfe not utf-8 \x80", "not JSON"),
        (b"[1, 2, 3]", "not a run record"),
    ],
)
def test_a_damaged_line_is_named_by_file_and_line_skipped_and_counted(tmp_path: Path, text: bytes, why: str) -> None:
    results = write_results(tmp_path / "results")
    lost = damage(results, 2, text)
    read = read_cell_runs(results, "c1")
    assert len(read.runs) == 2 and lost not in {r.run_id for r in read.runs}
    [message] = read.damaged
    assert message.startswith(f"cells/c1/runs.jsonl:2: {why}") and len(message.encode()) < 1024
    with pytest.warns(DamagedRecord) as caught:
        assert [r.run_id for r in read_runs(results, "c1")] == [r.run_id for r in read.runs]
    [warned] = [str(w.message) for w in caught]
    assert "cells/c1/runs.jsonl:2" in warned and "1 damaged record(s) skipped (2 read)" in warned
    assert len(warned.encode()) < 1024


def test_a_missing_runs_file_costs_its_cell_s_runs_and_says_so(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results")
    (results / "cells" / "c1" / "runs.jsonl").unlink()
    with pytest.warns(DamagedRecord, match=r"cells/c1/runs.jsonl: missing; the cell's runs skipped"):
        assert read_runs(results, "c1") == []


def test_many_damaged_lines_give_one_bounded_warning(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results")
    path = results / "cells" / "c1" / "runs.jsonl"
    path.write_bytes(path.read_bytes() + b"".join(b"garbage %d " % i + b"y" * 5000 + b"\n" for i in range(2000)))
    with pytest.warns(DamagedRecord) as caught:
        assert len(read_runs(results, "c1")) == 3
    [warned] = [str(w.message) for w in caught]
    assert "2000 damaged record(s) skipped (3 read)" in warned and "and 1997 more" in warned
    assert len(warned.encode()) < 1024


def test_the_mlflow_export_logs_every_other_run_and_names_the_damaged_line(
    damaged: tuple[Path, str], tmp_path: Path
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from promptlab.exports.mlflow_export import default_tracking_uri, export_mlflow
    from promptlab.exports.mlflow_payload import RUN_ID_TAG

    results, lost = damaged
    with pytest.warns(DamagedRecord, match=r"cells/c1/runs.jsonl:2: not JSON"):
        summary = export_mlflow(results)
    assert summary.created == 5 and len(summary.damaged) == 1
    assert "1 damaged record(s) skipped (first: cells/c1/runs.jsonl:2: not JSON" in str(summary)
    assert len(str(summary).encode()) < 1024
    runs = MlflowClient(default_tracking_uri(results)).search_runs([summary.experiment_id], "")
    exported = {r.data.tags.get(RUN_ID_TAG) for r in runs} - {None}
    assert len(exported) == 5 and lost not in exported


def test_the_inspect_export_writes_every_other_run_and_names_the_damaged_line(damaged: tuple[Path, str]) -> None:
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log

    from promptlab.exports.inspect_log import export_inspect

    results, lost = damaged
    with pytest.warns(DamagedRecord, match=r"cells/c1/runs.jsonl:2: not JSON"):
        logs = export_inspect(results)
    assert len(logs) == 5 and [m.split(": ")[0] for m in logs.damaged] == ["cells/c1/runs.jsonl:2"]
    assert lost not in {read_eval_log(str(p), header_only=True).eval.eval_id for p in logs}


@pytest.mark.parametrize("target", ["mlflow", "inspect"])
def test_the_export_commands_finish_and_say_little_about_a_30_mib_line(
    target: str, damaged: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mlflow" if target == "mlflow" else "inspect_ai")
    results, _ = damaged
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        assert main(["export", target, str(results)]) == 0
    out, err = capsys.readouterr()
    note = [line for line in err.splitlines() if "runs.jsonl:2" in line]
    assert note and note[0].startswith("promptlab: note: results: cells/c1/runs.jsonl: 1 damaged record(s) skipped")
    assert len(err.encode()) < 2048 and len(out.encode()) < 2048
    assert ("5 run(s) created" if target == "mlflow" else "5 Inspect log(s)") in out


def test_load_and_the_report_read_the_same_directory(damaged: tuple[Path, str], tmp_path: Path) -> None:
    results, _ = damaged
    assert len(load(results).runs) == 6  # the frames come from the parquet files, which are whole
    assert main(["report", str(results), "--out", str(tmp_path / "report")]) == 0
