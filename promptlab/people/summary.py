"""Everything the judgments of a results directory say, in one call: `people_findings(results)`.

The agreement table (each critic, and each reference judge, against the people, the ceiling and the repeats), a
verdict per critic, whether refinement helped by people's judgment per pairing (pairs only), the pairings ranked by
the reference judge (pairs only), and the people's position preference (pairs only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .agreement import agreement_table, critic_agreement
from .judged import judged_frame
from .plan import Plan, plan_path, read_plan
from .reference import read_reference
from .reference_findings import reference_agreement, reference_labels, reference_missing, reference_ranking
from .storage import read_judgments
from .verdicts import MARGIN, position_table, refinement_table, verdict, verdict_table

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class PeopleFindings:
    """What the judgments of one results directory say (frames documented in `promptlab.people.verdicts` and
    `promptlab.people.agreement`)."""

    plan: Plan
    """The judging plan."""
    judged: pd.DataFrame
    """One row per judgment (`JUDGED_COLUMNS`), skips left out."""
    agreement: pd.DataFrame
    """Per critic: critic vs people, people vs people, people vs themselves (`AGREEMENT_COLUMNS`)."""
    verdicts: pd.DataFrame
    """Per critic: the verdict (`VERDICT_COLUMNS`)."""
    refinement: pd.DataFrame
    """Per pairing: did refinement help by people (`REFINEMENT_COLUMNS`); empty for ratings."""
    position: pd.DataFrame
    """The people's preference for the text shown first (`POSITION_COLUMNS`); empty for ratings."""
    reference: pd.DataFrame
    """Per reference judge and pairing: the pairings ranked by the judge (`REFERENCE_COLUMNS`); empty without
    reference judgments."""
    reference_missing: dict[str, int] = field(default_factory=dict)
    """Reference judge -> planned items it left missing (an unusable reply or a failed call)."""
    people: list[str] = field(default_factory=list)
    """Who judged."""
    skipped: int = 0
    """Judgments that were skips."""
    damaged: list[str] = field(default_factory=list)
    """Damaged lines, named and skipped."""

    @property
    def empty(self) -> bool:
        """True when nobody has judged anything yet."""
        return self.judged.empty


def has_judgments(results: str | os.PathLike[str]) -> bool:
    """True when the results directory has a judging plan (and so maybe judgments)."""
    return plan_path(results).is_file()


def people_findings(
    results: str | os.PathLike[str], *, n_boot: int = 2000, seed: int = 0, margin: float = MARGIN
) -> PeopleFindings:
    """Read the plan and every judgment of `results` and measure them.

    Args:
        results: The results directory (with `judgments/plan.json`).
        n_boot: Bootstrap draws behind every interval.
        seed: Their seed.
        margin: The verdict's non-inferiority margin (kappa or alpha units).
    """
    plan = read_plan(results)
    stored = read_judgments(results)
    judged = judged_frame(plan, stored.judgments)
    found = [
        critic_agreement(str(critic), rows, plan.kind, n_boot=n_boot, seed=seed)
        for critic, rows in judged.groupby("critic", sort=True)
    ]
    pairs = plan.kind == "pair"
    empty = judged.iloc[0:0]
    reference = read_reference(results) if pairs else None
    labels = reference_labels(plan, reference) if reference is not None else {}
    found += reference_agreement(judged, labels, n_boot=n_boot, seed=seed)
    return PeopleFindings(
        plan=plan,
        judged=judged,
        agreement=agreement_table(found),
        verdicts=verdict_table([verdict(ca, margin=margin) for ca in found], margin),
        refinement=refinement_table(judged if pairs else empty, n_boot=n_boot, seed=seed),
        position=position_table(judged if pairs else empty, n_boot=n_boot, seed=seed),
        reference=reference_ranking(plan, labels, n_boot=n_boot, seed=seed),
        reference_missing=reference_missing(plan, reference) if reference is not None else {},
        people=sorted({j.person for j in stored.judgments}),
        skipped=sum(j.value == "skip" for j in stored.judgments),
        damaged=stored.damaged + (reference.damaged if reference is not None else []),
    )


__all__ = ["PeopleFindings", "has_judgments", "people_findings"]
