"""The `promptlab` command: sweep, run, report, cache, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from promptlab.cli import main


def tiny_experiment(tmp_path: Path, **over: object) -> Path:
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "Write a poem.", "goal": "A haiku."})
                                          + "\n", encoding="utf-8")
    data: dict[str, object] = {"name": "clitest", "loops": ["p3ro"], "tasks": "tasks.jsonl",
            "config": {"model": "fake/auto", "max_tokens": 64},
            "grid": {"finish_threshold": [6.0, 9.5], "max_iterations": [1, 2]}}
    data.update(over)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_sweep_list_prints_every_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(tiny_experiment(tmp_path)), "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all("loop=p3ro" in line and "finish_threshold=" in line for line in lines)


def test_sweep_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert main(["sweep", str(tiny_experiment(tmp_path)), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "4 cells: 4 done, 0 failed" in printed and str(out) in printed
    assert "final_score_mean" in printed  # the summary table
    assert len(list((out / "cells").glob("*/status.json"))) == 4
    assert main(["sweep", str(tiny_experiment(tmp_path)), "--out", str(out), "--no-progress"]) == 0
    assert "0 done, 0 failed, 4 skipped" in capsys.readouterr().out

    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert (tmp_path / "report" / "summary.csv").is_file() and (tmp_path / "report" / "trajectories.png").is_file()
    assert "trajectories.png:" in printed and "final_score_mean" in printed


def test_run_prints_events_output_and_totals(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "p3ro", "--prompt", "Write a poem about rain.", "--goal", "A haiku",
                 "--model", "fake/auto", "--set", "max_iterations=2", "--set", "finish_threshold=9.9"])
    assert code == 0
    out = capsys.readouterr().out
    assert "[p3ro it1]" in out  # the live event log
    assert "=== final output ===" in out and "stop reason:" in out and "iteration 1: average" in out
    assert "totals:" in out and "calls" in out
    main(["run", "p3ro", "--prompt", "Write a poem about rain.", "--model", "fake/auto", "--quiet",
          "--set", "max_iterations=1"])
    assert "[p3ro" not in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--set", "finish_threshold=12"], "finish_threshold"),
    (["--set", "bogus=1"], "--set bogus: not a config field of loop p3ro"),
    (["--model", "fake/nobody"], "fake/nobody"),
])
def test_run_bad_input_exits_2_with_one_line(args: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "p3ro", "--prompt", "x", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_experiment_file_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = tiny_experiment(tmp_path, grid={"finish_threshold": [7.0, 12]})
    proc = subprocess.run([sys.executable, "-m", "promptlab.cli", "sweep", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "grid.finish_threshold[1]: 12 is not within 1-10 for loop p3ro" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_missing_paths_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(tmp_path / "nope.yaml")]) == 2
    assert "experiment file not found" in capsys.readouterr().err
    assert main(["sweep", str(tiny_experiment(tmp_path, tasks="gone.jsonl"))]) == 2
    assert "no task file 'gone.jsonl'; tried" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "no-results")]) == 2


def test_cache_stats_and_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import promptlab

    cache = tmp_path / "c"
    promptlab.complete("fake/auto", "hello", cache=cache)
    promptlab.complete("fake/auto", "again", cache=cache)
    assert main(["cache", "stats", "--dir", str(cache)]) == 0
    assert "2 entries" in capsys.readouterr().out
    assert main(["cache", "clear", "--dir", str(cache)]) == 0
    assert "cleared 2 entries" in capsys.readouterr().out
    assert main(["cache", "stats", "--dir", str(cache)]) == 0
    assert "0 entries" in capsys.readouterr().out


def test_sweep_with_an_unknown_executor_names_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(tiny_experiment(tmp_path)), "--executor", "ray", "--no-progress"]) == 2
    assert "executor: 'ray' is not a known executor; known: dask, inline, papermill" in capsys.readouterr().err
