"""Sweeps: an experiment file (`experiment`) expands into cells (`cells`), checked before anything runs (`checks`,
and the preflight in `cells`); `run.sweep` runs the pending cells with an executor (`executors`: `inline`,
`papermill` with the `notebook` template, `dask`), each cell run and written by `execute`, sharing `plan`."""

from __future__ import annotations

from .cells import Cell, preflight_cells
from .execute import INFRASTRUCTURE_ERRORS, run_cell_by_id
from .executors import EXECUTORS, ExecutorSpec, get_executor, register_executor
from .experiment import Experiment, Pairing, load_experiment
from .plan import CellOutcome, SweepPlan, SweepResult
from .run import Executor, sweep

__all__ = [
    "Cell",
    "CellOutcome",
    "EXECUTORS",
    "Executor",
    "ExecutorSpec",
    "Experiment",
    "INFRASTRUCTURE_ERRORS",
    "Pairing",
    "SweepPlan",
    "SweepResult",
    "get_executor",
    "load_experiment",
    "preflight_cells",
    "register_executor",
    "run_cell_by_id",
    "sweep",
]
