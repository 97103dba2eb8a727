"""Input that cannot bring the CLI down (#21 items 16-18): files that are not UTF-8 name the file and line, a
YAML alias bomb is refused before it is built, and bad flags are refused with the flag named, exit 2, before
any call."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.reading import MAX_YAML_NODES, load_yaml, read_text
from promptlab.sweeps.run import sweep

TASK = json.dumps({"id": "t1", "prompt": "Write a poem.", "goal": "A haiku."})


def experiment(d: Path, body: str = "", tasks: str = "tasks.jsonl") -> Path:
    (d / "tasks.jsonl").write_text(TASK + "\n", encoding="utf-8")
    path = d / "exp.yaml"
    path.write_text(
        f"name: inputs\nloops: [p3ro]\ntasks: {tasks}\nconfig:\n  model: fake/auto\n  max_tokens: 64\n"
        f"  max_iterations: 1\n{body}",
        encoding="utf-8",
    )
    return path


def cli(*args: str, cwd: Path, limit_gb: float = 2.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """`promptlab ...` in a process capped at `limit_gb` of memory; (result, seconds)."""

    def cap() -> None:
        size = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "promptlab.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        preexec_fn=cap,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    return done, time.perf_counter() - t0


# 16. not UTF-8 -----------------------------------------------------------------------------------------------
def test_an_experiment_file_that_is_not_utf8_names_the_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = experiment(tmp_path)
    path.write_bytes(path.read_bytes() + b"description: caf\xe9 au lait\n")  # Latin-1, not UTF-8
    assert main(["sweep", str(path), "--list"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:8:17:" in err and "is not UTF-8 text (byte 0xe9 at line 8, column 17)" in err


def test_a_task_file_and_an_examples_file_that_are_not_utf8_name_the_file_and_line(tmp_path: Path) -> None:
    path = experiment(tmp_path)
    (tmp_path / "tasks.jsonl").write_bytes(TASK.encode() + b"\n" + TASK.replace("t1", "t2").encode()[:-3] + b'\x80"}\n')
    with pytest.raises(ConfigError, match=r"tasks\.jsonl:2:\d+: the JSONL file is not UTF-8 text"):
        sweep(path, tmp_path / "out", progress=False)
    (tmp_path / "ex.jsonl").write_bytes(b'{"input": "a", "target": "b"}\n{"input": "\xff", "target": "c"}\n')
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "g", "prompt": "Say {input}", "examples": "ex.jsonl", "scorer": "exact"}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"ex\.jsonl:2:\d+: the JSONL file is not UTF-8 text"):
        sweep(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_byte_order_mark_is_not_an_error(tmp_path: Path) -> None:
    f = tmp_path / "bom.yaml"
    f.write_bytes(b"\xef\xbb\xbfname: x\n")
    assert read_text(f) == "name: x\n"


# 17. alias bombs ---------------------------------------------------------------------------------------------
def bomb(indent: str, depth: int = 9, width: int = 9) -> str:
    """A billion-laughs YAML block (width ** depth strings once expanded), indented under a field."""
    lines = [f"{indent}l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "where, body, field",
    [
        ("an unknown field", "laughs:\n" + bomb("  "), "laughs"),
        (
            "models.params",
            "models:\n  judge:\n    model: fake/auto\n    params:\n" + bomb("      "),
            "models.judge.params",
        ),
    ],
)
def test_a_billion_laughs_yaml_is_refused_quickly_with_the_field_named(
    tmp_path: Path, where: str, body: str, field: str
) -> None:
    path = experiment(tmp_path, body)
    for args in (["sweep", str(path), "--list"], ["sweep", str(path), "--no-progress"]):
        done, seconds = cli(*args, cwd=tmp_path)
        assert done.returncode == 2, (where, done.returncode, done.stderr[-500:])
        assert seconds < 30 and "Traceback" not in done.stderr
        assert f"{path}:" in done.stderr and f"{field}" in done.stderr and "alias" in done.stderr
    assert not (tmp_path / "results").exists()


def test_the_bound_counts_aliases_as_what_they_stand_for() -> None:
    small = "a: &a [1, 2, 3]\nb: [*a, *a]\n"
    assert load_yaml(small, "s") == {"a": [1, 2, 3], "b": [[1, 2, 3], [1, 2, 3]]}
    with pytest.raises(ConfigError, match=r"s:\d+: laughs\.l\d+ stands for [\d,]+ YAML nodes"):
        load_yaml("laughs:\n" + bomb("  ", depth=7, width=9), "s")  # 9**7 = 4.8 million strings
    flat = "x: [" + ", ".join(["1"] * (MAX_YAML_NODES // 2)) + "]\n"
    assert len(load_yaml(flat, "flat")["x"]) == MAX_YAML_NODES // 2  # a big plain document is fine


@pytest.mark.slow
def test_a_set_value_bomb_is_refused(tmp_path: Path) -> None:
    value = "{" + bomb("", depth=8).replace("\n", ", ").rstrip(", ") + "}"
    done, seconds = cli(
        "run", "p3ro", "--prompt", "x", "--model", "fake/auto", "--set", f"prompts={value}", "--quiet", cwd=tmp_path
    )
    assert done.returncode == 2 and seconds < 30 and "--set" in done.stderr and "alias" in done.stderr, done.stderr


# 18. flags ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value", [("--workers", "0"), ("--cell-concurrency", "-3"), ("--workers", "two")])
def test_bad_numeric_flags_are_refused_with_the_flag_named(
    tmp_path: Path, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = experiment(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(path), "--out", str(tmp_path / "out"), flag, value, "--no-progress"])
    assert e.value.code == 2 and f"argument {flag}: expected" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--max-cost", "-1", "--no-progress"]) == 2
    assert "max_cost: -1.0 must be a positive number of USD" in capsys.readouterr().err  # checked by sweep()
    assert not (tmp_path / "out").exists()


def test_a_concurrency_limit_for_an_unknown_model_is_refused_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = experiment(tmp_path, "models:\n  judge:\n    model: fake/auto\n")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--max-concurrency", "nosuchmodel=3", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "'nosuchmodel'" in err and "--max-concurrency" in err and "fake/auto" in err and not out.exists()
    assert (
        main(["run", "p3ro", "--prompt", "x", "--model", "fake/auto", "--max-concurrency", "fake/autoo=2", "--quiet"])
        == 2
    )
    assert "'fake/autoo'" in capsys.readouterr().err
    # the models the sweep calls and an alias name are accepted
    assert (
        main(
            [
                "sweep",
                str(path),
                "--out",
                str(out),
                "--max-concurrency",
                "fake/auto=3",
                "--max-concurrency",
                "judge=2",
                "--no-progress",
            ]
        )
        == 0
    )


def test_the_library_refuses_a_bad_cell_concurrency(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cell_concurrency: 0 must be at least 1"):
        sweep(experiment(tmp_path), tmp_path / "out", progress=False, cell_concurrency=0)
