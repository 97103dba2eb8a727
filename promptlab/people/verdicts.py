"""What the judgments say: a verdict per critic, whether refinement helped by people's judgment (per pairing, Holm
across pairings), and the people's own position preference.

The verdict is a non-inferiority test: the critic agrees with people "as often as people agree with each other"
when its chance-corrected agreement (kappa, or alpha for ratings) minus the people's own is above `-MARGIN` at the
lower end of a 90% interval (one-sided 5%; BCa on the same draws, `promptlab.people.statistics`); it "agrees less"
when the upper end is below 0 and non-inferiority is not shown; otherwise there are not enough judgments, and the
frame says about how many more items would settle it. Where the people's own agreement is not above chance (its 95%
interval reaches 0) there is no ceiling to compare with, and the verdict says so. More in docs/people.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..results.columns import Columns
from .agreement import CriticAgreement
from .judged import frame_of
from .statistics import Estimate, cluster_bootstrap

if TYPE_CHECKING:
    import pandas as pd

MARGIN = 0.1
"""How far below the people's own kappa (or alpha) a critic may be and still agree "as often as people"."""
MIN_ITEMS = 10
"""Fewest items judged by two or more people and viewed by the critic before a verdict is given."""
AS_OFTEN = "agrees with people as often as people agree with each other"
LESS = "agrees less"
NOT_ENOUGH = "not enough judgments"
NO_CEILING = "no ceiling: people do not agree beyond chance"
"""The people's own chance-corrected agreement is not above 0 (its 95% interval reaches 0): "as often as people"
would then be met by a critic that agrees by chance alone, so no verdict against that ceiling is given."""

VERDICT_COLUMNS: Columns = {
    "critic": ("string", "The critic."),
    "verdict": ("string", f"'{AS_OFTEN}', '{LESS}', '{NOT_ENOUGH}' or '{NO_CEILING}'."),
    "difference": ("Float64", "The critic's kappa (alpha) minus the people's, on the same items."),
    "low": ("Float64", "Lower end of its 90% interval (the one-sided 95% bound the test reads)."),
    "high": ("Float64", "Upper end of its 90% interval."),
    "margin": ("Float64", "The non-inferiority margin."),
    "items": ("Int64", "Items judged by two or more people and viewed by the critic."),
    "more_items": ("Int64", "About how many more such items would settle it (<NA> once settled)."),
}
REFINEMENT_COLUMNS: Columns = {
    "pairing": ("string", "The model pairing ('generator / critic')."),
    "items": ("Int64", "Pairs judged."),
    "judgments": ("Int64", "Judgments (first ones; ties count half)."),
    "returned_share": ("Float64", "Share preferring the returned prompt's text (ties half)."),
    "low": ("Float64", "Lower end of its 95% interval (BCa bootstrap over items)."),
    "high": ("Float64", "Upper end."),
    "p": ("Float64", "t-test of the items' shares against 1/2 (scipy)."),
    "p_holm": ("Float64", "p adjusted by Holm across pairings (statsmodels)."),
    "rank": ("Int64", "Rank of the pairing by returned_share (1: refinement helped most by people)."),
}
POSITION_COLUMNS: Columns = {
    "person": ("string", "A person, or '(all)'."),
    "judgments": ("Int64", "Pairwise judgments that chose a side (ties left out)."),
    "share_a": ("Float64", "Share choosing the text shown first (1/2 when the order does not matter)."),
    "low": ("Float64", "Lower end of its 95% interval (BCa bootstrap over items)."),
    "high": ("Float64", "Upper end."),
    "p": ("Float64", "Binomial test of A against B (scipy)."),
}


@dataclass(frozen=True)
class Verdict:
    """A critic's verdict and what it rests on."""

    critic: str
    verdict: str
    difference: Estimate
    low: float | None
    high: float | None
    items: int
    more_items: int | None


