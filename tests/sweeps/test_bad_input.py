"""Bad input: each gets a one-line error naming what is wrong (exit 2 from the CLI), before any
model call, or is accepted when it is valid; unbounded inputs meet a named limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from experiment_files import topics, write_experiment

from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.eval.tasks import read_tasks
from promptlab.reading import load_yaml
from promptlab.sweeps.execute import run_cell_by_id
from promptlab.sweeps.experiment import MAX_CELLS, MAX_REPLICATES, MAX_RUNS, Experiment


def one_line_error(capsys: pytest.CaptureFixture[str], args: list[str], *words: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err
    return err


def sweep_args(tmp_path: Path, **over: Any) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = {"name": "bad", "loops": ["toy"], "config": {"model": "fake/auto", "max_iterations": 1}, **over}
    exp = write_experiment(tmp_path, spec, topics(1))
    return ["sweep", str(exp), "--out", str(tmp_path / "out"), "--no-progress"]


def test_jsonl_strings_may_hold_u2028_and_u0085(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    rows = [{"id": "a", "prompt": "one\u2028two", "goal": "g"}, {"id": "b", "prompt": "three\x85four", "goal": "g"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n", encoding="utf-8")
    assert [t.prompt for t in read_tasks(path)] == ["one\u2028two", "three\x85four"]


def test_yaml_nested_past_the_recursion_limit_is_named() -> None:
    with pytest.raises(ConfigError, match="exp.yaml: nested too deep"):
        load_yaml("a: " + "[" * 20_000 + "]" * 20_000, "exp.yaml")


def test_a_jsonl_line_nested_past_the_recursion_limit_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "p", "goal": "g"}) + "\n" + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match=r"tasks.jsonl:2.*nested too deep"):
        read_tasks(path)


def test_a_circular_yaml_alias_and_a_duplicate_key_are_named() -> None:
    with pytest.raises(ConfigError, match=r"exp.yaml:2: a YAML alias refers to a node that holds it"):
        load_yaml("models:\n  m: &a {model: x, params: {p: *a}}\n", "exp.yaml")
    with pytest.raises(ConfigError, match=r"exp.yaml:3: the key 'style' is given twice"):
        load_yaml("grid:\n  style: [a]\n  style: [b]\n", "exp.yaml")


def test_a_nan_target_and_a_split_of_true_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "n", "prompt": "{input}", "examples": [{"input": "a", "target": NaN}]}\n')
    with pytest.raises(ConfigError, match=r"tasks.jsonl:1.*NaN is not a JSON value"):
        read_tasks(path)
    examples = [{"input": str(i), "target": i} for i in range(4)]
    path.write_text(json.dumps({"id": "s", "prompt": "{input}", "examples": examples, "split": {"dev": True}}))
    with pytest.raises(ConfigError, match="split.dev"):
        read_tasks(path)


def test_the_cli_names_each_bad_input_in_one_line(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = sweep_args(tmp_path)
    one_line_error(capsys, [*args[:3], "", *args[4:]], "--out", "working directory")
    assert not (Path.cwd() / "cells").exists()
    big = {"grid": {"max_iterations": list(range(1, 101)), "style": [f"s{i}" for i in range(10_001)]}}
    one_line_error(capsys, sweep_args(tmp_path / "big", **big), "1,000,100 cells", f"{MAX_CELLS:,}")
    one_line_error(capsys, sweep_args(tmp_path / "reps", replicates=10**9), "replicates", str(MAX_REPLICATES))
    # #41 item 9: a grid within MAX_CELLS times replicates within MAX_REPLICATES is capped too, the same way
    grid = {"grid": {"style": [f"s{i}" for i in range(1_000)]}, "replicates": 10_000}
    one_line_error(capsys, sweep_args(tmp_path / "runs", **grid), "10,000,000 runs per task", f"{MAX_RUNS:,}")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"concurrency": "abc"}, "concurrency: 'abc' is not a whole number >= 1"),
        ({"concurrency": -1}, "concurrency: -1 is not a whole number >= 1"),
        ({"params_json": "{bad"}, "params_json: '{bad' is not JSON"),
        ({"params_json": "[1]"}, "params_json: '[1]' is not a JSON object"),
        ({"results_dir": ""}, "results_dir: '' is not a results directory"),
    ],
)
def test_notebook_parameters_are_checked_before_anything_runs(
    toy_dir: Path, tmp_path: Path, given: dict[str, Any], named: str
) -> None:
    exp = write_experiment(tmp_path, {"name": "nb", "loops": ["toy"], "config": {"model": "fake/auto"}}, topics(1))
    cell = Experiment.from_dict(load_yaml(exp.read_text(), "exp"), tmp_path).cells()[0]
    kwargs: dict[str, Any] = {
        "results_dir": str(tmp_path / "out"),
        "cell_id": cell.cell_id,
        "experiment_path": str(exp),
    }
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        run_cell_by_id(**{**kwargs, **given})
    assert not (tmp_path / "out").exists()


def test_a_catastrophic_regex_scorer_is_refused_at_load_not_hung(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    examples = [{"input": "a", "target": "a" * 60 + "b"}, {"input": "b", "target": "b"}]
    scorer = {"kind": "regex", "pattern": "(a|aa)+$"}  # exponential for a backtracking matcher
    path.write_text(json.dumps({"id": "r", "prompt": "{input}", "examples": examples, "scorer": scorer}))
    with pytest.raises(ConfigError, match=r"scorer: on examples\[0\].*regex '\(a\|aa\)\+\$' took over 1 s"):
        read_tasks(path)
    scorer = {"kind": "regex", "pattern": "^(a+)+$"}  # the classic one: the regex package matches it at once
    path.write_text(json.dumps({"id": "r", "prompt": "{input}", "examples": examples, "scorer": scorer}))
    assert read_tasks(path)[0].id == "r"
