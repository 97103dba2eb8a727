"""Sweep results on disk (`store`: one directory per cell, written atomically) and as tidy pandas frames
(`frames`, with the documented columns of `columns`), in one canonical order for the analysis (`order`)."""

from __future__ import annotations

from .columns import CELL_COLUMNS, CONFIG_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS, Columns
from .configs import config_columns, config_groups, config_labels, run_configs, run_labels
from .examples import EXAMPLE_COLUMNS, example_frame, example_rows
from .frames import iteration_frame, tidy
from .order import canonical_results, canonical_rows, canonical_runs
from .store import (
    SPENDING_CAP_KIND,
    CellError,
    CellStatus,
    Results,
    cell_status,
    incomplete_error,
    load,
    read_runs,
    write_cell,
)

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
    "read_runs",
    "run_configs",
    "tidy",
    "write_cell",
]
