"""A dry run is dry: `Experiment.with_models` puts one model in every role, pairings included (issue #31 item 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promptlab.sweeps import load_experiment, sweep
from promptlab.sweeps.models import replace_models

ROOT = Path(__file__).resolve().parents[2]


def models_named(cells: list[Any]) -> set[str]:
    """Every model a cell's config names."""
    names: set[str] = set()
    for cell in cells:
        for key, value in cell.config.items():
            if key.endswith("_model") or key == "model":
                names.add(value)
    return names


def test_setting_config_model_alone_leaves_the_pairings_on_the_local_model() -> None:
    exp = load_experiment(ROOT / "experiments" / "demo.yaml")
    assert "local/smollm2" in models_named(exp.with_config(model="fake/auto").cells())  # why with_models exists


def test_with_models_replaces_every_role_and_keeps_simulated_critics() -> None:
    exp = load_experiment(ROOT / "experiments" / "demo.yaml").with_models("fake/auto")
    cells = exp.cells()
    assert len(cells) == 3  # the three critics stay three cells
    assert models_named(cells) == {"fake/auto", "sim/oracle", "sim/noisy?sd=2&seed=0"}


def test_replace_models_covers_loop_config_grid_role_models_and_lists() -> None:
    data = {
        "config": {"model": "local/smollm2", "target_model": "local/smollm2", "temperature": 0.5},
        "loop_config": {"p3ro": {"role_models": {"evaluator": "gpt-4o"}, "critic_models": ["a", "sim/oracle"]}},
        "grid": {"critic_model": ["local/smollm2", "gpt-4o", "sim/oracle"], "max_iterations": [1, 2]},
        "pairings": [{"generator": "a", "critic": "b"}, {"generator": "c", "critic": "d"}],
    }
    out = replace_models(data, "fake/auto")
    assert out["config"] == {"model": "fake/auto", "target_model": "fake/auto", "temperature": 0.5}
    assert out["loop_config"] == {
        "p3ro": {"role_models": {"evaluator": "fake/auto"}, "critic_models": ["fake/auto", "sim/oracle"]}
    }
    assert out["grid"] == {"critic_model": ["fake/auto", "sim/oracle"], "max_iterations": [1, 2]}
    assert out["pairings"] == [{"generator": "fake/auto", "critic": "fake/auto"}]


def test_a_dry_run_of_the_demo_makes_no_local_model_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptlab.llm.local import pool as local

    calls: list[str] = []

    def counted(name: str, **_kw: Any) -> Any:
        calls.append(name)
        raise AssertionError(f"a dry run loaded the local model {name}")

    monkeypatch.setattr(local, "load", counted)
    exp = load_experiment(ROOT / "experiments" / "demo.yaml").with_models("fake/auto")
    data = exp.model_dump(mode="json")
    data["replicates"] = 1  # 3 cells x 3 tasks, enough to reach every role
    small = type(exp).from_dict(data, exp.base_dir)
    result = sweep(small, tmp_path / "dry", progress=False, cache=str(tmp_path / "cache"))
    assert calls == []
    assert result.done == 3, result
