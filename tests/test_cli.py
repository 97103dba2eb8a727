"""The `promptlab` command: sweep, run, report, cache, and errors printed whole (no traceback) with exit status 2."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from experiment_files import write_experiment

from promptlab.cli import main, totals_text
from promptlab.errors import ConfigError


def tiny_experiment(tmp_path: Path, file: str = "exp.yaml", **over: object) -> Path:
    data: dict[str, object] = {
        "name": "clitest",
        "loops": ["p3ro"],
        "config": {"model": "fake/auto", "max_tokens": 64},
        "grid": {"finish_threshold": [6.0, 9.5], "max_iterations": [1, 2]},
    }
    return write_experiment(tmp_path, {**data, **over}, file=file)


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


def test_report_bias_budget_bounds_the_reasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from biased import write_biased_sweep

    out, critic = write_biased_sweep(tmp_path / "results", samples=1)
    logged = len(critic.requests)
    assert main(["report", str(out), "--bias-budget", "0"]) == 0
    assert len(critic.requests) == logged and "biases.png:" in capsys.readouterr().out  # no re-ask of the model
    assert main(["report", str(out), "--bias-budget", "6"]) == 0
    assert len(critic.requests) == logged + 5  # one candidate (3 re-scores) and one pair (2 orders): within 6
    with pytest.raises(SystemExit) as e:
        main(["report", str(out), "--bias-budget", "-1"])
    assert e.value.code == 2 and "--bias-budget: expected a whole number >= 0, got '-1'" in capsys.readouterr().err


def test_run_prints_events_output_and_totals(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            "p3ro",
            "--prompt",
            "Write a poem about rain.",
            "--goal",
            "A haiku",
            "--model",
            "fake/auto",
            "--set",
            "max_iterations=2",
            "--set",
            "finish_threshold=9.9",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "[p3ro it1]" in out  # the live event log
    assert "=== final output ===" in out and "stop reason:" in out and "iteration 1: average" in out
    assert "totals:" in out and "calls" in out
    main(
        [
            "run",
            "p3ro",
            "--prompt",
            "Write a poem about rain.",
            "--model",
            "fake/auto",
            "--quiet",
            "--set",
            "max_iterations=1",
        ]
    )
    assert "[p3ro" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "finish_threshold=12"], "finish_threshold"),
        (["--set", "bogus=1"], "--set bogus: not a config field of loop p3ro"),
        (["--model", "fake/nobody"], "fake/nobody"),
    ],
)
def test_run_bad_input_exits_2_with_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "p3ro", "--prompt", "x", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_bad_experiment_file_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = tiny_experiment(tmp_path, grid={"finish_threshold": [7.0, 12]})
    proc = subprocess.run(
        [sys.executable, "-m", "promptlab.cli", "sweep", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "grid.finish_threshold[1]: 12 is not within 1-10 for loop p3ro" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_the_command_names_the_missing_key_of_a_sweep(tmp_path: Path) -> None:
    """The issue's case, through the installed entry point: every line of the message, no traceback."""
    path = tiny_experiment(tmp_path, config={"model": "gpt-4o-mini"})
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "promptlab"), "sweep", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"promptlab: error: {path}: 1 model problem(s), found before any call:"
    assert lines[1] == "  - 'gpt-4o-mini': needs an API key: set OPENAI_API_KEY in the environment"


def _redis_refused() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


