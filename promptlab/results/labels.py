"""Short labels that tell runs and configurations apart, made by one function (`labels`) for every place that shows
one: MLflow's run names, Inspect's log list, the notebooks' tables and legends, the run browser, the report.

A label names what differs between the rows it is one of, and that first, in this order: the varied settings (the
loop first), the models (generator, critic, target; shortened as `short_model` makes them, `sim/noisy?sd=2&seed=0`
-> `noisy sd 2`, when the short forms stay distinct), the task, the replicate:

    max_iterations=2, critic=oracle, arithmetic, replicate 1

A setting every row shares is left out (a label of one row names all of its keys); a key a row has no value for
(NA: `score_source` on a search loop) is left out of that row's label, which stays unique.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..llm.providers.resolved import resolve_model

MODEL_NAMES = {"generator_model": "generator", "critic_model": "critic", "target_model": "target"}
"""How a model key is named in a label, in label order."""
TASK, REPLICATE = "task_id", "sample"
"""The keys of a run's task and replicate (the frames' columns), last in a label."""


def fmt_value(value: Any) -> str:
    """A value as a label writes it: NA when missing, a float in its short form (8.0 -> "8"), else its text."""
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "NA"
    return f"{value:g}" if isinstance(value, float) else str(value)


def short_model(name: str) -> str:
    """A model name as a label shows it: `sim/noisy?sd=2&seed=0` -> `noisy sd 2`, `local/smollm2` -> `smollm2`
    (promptlab's own providers' prefixes and a zero seed left out; hosted names unchanged)."""
    model = resolve_model(name)
    base = model.model_id if model.in_process and model.alias is None and model.model_id else name
    base, _, query = base.partition("?")
    params = [p.partition("=") for p in query.split("&") if p]
    extra = [f"{k} {v}" for k, _, v in params if not (k == "seed" and v == "0")]
    return " ".join([base, *extra])


def ordered(keys: Iterable[str]) -> list[str]:
    """The keys in label order: the loop, the other settings as given, the models, the task, the replicate."""
    keys = list(dict.fromkeys(keys))
    settings = [k for k in keys if k not in MODEL_NAMES and k not in (TASK, REPLICATE)]
    settings.sort(key=lambda k: k != "loop")  # stable: only the loop moves, to the front
    models = [k for k in MODEL_NAMES if k in keys]
    return settings + models + [k for k in (TASK, REPLICATE) if k in keys]


def varying(rows: Sequence[Mapping[Any, Any]], keys: Iterable[str]) -> list[str]:
    """The keys (in label order) whose value differs between the rows (a missing value counts as one)."""
    return [k for k in ordered(keys) if len({fmt_value(r.get(k)) for r in rows}) > 1]


def model_names(models: Iterable[Any]) -> dict[str, str]:
    """Each model name as a label shows it: its `short_model` form when those of all `models` stay distinct, else
    as it is (the one rule: a critic reads `noisy sd 2` in every notebook's legend, title and table)."""
    values = {fmt_value(m) for m in models} - {"NA"}
    distinct = len({short_model(v) for v in values}) == len(values)
    return {v: short_model(v) if distinct else v for v in values}


def shortened(rows: Sequence[Mapping[Any, Any]], keys: Iterable[str]) -> frozenset[str]:
    """The model keys whose values stay distinct when shortened (`model_names`): those a label shortens."""
    out = set()
    for key in keys:
        if key in MODEL_NAMES:
            names = model_names(r.get(key) for r in rows)
            if all(short == short_model(v) for v, short in names.items()):
                out.add(key)
    return frozenset(out)


def part(key: str, value: Any, short: bool = False) -> str:
    """One key's part of a label: `max_iterations=2`, `critic=oracle` (`short`), the task's id, `replicate 1`."""
    text = fmt_value(value)
    if key == TASK:
        return text
    if key == REPLICATE:
        return f"replicate {text}"
    if short and key in MODEL_NAMES:
        return f"{MODEL_NAMES[key]}={short_model(text)}"
    return f"{key}={text}"


@dataclass(frozen=True)
class Labelling:
    """How the rows of one set (a sweep's runs, a frame's configurations) are labelled: which keys a label shows
    and which model keys it shortens. Calling it on a row makes the row's label; every label is made so."""

    shown: tuple[str, ...]
    """The keys a label names, in label order."""
    short: frozenset[str] = frozenset()
    """The model keys it shortens (`short_model`)."""

    @classmethod
    def of(cls, rows: Sequence[Mapping[Any, Any]], keys: Iterable[str]) -> Labelling:
        """The labelling of `rows`: the `keys` whose values differ between them (all of them when none differs),
        models shortened where that keeps them distinct."""
        keys = list(keys)
        shown = varying(rows, keys) or ordered(keys)
        return cls(tuple(shown), shortened(rows, shown))

    def __call__(self, row: Mapping[Any, Any]) -> str:
        """The row's label: its shown keys that have a value (every shown key as NA when it has none)."""
        parts = [part(k, row.get(k), k in self.short) for k in self.shown if fmt_value(row.get(k)) != "NA"]
        return ", ".join(parts) or ", ".join(f"{k}=NA" for k in self.shown)


def labels(rows: Sequence[Mapping[Any, Any]], keys: Iterable[str]) -> list[str]:
    """A label per row, by the rows' `Labelling`."""
    label = Labelling.of(rows, keys)
    return [label(row) for row in rows]


__all__ = [
    "Labelling",
    "MODEL_NAMES",
    "REPLICATE",
    "TASK",
    "fmt_value",
    "labels",
    "model_names",
    "ordered",
    "part",
    "short_model",
    "shortened",
    "varying",
]
