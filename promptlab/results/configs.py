"""Configurations in the results frames: which columns name one (loop, the sweep's params, the models and
score source where they vary), a readable label per row, and the rows of each configuration.

Used by the analysis (paired comparisons by configuration), the charts and the report alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .labels import REPLICATE, TASK, labels
from .store import read_runs

if TYPE_CHECKING:
    import pandas as pd

    from .store import Results

By = str | Sequence[str] | None
MODEL_COLUMNS = ("generator_model", "critic_model")
CONFIG_VARYING = ("generator_model", "critic_model", "target_model", "score_source")
"""Documented columns copied from a run's config that name a configuration when they vary."""


def config_columns(frame: pd.DataFrame) -> list[str]:
    """The columns naming a configuration: loop, the params, and the config columns (models, score source)
    where they vary."""
    from .columns import CELL_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS

    documented = set(TRAJECTORY_COLUMNS) | set(RUN_COLUMNS) | set(CELL_COLUMNS)
    cols = ["loop"] if "loop" in frame.columns else []
    cols += [c for c in frame.columns if c not in documented and c != "loop"]
    cols += [c for c in CONFIG_VARYING if c in frame.columns and c not in cols and frame[c].nunique(dropna=False) > 1]
    return cols


def config_labels(frame: pd.DataFrame, by: By = "config") -> pd.Series:
    """A readable label per row ("finish_threshold=8, max_iterations=3"), naming only the `by` columns
    that vary in the frame (all of them when none varies), and of those only the ones the row has a value
    for ("loop=ape", not "loop=ape, score_source=NA"): `labels.labels`, as every label is made."""
    import pandas as pd

    cols = by_columns(frame, by)
    if not cols:
        return pd.Series(["all runs"] * len(frame), index=frame.index, dtype="string")
    return pd.Series(labels(frame[cols].to_dict("records"), cols), index=frame.index, dtype="string")


def run_labels(runs: pd.DataFrame) -> pd.Series:
    """A label per row of a runs frame (`Results.runs`) among those runs: the configuration's varied columns
    (`config_columns`), the task and the replicate, what differs first (`labels.labels`)."""
    import pandas as pd

    keys = [*config_columns(runs), *(k for k in (TASK, REPLICATE) if k in runs.columns)]
    rows = runs[keys].to_dict("records") if len(runs) else []
    return pd.Series(labels(rows, keys), index=runs.index, dtype="string")


def config_groups(frame: pd.DataFrame, by: By = "config") -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per configuration, ordered by the `by` columns' values (not by label text)."""
    cols = by_columns(frame, by)
    if frame.empty:
        return []
    if not cols:
        return [("all runs", frame)]
    labels = config_labels(frame, cols)
    return [(str(labels.loc[g.index[0]]), g) for _, g in frame.groupby(cols, dropna=False, sort=True)]


def by_columns(frame: pd.DataFrame, by: By) -> list[str]:
    cols = config_columns(frame) if by in (None, "config") else [by] if isinstance(by, str) else list(by)
    need_columns(frame, cols)
    return cols


def need_columns(frame: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise KeyError(f"column(s) {missing} not in the frame; its columns are {list(frame.columns)}")


def run_configs(results: Results) -> dict[str, dict[str, Any]]:
    """run_id -> the run's logged config (`Run.config`, every field) for the runs of `results.runs`, read from
    the cells' runs.jsonl (`read_runs`: a damaged record is skipped and named, a missing file gives none)."""
    out: dict[str, dict[str, Any]] = {}
    for cell in results.runs["cell_id"].dropna().unique() if "cell_id" in results.runs.columns else []:
        out.update({r.run_id: dict(r.config) for r in read_runs(results.path, str(cell))})
    return out


__all__ = [
    "run_configs",
    "By",
    "CONFIG_VARYING",
    "MODEL_COLUMNS",
    "by_columns",
    "config_columns",
    "config_groups",
    "config_labels",
    "need_columns",
    "run_labels",
]
