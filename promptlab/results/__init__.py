"""Sweep results on disk (`store`: one directory per cell, written atomically) and as tidy pandas frames
(`frames`, with the documented columns of `columns`), in one canonical order for the analysis (`order`)."""

from __future__ import annotations

from .columns import CELL_COLUMNS, CONFIG_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS, Columns
from .configs import config_columns, config_groups, config_labels, run_configs, run_labels
from .examples import EXAMPLE_COLUMNS, example_frame, example_rows
from .frames import iteration_frame, tidy
from .order import canonical_results, canonical_rows, canonical_runs
from .runs_file import DamagedRecord, RunsRead
from .status import SPENDING_CAP_KIND, CellError, CellStatus
from .store import Results, cell_status, incomplete_error, load, read_cell_runs, read_runs, write_cell

__all__ = [
    "config_columns",
    "config_groups",
    "config_labels",
    "run_labels",
    "SPENDING_CAP_KIND",
    "CELL_COLUMNS",
    "EXAMPLE_COLUMNS",
    "CONFIG_COLUMNS",
    "CellError",
    "CellStatus",
    "DamagedRecord",
    "RunsRead",
    "Columns",
    "RUN_COLUMNS",
    "Results",
    "TRAJECTORY_COLUMNS",
    "canonical_results",
    "canonical_rows",
    "canonical_runs",
    "cell_status",
    "example_frame",
    "example_rows",
    "incomplete_error",
    "iteration_frame",
    "load",
    "read_cell_runs",
    "read_runs",
    "run_configs",
    "tidy",
    "write_cell",
]
