"""Configurations in the results frames: which columns name one (loop, the sweep's params, the models and
score source where they vary), a readable label per row, and the rows of each configuration.

Used by the analysis (paired comparisons by configuration), the charts and the report alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..llm.providers.resolved import resolve_model
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
    for ("loop=ape", not "loop=ape, score_source=NA")."""
    import pandas as pd

    cols = by_columns(frame, by)
    if not cols:
        return pd.Series(["all runs"] * len(frame), index=frame.index, dtype="string")
    varying = [c for c in cols if frame[c].nunique(dropna=False) > 1] or cols
    # a field a row's loop does not have (NA: score_source on a search loop) is left out of its label, which
    # stays unique: rows that differ only there differ in which fields they name
    parts = []
    for c in varying:
        name, value = short_values(frame[c], c)
        parts.append(frame[c].map(lambda v, n=name, f=value: "" if fmt_value(v) == "NA" else f"{n}={f(v)}").tolist())
    everything_na = ", ".join(f"{c}=NA" for c in varying)
    labels = [", ".join(p for p in row if p) or everything_na for row in zip(*parts, strict=True)]
    return pd.Series(labels, index=frame.index, dtype="string")


SHORT_NAMES = {"generator_model": "generator", "critic_model": "critic", "target_model": "target"}
"""How a model column is named in a label."""


def short_model(name: str) -> str:
    """A model name as a label shows it: `sim/noisy?sd=2&seed=0` -> `noisy sd 2`, `local/smollm2` -> `smollm2`
    (promptlab's own providers' prefixes and a zero seed left out; hosted names unchanged)."""
    model = resolve_model(name)
    base = model.model_id if model.in_process and model.alias is None and model.model_id else name
    base, _, query = base.partition("?")
    params = [p.partition("=") for p in query.split("&") if p]
    extra = [f"{k} {v}" for k, _, v in params if not (k == "seed" and v == "0")]
    return " ".join([base, *extra])


def short_values(column: pd.Series, name: str) -> tuple[str, Any]:
    """(name, value formatter) of a column in a label: a model column shortened (`critic=oracle`) when the short
    forms of its values stay distinct, every other column as it is."""
    if name not in SHORT_NAMES:
        return name, fmt_value
    values = {fmt_value(v) for v in column.dropna().unique()}
    if len({short_model(v) for v in values}) < len(values):
        return name, fmt_value
    return SHORT_NAMES[name], lambda v: short_model(fmt_value(v))


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


def fmt_value(value: Any) -> str:
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "NA"
    return f"{value:g}" if isinstance(value, float) else str(value)


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
    "fmt_value",
    "need_columns",
    "short_model",
    "short_values",
]
