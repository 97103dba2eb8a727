"""Experiment files: validation errors that name the field, grid expansion, stable cell ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from promptlab.errors import ConfigError
from promptlab.eval.tasks import read_tasks
from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.define import LoopSpec, register_loop
from promptlab.record import Run
from promptlab.sweeps.experiment import Experiment, load_experiment

ROOT = Path(__file__).resolve().parents[2]


class GridConfig(LoopConfig):
    """A config for expansion tests (the loop never runs here)."""

    finish_threshold: float | None = Field(None, ge=1, le=10)
    patience: int = Field(1, ge=1)


class OtherConfig(LoopConfig):
    """A second loop's config, without `patience`."""

    finish_threshold: float = Field(8.5, ge=1, le=10)


async def _never(*args: Any, **kwargs: Any) -> Run:
    raise AssertionError("not run in these tests")


register_loop(LoopSpec("gridloop", GridConfig, _never, "expansion tests"))
register_loop(LoopSpec("otherloop", OtherConfig, _never, "expansion tests"))


def write_tasks(path: Path, n: int = 3) -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"prompt {i}", "goal": f"goal {i}"}) + "\n" for i in range(n)),
        encoding="utf-8",
    )
    return path


def spec(tmp_path: Path, **over: Any) -> dict[str, Any]:
    write_tasks(tmp_path / "tasks.jsonl")
    data: dict[str, Any] = {
        "name": "t",
        "loops": ["gridloop", "otherloop"],
        "tasks": "tasks.jsonl",
        "config": {"model": "fake/auto", "max_tokens": 32},
        "grid": {"finish_threshold": [7.0, 9.0], "max_iterations": [1, 2, 3]},
    }
    data.update(over)
    return data


def exp_of(tmp_path: Path, **over: Any) -> Experiment:
    return Experiment.from_dict(spec(tmp_path, **over), tmp_path)


def test_count_is_loops_x_pairings_x_grid_product(tmp_path: Path) -> None:
    pairings = [
        {"generator": "fake/auto", "critic": "local/smollm2"},
        {"generator": "local/smollm2", "critic": "fake/auto"},
    ]
    cells = exp_of(tmp_path, pairings=pairings).cells()
    assert len(cells) == 2 * 2 * 2 * 3
    assert len({c.cell_id for c in cells}) == len(cells)
    first = cells[0]
    assert first.params == {
        "loop": "gridloop",
        "generator_model": "fake/auto",
        "critic_model": "local/smollm2",
        "finish_threshold": 7.0,
        "max_iterations": 1,
    }
    assert first.config["max_tokens"] == 32 and first.config["model"] == "fake/auto"
    # deterministic order: loops, then pairings, then the grid product in file order
    assert [c.params["loop"] for c in cells[:12]] == ["gridloop"] * 12
    assert [c.params["max_iterations"] for c in cells[:3]] == [1, 2, 3]


def test_ids_stable_across_runs_key_order_and_number_spelling(tmp_path: Path) -> None:
    a = exp_of(tmp_path).cells()
    b = exp_of(tmp_path).cells()
    assert [c.cell_id for c in a] == [c.cell_id for c in b]
    reordered = exp_of(
        tmp_path,
        grid={"max_iterations": [1, 2, 3], "finish_threshold": [7, 9]},
        config={"max_tokens": 32, "model": "fake/auto"},
    )
    by_params = {json.dumps(c.params, sort_keys=True): c.cell_id for c in reordered.cells()}
    assert {json.dumps(c.params, sort_keys=True): c.cell_id for c in a} == by_params


def test_ids_change_with_params_base_config_tasks_and_replicates(tmp_path: Path) -> None:
    ids = {c.cell_id for c in exp_of(tmp_path).cells()}
    assert ids.isdisjoint(c.cell_id for c in exp_of(tmp_path, config={"model": "fake/auto", "max_tokens": 33}).cells())
    assert ids.isdisjoint(c.cell_id for c in exp_of(tmp_path, replicates=2).cells())
    assert ids.isdisjoint(c.cell_id for c in exp_of(tmp_path, limit=2).cells())
    grown = {
        c.cell_id
        for c in exp_of(tmp_path, grid={"finish_threshold": [7.0, 9.0, 9.5], "max_iterations": [1, 2, 3]}).cells()
    }
    assert ids < grown  # adding a grid value keeps the existing cells


def test_grid_value_out_of_range_names_field_index_value_and_loop(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"grid\.finish_threshold\[1\]: 12 is not within 1-10 for loop gridloop"):
        exp_of(tmp_path, grid={"finish_threshold": [7, 12]})


def test_grid_key_must_be_a_field_of_every_loop(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"grid\.patience: not a config field of loop otherloop"):
        exp_of(tmp_path, grid={"patience": [1, 2]})
    # per-loop fields go under loop_config
    cells = exp_of(tmp_path, loop_config={"gridloop": {"patience": 3}}).cells()
    assert {c.config.get("patience") for c in cells} == {3, None}