def _error_cases(tmp: Path) -> list[tuple[list[str], str]]:
    """(argv, what the error must say) for each way each command refuses its input."""
    bad_yaml = tmp / "bad.yaml"
    bad_yaml.write_text("name: x\nloops: [p3ro\n", encoding="utf-8")
    a_file = tmp / "a-file"
    a_file.write_text("x", encoding="utf-8")
    (tmp / "not-results").mkdir()
    refused = _redis_refused()
    ok = str(tiny_experiment(tmp))
    run = ["run", "p3ro", "--prompt", "x", "--model", "fake/auto"]
    return [
        (["run", "nope", "--prompt", "x"], "unknown loop 'nope'; known loops: "),  # the list depends on the tests run
        ([*run, "--set", "max_iterations=abc"], "max_iterations: 'abc': Input should be a valid integer"),
        ([*run, "--set", "oops"], "--set 'oops': expected FIELD=VALUE"),
        ([*run, "--cache", "ftp://x"], "--cache: cache location 'ftp://x' has an unknown scheme 'ftp'"),
        ([*run, "--cache", refused], f"call cache {refused} (set by --cache) is unavailable"),
        ([*run, "--max-concurrency", "fake/auto=0"], "--max-concurrency 'fake/auto=0': expected MODEL=N"),
        (
            ["run", "p3ro", "--prompt", "x", "--model", "gpt-4o-mini"],
            "- 'gpt-4o-mini': needs an API key: set OPENAI_API_KEY in the environment",
        ),
        (["sweep", str(tmp / "nope.yaml")], "experiment file not found"),
        (["sweep", str(bad_yaml)], "bad.yaml: not valid YAML"),
        (["sweep", str(tiny_experiment(tmp, "gone.yaml", tasks="gone.jsonl"))], "no task file 'gone.jsonl'; tried"),
        (
            ["sweep", str(tiny_experiment(tmp, "key.yaml", config={"model": "gpt-4o-mini"}))],
            "- 'gpt-4o-mini': needs an API key: set OPENAI_API_KEY in the environment",
        ),
        (["sweep", ok, "--executor", "ray", "--out", str(tmp / "r")], "executor: 'ray' is not a known executor"),
        (["sweep", ok, "--out", str(a_file), "--no-progress"], str(a_file)),
        (["report", str(tmp / "no-results")], "results dir not found"),
        (["report", str(tmp / "not-results")], "not-results is not a results dir: it has no cells/ folder"),
        (["cache", "stats", "--dir", "ftp://x"], "--dir: cache location 'ftp://x' has an unknown scheme"),
        (["cache", "stats", "--dir", refused], f"call cache {refused} (set by --dir) is unavailable"),
        (["cache", "clear", "--dir", str(a_file)], f"call cache {a_file} (set by --dir) is unavailable"),
        ([*run, "--cache", str(a_file)], f"call cache {a_file} (set by --cache) is unavailable"),
    ]


def test_every_command_prints_its_whole_error_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cases = _error_cases(tmp_path)
    assert {argv[0] for argv, _ in cases} == {"run", "sweep", "report", "cache"}
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("promptlab: error: ") and message in err, (argv, err)
        assert not err.startswith(('promptlab: error: "', "promptlab: error: '")), (argv, err)  # no KeyError quotes
        assert "Traceback" not in err, (argv, err)


def test_an_unusable_cache_names_the_environment_variable_that_set_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    monkeypatch.setenv("PROMPTLAB_CACHE_DIR", str(a_file))
    for argv in (["run", "p3ro", "--prompt", "x", "--model", "fake/auto"], ["cache", "stats"]):
        assert main(argv) == 2, argv
        assert f"call cache {a_file} (set by PROMPTLAB_CACHE_DIR) is unavailable" in capsys.readouterr().err, argv


def test_a_multi_line_message_is_printed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptlab.sweeps.experiment import load_experiment

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tiny_experiment(tmp_path, config={"model": "gpt-4o-mini"})
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    message = str(caught.value).splitlines()
    assert len(message) >= 2  # the case the first-line-only printing lost
    assert main(["sweep", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"promptlab: error: {message[0]}",
        *(f"  {line}" for line in message[1:]),
    ]


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


def test_an_unknown_cost_has_no_unit() -> None:
    from promptlab.record import Totals

    line = totals_text(Totals(calls=3, input_tokens=10, output_tokens=5, cost_usd=None, wall_time_s=1.0))
    assert ", cost unknown, 1.00 s" in line and "USD" not in line
    assert ", cost 0.0025 USD, " in totals_text(Totals(calls=1, cost_usd=0.0025))


def test_the_sweeps_summary_table_prints_rounded_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table `promptlab sweep` prints after its one-line summary shows numbers as the report and the notebooks
    do (3 significant digits, counts with every digit, no exponent): it printed 5.583333333333333 before."""
    exp = tiny_experiment(tmp_path, grid={"max_iterations": [1, 2]}, replicates=3)
    assert main(["sweep", str(exp), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    table = capsys.readouterr().out.split("\n", 1)[1]
    assert "final_score_mean" in table
    assert not re.search(r"\d\.\d{4,}|\de[+-]\d", table), table


def test_an_error_about_a_huge_value_quotes_a_short_excerpt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Output about bad input is bounded: a 5 MB experiment name that breaks the name's pattern is named by its
    field, quoted in a few dozen characters with its length (control characters escaped); under 1 KiB."""
    path = tiny_experiment(tmp_path, name="x" * 5_000_000 + "\x1b[2J")
    assert main(["sweep", str(path), "--list"]) == 2
    err = capsys.readouterr().err
    assert "exp.yaml: name: 'xxxxxxxx" in err and "(5,000,004 characters)" in err
    assert len(err.encode()) < 1024 and "\x1b" not in err
