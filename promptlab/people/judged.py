"""The judgments as a tidy frame, one row per judgment, with what each means: the side a person preferred (pairs) or
the value given (ratings), beside the critic's view of the same item.

A person's first judgment of an item is what agreement is measured on; a later one is a repeat (their consistency).
Skipped items are left out (and counted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..results.columns import Columns
from .items import LABELS
from .plan import Plan
from .storage import SKIP, Judgment

if TYPE_CHECKING:
    import pandas as pd

JUDGED_COLUMNS: Columns = {
    "item": ("string", "The item judged."),
    "person": ("string", "Who judged it."),
    "repeat": ("boolean", "A second (or later) judgment of the item by the same person."),
    "label": (
        "Float64",
        "Pairs: the side preferred as an index into LABELS (0 start, 1 tie, 2 returned); ratings: the value.",
    ),
    "chose_a": ("boolean", "Pairs: the text shown first was preferred (<NA> for a tie and for ratings)."),
    "critic": ("string", "The model of the item's run's judging roles."),
    "pairing": ("string", "The item's run's model pairing ('generator / critic')."),
    "task_id": ("string", "The item's run's task."),
    "critic_label": (
        "Float64",
        "The critic's view: pairs, the side its scores prefer (LABELS index); ratings, its score.",
    ),
    "seconds": ("Float64", "Seconds the person took; <NA> when not measured."),
}
"""One row per judgment that is not a skip."""


def judged_frame(plan: Plan, judgments: Sequence[Judgment]) -> pd.DataFrame:
    """The judgments of the plan's items (others are left out) as `JUDGED_COLUMNS`, in stored order."""
    items = plan.by_id()
    seen: set[tuple[str, str]] = set()
    rows: list[dict[str, Any]] = []
    for j in judgments:
        item = items.get(j.item)
        if item is None or j.value == SKIP:
            continue
        key = (j.item, j.person)
        repeat = key in seen
        seen.add(key)
        if plan.kind == "pair":
            label, chose_a = pair_label(j.value, j.shown)
            view = critic_label(item.critic_scores.get("start"), item.critic_scores.get("returned"))
        else:
            label, chose_a = float(j.value), None
            view = next(iter(item.critic_scores.values()), None)
        if label is None:
            continue
        rows.append(
            {
                "item": j.item,
                "person": j.person,
                "repeat": repeat,
                "label": label,
                "chose_a": chose_a,
                "critic": item.critic,
                "pairing": item.pairing,
                "task_id": item.task_id,
                "critic_label": view,
                "seconds": j.seconds,
            }
        )
    return frame_of(rows, JUDGED_COLUMNS)


def frame_of(rows: Sequence[Mapping[str, Any]], columns: Columns) -> pd.DataFrame:
    """A frame with the documented columns (and dtypes) from dict rows (a missing key is <NA>)."""
    import pandas as pd

    dtypes: dict[str, Any] = {name: dtype for name, (dtype, _) in columns.items()}
    return pd.DataFrame({c: pd.array([r.get(c) for r in rows], dtype=d) for c, d in dtypes.items()})


def pair_label(value: str | int, shown: Sequence[str]) -> tuple[float | None, bool | None]:
    """(LABELS index of the side preferred, whether it was the one shown first) of a pairwise value."""
    if value == "tie":
        return float(LABELS.index("tie")), None
    if value not in ("A", "B") or len(shown) != 2 or any(s not in LABELS for s in shown):
        return None, None
    side = shown[0] if value == "A" else shown[1]
    return float(LABELS.index(side)), value == "A"


def critic_label(start: float | None, returned: float | None) -> float | None:
    """The side the critic's scores prefer (a LABELS index), None without both scores."""
    if start is None or returned is None:
        return None
    side = "returned" if returned > start else "start" if returned < start else "tie"
    return float(LABELS.index(side))


__all__ = ["JUDGED_COLUMNS", "critic_label", "frame_of", "judged_frame", "pair_label"]