def verdict(ca: CriticAgreement, *, margin: float = MARGIN, min_items: int = MIN_ITEMS) -> Verdict:
    """The verdict on one critic (see the module docstring)."""
    d = ca.difference
    items = sum(1 for u in ca.units if u.critic and u.people)
    low, high = d.at(0.90) if d.at is not None else (None, None)
    if d.value is None or low is None or high is None or items < min_items:
        more = max(min_items - items, 1)
        return Verdict(ca.critic, NOT_ENOUGH, d, low, high, items, more)
    ceiling = ca.measures.get(("people vs people", "corrected"))
    if ceiling is not None and (ceiling.low is None or ceiling.low <= 0):
        return Verdict(ca.critic, NO_CEILING, d, low, high, items, None)
    if low > -margin:
        return Verdict(ca.critic, AS_OFTEN, d, low, high, items, None)
    if high < 0:
        return Verdict(ca.critic, LESS, d, low, high, items, None)
    half = (high - low) / 2
    gap = d.value + margin if d.value > -margin else -d.value  # distance to the bound that would settle it
    needed = items * (half / gap) ** 2 if gap > 0 else math.inf
    extra = max(int(math.ceil(needed - items)), 1) if math.isfinite(needed) else None
    return Verdict(ca.critic, NOT_ENOUGH, d, low, high, items, extra)


def verdict_table(verdicts: Sequence[Verdict], margin: float = MARGIN) -> pd.DataFrame:
    """The verdicts as `VERDICT_COLUMNS`."""
    rows = [
        {
            "critic": v.critic,
            "verdict": v.verdict,
            "difference": v.difference.value,
            "low": v.low,
            "high": v.high,
            "margin": margin,
            "items": v.items,
            "more_items": v.more_items,
        }
        for v in verdicts
    ]
    return frame_of(rows, VERDICT_COLUMNS)


def refinement_table(frame: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per pairing, the share of people preferring the returned prompt's text to the start's (pairs only)."""
    from scipy.stats import ttest_1samp
    from statsmodels.stats.multitest import multipletests

    first = frame[~frame["repeat"].astype(bool)]
    rows: list[dict[str, Any]] = []
    for pairing, rows_p in first.groupby("pairing", sort=True):
        shares = (rows_p["label"].astype(float) / 2).groupby(rows_p["item"]).agg(["sum", "count"])
        units = list(zip(shares["sum"], shares["count"], strict=True))
        est = cluster_bootstrap(units, _share, n_boot=n_boot, seed=seed)
        means = shares["sum"] / shares["count"]
        p = float(ttest_1samp(means, 0.5).pvalue) if len(means) > 1 and means.std() > 0 else math.nan
        rows.append(
            {
                "pairing": pairing,
                "items": len(units),
                "judgments": int(shares["count"].sum()),
                "returned_share": est.value,
                "low": est.low,
                "high": est.high,
                "p": p,
            }
        )
    ps = [r["p"] for r in rows if not math.isnan(r["p"])]
    adjusted = iter(multipletests(ps, method="holm")[1] if ps else [])
    order = sorted(range(len(rows)), key=lambda k: -(rows[k]["returned_share"] or 0))
    for rank, k in enumerate(order, start=1):
        rows[k]["rank"] = rank
    for r in rows:
        r["p_holm"] = float(next(adjusted)) if not math.isnan(r["p"]) else None
        r["p"] = None if math.isnan(r["p"]) else r["p"]
    return frame_of(rows, REFINEMENT_COLUMNS)


def _share(units: Sequence[tuple[float, float]]) -> float | None:
    total = sum(n for _, n in units)
    return sum(s for s, _ in units) / total if total else None


def position_table(frame: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per person and over all, the share of pairwise judgments choosing the text shown first (ties left out)."""
    from scipy.stats import binomtest

    chose = frame[frame["chose_a"].notna()]
    groups = [("(all)", chose), *((str(p), rows) for p, rows in chose.groupby("person", sort=True))]
    rows: list[dict[str, Any]] = []
    for person, part in groups:
        per_item = part["chose_a"].astype(float).groupby(part["item"]).agg(["sum", "count"])
        units = list(zip(per_item["sum"], per_item["count"], strict=True))
        est = cluster_bootstrap(units, _share, n_boot=n_boot, seed=seed)
        n, k = int(per_item["count"].sum()), int(per_item["sum"].sum())
        rows.append(
            {
                "person": person,
                "judgments": n,
                "share_a": est.value,
                "low": est.low,
                "high": est.high,
                "p": float(binomtest(k, n).pvalue) if n else None,
            }
        )
    return frame_of(rows, POSITION_COLUMNS)


__all__ = [
    "AS_OFTEN",
    "LESS",
    "MARGIN",
    "MIN_ITEMS",
    "NOT_ENOUGH",
    "POSITION_COLUMNS",
    "REFINEMENT_COLUMNS",
    "VERDICT_COLUMNS",
    "Verdict",
    "position_table",
    "refinement_table",
    "verdict",
    "verdict_table",
]
