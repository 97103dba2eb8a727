"""What the reference judge's judgments say: the pairings ranked by it (its share preferring the returned prompt's
text per pairing, with an interval, as `refinement_table` ranks them by people), and the judge measured against
the people exactly like a critic (the same agreement, ceiling and verdict, on the items it judged).

A missing judgment (an unusable reply, a failed call) is left out and counted, never filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..results.columns import Columns
from .agreement import CriticAgreement, critic_agreement
from .judged import JUDGED_COLUMNS, frame_of, pair_label
from .plan import Plan
from .reference import ReferenceStored
from .verdicts import REFINEMENT_COLUMNS, refinement_table

if TYPE_CHECKING:
    import pandas as pd

REFERENCE_SUFFIX = " (reference judge)"
"""How the reference judge is named where critics are listed (the agreement table, the verdicts, the chart)."""
REFERENCE_COLUMNS: Columns = {
    "judge": ("string", "The reference judge."),
    **REFINEMENT_COLUMNS,
}
"""Per judge and pairing: the share of planned items on which the judge prefers the returned prompt's text (ties
half), ranked within each judge; `items` counts the items it judged, `judgments` equals it."""


def reference_labels(plan: Plan, stored: ReferenceStored) -> dict[str, dict[str, float]]:
    """Judge -> item -> the side it preferred (a LABELS index), from each judge's last record of each planned item;
    missing judgments left out."""
    items = plan.by_id()
    out: dict[str, dict[str, float]] = {}
    for judge in stored.judges():
        labels: dict[str, float] = {}
        for item, record in stored.latest(judge).items():
            if item in items and record.value is not None:
                label, _ = pair_label(record.value, record.shown)
                if label is not None:
                    labels[item] = label
        out[judge] = labels
    return out


def reference_missing(plan: Plan, stored: ReferenceStored) -> dict[str, int]:
    """Judge -> planned items whose last record is missing (asked, no usable judgment)."""
    items = plan.by_id()
    return {
        judge: sum(1 for item, r in stored.latest(judge).items() if item in items and r.value is None)
        for judge in stored.judges()
    }


def reference_ranking(
    plan: Plan, labels: Mapping[str, Mapping[str, float]], *, n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """`REFERENCE_COLUMNS`: per judge, the pairings ranked by its share preferring the returned text."""
    import pandas as pd

    items = plan.by_id()
    parts = []
    for judge, by_item in labels.items():
        rows = [
            {"item": item, "repeat": False, "label": label, "pairing": items[item].pairing}
            for item, label in by_item.items()
        ]
        if not rows:
            continue
        table = refinement_table(frame_of(rows, JUDGED_COLUMNS), n_boot=n_boot, seed=seed)
        table.insert(0, "judge", pd.Series([judge] * len(table), dtype="string"))
        parts.append(table)
    if not parts:
        return frame_of([], REFERENCE_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def reference_agreement(
    judged: pd.DataFrame, labels: Mapping[str, Mapping[str, float]], *, n_boot: int = 2000, seed: int = 0
) -> list[CriticAgreement]:
    """Each reference judge against the people, like a critic: the people's judgments of every planned item with
    the judge's label as the critic's view (None where it is missing), named `<judge> (reference judge)`."""
    import pandas as pd

    if judged.empty:
        return []
    found = []
    for judge, by_item in labels.items():
        if not by_item:  # every judgment missing: nothing to measure
            continue
        rows = judged.copy()
        rows["critic"] = pd.array([judge + REFERENCE_SUFFIX] * len(rows), dtype="string")
        rows["critic_label"] = pd.array([by_item.get(str(i)) for i in rows["item"]], dtype="Float64")
        found.append(critic_agreement(judge + REFERENCE_SUFFIX, rows, "pair", n_boot=n_boot, seed=seed))
    return found


__all__ = [
    "REFERENCE_COLUMNS",
    "REFERENCE_SUFFIX",
    "reference_agreement",
    "reference_labels",
    "reference_missing",
    "reference_ranking",
]
