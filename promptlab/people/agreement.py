"""Each critic against the people, the people against each other (the ceiling) and each person against themselves
(the repeats), on the same items, with intervals from one bootstrap over items.

Pairs: agreement (the share of equal labels) and Cohen's kappa. Ratings: Spearman's rho and Krippendorff's alpha
(ordinal). The critic's chance-corrected measure minus the people's, over the same draws, is what the verdict reads
(`promptlab.people.verdicts`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..results.columns import Columns
from .judged import frame_of
from .statistics import (
    Estimate,
    agreement,
    boot_indices,
    cluster_bootstrap,
    from_draws,
    kappa,
    label_table,
    matrix_alpha,
    pair_alpha,
    spearman,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

COMPARISONS = ("critic vs people", "people vs people", "people vs themselves")
PICKS = ("critic", "people", "self")
"""The Unit field each comparison reads."""
AGREEMENT_COLUMNS: Columns = {
    "critic": ("string", "The critic (the items of its runs)."),
    "comparison": ("string", "critic vs people, people vs people (the ceiling) or people vs themselves (repeats)."),
    "items": ("Int64", "Items the comparison rests on."),
    "pairs": ("Int64", "Judgment pairs compared (critic-person, person-person or first-repeat)."),
    "agreement": ("Float64", "Pairs: the share of equal labels; ratings: Spearman's rho."),
    "agreement_low": ("Float64", "Lower end of its 95% interval (BCa bootstrap over items)."),
    "agreement_high": ("Float64", "Upper end."),
    "corrected": ("Float64", "Pairs: Cohen's kappa; ratings: Krippendorff's alpha (ordinal)."),
    "corrected_low": ("Float64", "Lower end of its 95% interval."),
    "corrected_high": ("Float64", "Upper end."),
}


@dataclass
class Unit:
    """One item's comparisons: (row, column) label pairs of each kind, and the people's first values."""

    critic: list[tuple[float, float]] = field(default_factory=list)
    people: list[tuple[float, float]] = field(default_factory=list)
    self: list[tuple[float, float]] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    tables: dict[str, np.ndarray] = field(default_factory=dict)
    """Pairs: each kind's 3 x 3 label table (made once, summed by every bootstrap draw)."""


@dataclass
class CriticAgreement:
    """The three comparisons for one critic, and the difference of the chance-corrected measures."""

    critic: str
    measures: dict[tuple[str, str], Estimate]
    """(comparison, 'agreement' | 'corrected') -> estimate."""
    difference: Estimate
    """The critic's corrected measure minus the people's, on the same draws."""
    units: list[Unit]


def item_units(frame: pd.DataFrame, kind: str = "pair") -> list[Unit]:
    """One Unit per item of a judged frame (`promptlab.people.judged.judged_frame`)."""
    import pandas as pd

    units = []
    for _, rows in frame.groupby("item", sort=True):
        unit = Unit()
        first = rows[~rows["repeat"].astype(bool)].drop_duplicates("person")
        unit.values = {str(p): float(v) for p, v in zip(first["person"], first["label"], strict=True)}
        for view, value in zip(first["critic_label"], first["label"], strict=True):
            if pd.notna(view):  # an item the critic has no view of (<NA>, never compared with ==) is left out
                unit.critic.append((float(view), float(value)))
        unit.people = [(a, b) for (pa, a), (pb, b) in itertools.permutations(unit.values.items(), 2) if pa != pb]
        repeats = rows[rows["repeat"].astype(bool)].drop_duplicates("person")
        pairs = zip(repeats["person"], repeats["label"], strict=True)
        unit.self = [(unit.values[str(p)], float(v)) for p, v in pairs if str(p) in unit.values]
        if kind == "pair":
            unit.tables = {pick: label_table(getattr(unit, pick)) for pick in PICKS}
        units.append(unit)
    return units