def test_bad_fields_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config\.temprature: not a config field of loop gridloop"):
        exp_of(tmp_path, config={"temprature": 0.5})
    with pytest.raises(ConfigError, match=r"config\.max_tokens: 0"):
        exp_of(tmp_path, config={"max_tokens": 0})
    with pytest.raises(ConfigError, match=r"replicates: 0"):
        exp_of(tmp_path, replicates=0)
    with pytest.raises(ConfigError, match=r"loop_config\.nope"):
        exp_of(tmp_path, loop_config={"nope": {}})
    with pytest.raises(ConfigError, match=r"unknown loop 'nosuch'"):
        exp_of(tmp_path, loops=["nosuch"])
    with pytest.raises(ConfigError, match=r"grid\.max_iterations\[1\]: 1\.0 repeats"):
        exp_of(tmp_path, grid={"max_iterations": [1, 1.0]})
    with pytest.raises(ConfigError, match=r"pairings\[0\].*fake/nobody"):
        exp_of(tmp_path, pairings=[{"generator": "fake/nobody", "critic": "fake/auto"}])
    with pytest.raises(ConfigError, match=r"grid\.critic_model: also set by `pairings`"):
        exp_of(
            tmp_path, grid={"critic_model": ["fake/auto"]}, pairings=[{"generator": "fake/auto", "critic": "fake/auto"}]
        )


def test_missing_task_file_lists_the_paths_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    with pytest.raises(ConfigError) as e:
        exp_of(tmp_path, tasks="missing.jsonl")
    assert str(tmp_path / "missing.jsonl") in str(e.value) and str(other / "missing.jsonl") in str(e.value)


def test_task_file_falls_back_to_the_cwd_and_selects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_tasks(tmp_path / "cwd_tasks.jsonl", 5)
    exp = Experiment.from_dict(
        spec(tmp_path, tasks="cwd_tasks.jsonl", task_ids=["t3", "t1", "t4"], limit=2), tmp_path / "nowhere"
    )
    assert [t.id for t in exp.load_tasks()] == ["t3", "t1"]
    with pytest.raises(ConfigError, match=r"task_ids: \['t9'\]"):
        Experiment.from_dict(spec(tmp_path, tasks="cwd_tasks.jsonl", task_ids=["t9"]), tmp_path)


def test_bad_task_lines_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "prompt": "p"}\n\n{"id": "b", "prompt": ""}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:3: prompt"):
        read_tasks(path)
    path.write_text('{"id": "a", "prompt": "p"}\n{"id": "a", "prompt": "q"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: task id 'a' appears twice"):
        read_tasks(path)


def test_yaml_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("name: e\nloops: [gridloop]\ntasks: t.jsonl\ngrid: {finish_threshold: [11]}\n", encoding="utf-8")
    write_tasks(tmp_path / "t.jsonl")
    with pytest.raises(ConfigError, match=r"e\.yaml: grid\.finish_threshold\[0\]: 11 is not within"):
        load_experiment(path)
    with pytest.raises(ConfigError, match="experiment file not found"):
        load_experiment(tmp_path / "none.yaml")


def test_find_cell_by_id_or_params(tmp_path: Path) -> None:
    exp = exp_of(tmp_path)
    cells = exp.cells()
    assert exp.find_cell(cells[4].cell_id) == cells[4]
    assert exp.find_cell(params=dict(cells[4].params)) == cells[4]
    with pytest.raises(ConfigError, match="has no cell with id 'abc'"):
        exp.find_cell("abc")


def test_shipped_experiments_validate() -> None:
    from promptlab.loops.registry import get_loop

    for name in ("demo", "tiny", "baselines"):
        path = ROOT / "experiments" / f"{name}.yaml"
        try:
            for loop in ("p3ro", "creator_critic"):
                get_loop(loop)
        except ConfigError:
            pytest.skip("the p3ro / creator_critic loops are not registered yet")
        exp = load_experiment(path)
        n_grid = 1
        for values in exp.grid.values():
            n_grid *= len(values)
        assert len(exp.cells()) == len(exp.loops) * n_grid * max(len(exp.pairings or []), 1)


BLIND_CRITIC = "anthropic/claude-3-haiku-20240307"
"""A hosted model litellm lists without `logprobs` (never called: the experiment is refused first)."""


@pytest.mark.parametrize(
    ("field", "grid", "config"),
    [
        ("score_source", {"score_source": ["critic", "grounded"]}, {}),
        ("score_mode", {"score_mode": ["sampled", "expected"]}, {"critic_model": BLIND_CRITIC}),
    ],
)
def test_a_config_a_task_refuses_is_refused_before_the_sweep_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, grid: dict[str, Any], config: dict[str, Any]
) -> None:
    import yaml

    import promptlab
    from promptlab.sweeps.run import sweep

    monkeypatch.setenv("ANTHROPIC_API_KEY", "never-used")
    generator = promptlab.scripted(f"refused-{field}", [])
    write_tasks(tmp_path / "tasks.jsonl", n=2)  # tasks without examples
    data = {
        "name": "refused",
        "loops": ["p3ro", "creator_critic"],
        "tasks": "tasks.jsonl",
        "config": {"model": generator.name, **config},
        "grid": grid,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    msg = str(caught.value)
    bad = grid[field][1]
    # every bad cell x task, each naming the cell's params, the task and the field; the good cells pass
    assert "4 config problem(s), found before any call" in msg
    for loop in ("p3ro", "creator_critic"):
        for task in ("t0", "t1"):
            line = f"- cell {json.dumps({'loop': loop, field: bad})} "
            assert any(x.startswith(line) and f"task {task!r}: {field}: " in x for x in msg.splitlines()), msg
    assert json.dumps({"loop": "p3ro", field: grid[field][0]}) not in msg
    # a sweep given the Experiment itself is refused too, before it writes a file or calls a model
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=f"task 't0': {field}: "):
        sweep(Experiment.from_dict(data, tmp_path), out, progress=False, cache=tmp_path / "cache")
    assert not out.exists() and not (tmp_path / "cache").exists()
    assert generator.requests == []
