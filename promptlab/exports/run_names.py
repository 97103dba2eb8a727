"""A sweep's runs named as a reader tells them apart, in MLflow's run list and Inspect's log list alike: by what
differs between the runs of the sweep, first (`promptlab.results.labels`).

What differs is read from the sweep's plan, its `experiment.yaml` in the results directory (every cell, task and
replicate, finished or not), so a live sweep names its first cell's runs as an export names them at the end. A
results directory without a readable experiment file is labelled by its finished runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import PromptlabError
from ..results.configs import config_columns
from ..results.labels import REPLICATE, TASK, Labelling
from ..results.store import load

log = logging.getLogger("promptlab.exports")


def planned_rows(results_dir: Path) -> list[dict[str, Any]]:
    """One row per planned run of the sweep (its cell's params, task id and replicate), from its experiment file."""
    from ..sweeps.experiment import load_experiment

    exp = load_experiment(results_dir / "experiment.yaml")
    tasks = exp.load_tasks()
    return [
        {**cell.params, TASK: task.id, REPLICATE: sample}
        for cell in exp.cells(tasks)
        for task in tasks
        for sample in range(exp.replicates)
    ]


def sweep_labelling(results_dir: str | Path) -> Labelling:
    """How the sweep's runs are labelled: by what differs between its planned runs, else between its finished ones."""
    results = Path(results_dir)
    if (results / "experiment.yaml").is_file():
        try:
            rows = planned_rows(results)
        except (PromptlabError, OSError, ValueError) as e:  # an experiment this process cannot expand
            log.info("promptlab export: run names from the finished runs (%s: %s)", type(e).__name__, e)
        else:
            return Labelling.of(rows, list(dict.fromkeys(k for row in rows for k in row)))
    runs = load(results).runs
    keys = [*config_columns(runs), *(k for k in (TASK, REPLICATE) if k in runs.columns)]
    return Labelling.of(runs[keys].to_dict("records") if len(runs) else [], keys)


def run_row(cell_params: Mapping[str, Any], frame_row: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's label reads: its runs-frame row (task, replicate, models, ...) over its cell's params."""
    return {**cell_params, **frame_row}


__all__ = ["planned_rows", "run_row", "sweep_labelling"]