def measures_for(kind: str) -> dict[str, Callable[[Sequence[Any]], float | None]]:
    """'agreement' and 'corrected' measures of a list of label tables (pairs) or label-pair lists (ratings)."""
    if kind == "pair":
        return {"agreement": agreement, "corrected": kappa}
    return {"agreement": spearman, "corrected": pair_alpha}


def critic_agreement(
    critic: str, frame: pd.DataFrame, kind: str, *, n_boot: int = 2000, seed: int = 0
) -> CriticAgreement:
    """The three comparisons on one critic's items, and its difference from the ceiling, on the same draws."""
    units = item_units(frame, kind)
    draws = boot_indices(len(units), n_boot, seed)
    measures: dict[tuple[str, str], Estimate] = {}
    stats: dict[tuple[str, str], Callable[[Sequence[Unit]], float | None]] = {}
    funcs = measures_for(kind)
    for comparison, pick in zip(COMPARISONS, PICKS, strict=True):
        for name, func in funcs.items():
            ceiling = kind != "pair" and comparison == "people vs people" and name == "corrected"
            stats[comparison, name] = _people_alpha if ceiling else _over(func, pick, kind == "pair")
            measures[comparison, name] = cluster_bootstrap(units, stats[comparison, name], draws=draws)
    key_c, key_p = ("critic vs people", "corrected"), ("people vs people", "corrected")
    difference = _difference(units, measures[key_c], measures[key_p], stats[key_c], stats[key_p])
    return CriticAgreement(critic, measures, difference, units)


def _people_alpha(units: Sequence[Unit]) -> float | None:
    """Krippendorff's alpha with every person a coder (the ratings' ceiling)."""
    return matrix_alpha([u.values for u in units])


def _over(
    func: Callable[[Sequence[Any]], float | None], pick: str, tables: bool
) -> Callable[[Sequence[Unit]], float | None]:
    """`func` over the units' label tables (or label pairs) of one kind (items without any left out)."""

    def stat(units: Sequence[Unit]) -> float | None:
        lists = [u.tables[pick] if tables else getattr(u, pick) for u in units if getattr(u, pick)]
        return func(lists) if lists else None

    return stat


def _difference(
    units: list[Unit],
    c: Estimate,
    p: Estimate,
    c_stat: Callable[[Sequence[Unit]], float | None],
    p_stat: Callable[[Sequence[Unit]], float | None],
) -> Estimate:
    """c minus p, with the interval of the paired draws (BCa of the difference, `from_draws`)."""
    if c.value is None or p.value is None or c.draws is None or p.draws is None:
        return Estimate(None, None, None, len(units))

    def minus(some: Sequence[Unit]) -> float | None:
        a, b = c_stat(some), p_stat(some)
        return None if a is None or b is None else a - b

    return from_draws(units, minus, c.value - p.value, c.draws - p.draws)


def agreement_table(found: Sequence[CriticAgreement]) -> pd.DataFrame:
    """The comparisons as `AGREEMENT_COLUMNS`, one row per critic x comparison."""
    rows = []
    for ca in found:
        for comparison, pick in zip(COMPARISONS, PICKS, strict=True):
            a, k = ca.measures[comparison, "agreement"], ca.measures[comparison, "corrected"]
            used = [u for u in ca.units if getattr(u, pick)]
            rows.append(
                {
                    "critic": ca.critic,
                    "comparison": comparison,
                    "items": len(used),
                    "pairs": sum(len(getattr(u, pick)) for u in used),
                    "agreement": a.value,
                    "agreement_low": a.low,
                    "agreement_high": a.high,
                    "corrected": k.value,
                    "corrected_low": k.low,
                    "corrected_high": k.high,
                }
            )
    return frame_of(rows, AGREEMENT_COLUMNS)


__all__ = [
    "AGREEMENT_COLUMNS",
    "COMPARISONS",
    "CriticAgreement",
    "Unit",
    "agreement_table",
    "critic_agreement",
    "item_units",
]
