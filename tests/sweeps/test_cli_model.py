"""`promptlab sweep EXPERIMENT --model M`: every role played by M (simulated critics kept), results in their own
directory; a dry run of the demo and the stopping grid with fake/auto makes no local-model call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import promptlab.sweeps.run as run_module
from promptlab.cli import main
from promptlab.sweeps.models import models_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "cells"), [("demo", 3), ("stopping", 27)])
def test_model_flag_puts_one_model_in_every_role(name: str, cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_sweep(exp: Any, out: Any, **kw: Any) -> Any:
        seen.update(exp=exp, out=out)
        raise SystemExit(0)

    monkeypatch.setattr(run_module, "sweep", fake_sweep)
    with pytest.raises(SystemExit):
        main(["sweep", str(ROOT / "experiments" / f"{name}.yaml"), "--model", "fake/auto"])
    planned = seen["exp"].cells()
    assert len(planned) == cells
    assert models_of(planned) == ["fake/auto", "sim/noisy?sd=2&seed=0", "sim/oracle"]
    assert seen["out"] == f"results/{name}-fake-auto"  # never the real run's results dir


def test_the_stopping_grid_is_the_demo_with_thresholds_and_caps() -> None:
    """experiments/stopping.yaml is the demo's design with the rule as the grid: same config otherwise, the
    demo's cap and threshold among the grid's, its samples a prefix of the demo's (so each grid run has a
    logged twin in results/demo)."""
    from promptlab.sweeps import load_experiment

    demo = load_experiment(ROOT / "experiments" / "demo.yaml", check_models=False)
    grid = load_experiment(ROOT / "experiments" / "stopping.yaml", check_models=False)
    rule = {"finish_threshold", "max_iterations"}
    assert {k: v for k, v in grid.config.items() if k not in rule} == {
        k: v for k, v in demo.config.items() if k not in rule
    }
    assert set(grid.grid) == rule and demo.config["max_iterations"] == max(grid.grid["max_iterations"])
    assert demo.config["finish_threshold"] in grid.grid["finish_threshold"]
    assert grid.pairings == demo.pairings and grid.replicates <= demo.replicates and grid.tasks == demo.tasks
