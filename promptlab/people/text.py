"""The judgments' findings in words and tables (markdown): what `promptlab judgments summary` prints and the
report's "People and the critic" section holds. Words say what the numbers say."""

from __future__ import annotations

import math
from typing import Any

from .summary import PeopleFindings
from .verdicts import AS_OFTEN, LESS, NO_CEILING, NOT_ENOUGH

CORRECTED = {"pair": "Cohen's kappa", "rating": "Krippendorff's alpha (ordinal)"}
AGREED = {"pair": "agreement", "rating": "Spearman's rho"}
SHORT = {"pair": "kappa", "rating": "alpha"}


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA."""
    return value is None or str(value) in ("<NA>", "nan") or (isinstance(value, float) and math.isnan(value))


def num(value: Any, digits: int = 3) -> str:
    """A number to `digits` decimals, or 'n/a' for a missing one."""
    if _missing(value):
        return "n/a"
    return f"{float(value):.{digits}f}"


def ci(row: Any, value: str, low: str, high: str) -> str:
    """'value [low, high]'."""
    return f"{num(row[value])} [{num(row[low])}, {num(row[high])}]"


def findings_markdown(found: PeopleFindings) -> list[str]:
    """The section's lines (its heading included)."""
    plan, kind = found.plan, found.plan.kind
    lines = ["## People and the critic", ""]
    lines.append(
        f"{len(found.judged)} judgments ({kind}s) by {len(found.people)} people on "
        f"{found.judged['item'].nunique() if len(found.judged) else 0} of {len(plan.items)} planned items; "
        f"{found.skipped} skipped; {len(found.damaged)} damaged line(s) skipped."
    )
    lines += [f"- damaged: {note}" for note in found.damaged[:5]]
    if found.empty:
        lines += ["", "Nobody has judged anything yet: the notebook 08_judge, or `promptlab judgments import`.", ""]
        return [*lines, *_reference(found)]
    lines += ["", f"Intervals: 95%, BCa bootstrap over items. Chance-corrected: {CORRECTED[kind]}.", ""]
    lines += [
        f"| critic | comparison | items | pairs | {AGREED[kind]} | {CORRECTED[kind]} |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in found.agreement.to_dict("records"):
        lines.append(
            f"| {row['critic']} | {row['comparison']} | {row['items']} | {row['pairs']} | "
            f"{ci(row, 'agreement', 'agreement_low', 'agreement_high')} | {ci(row, 'corrected', 'corrected_low', 'corrected_high')} |"
        )
    lines += ["", "Verdicts (non-inferiority against the people's own agreement; 90% interval of the difference):", ""]
    for v in found.verdicts.to_dict("records"):
        lines.append(f"- **{v['critic']}**: {verdict_words({str(k): x for k, x in v.items()}, SHORT[kind])}")
    return [*lines, "", *_refinement(found), *_reference(found), *_position(found)]


def verdict_words(v: dict[str, Any], measure: str = "kappa") -> str:
    """A verdict row in a sentence."""
    diff = (
        f"{measure} difference {num(v['difference'])} [{num(v['low'])}, {num(v['high'])}], "
        f"margin {num(v['margin'], 2)}, {v['items']} items judged by 2+ people"
    )
    if v["verdict"] == AS_OFTEN:
        return f"{AS_OFTEN} ({diff})."
    if v["verdict"] == LESS:
        return f"{LESS} than people agree with each other ({diff})."
    if v["verdict"] == NO_CEILING:
        return f"{NO_CEILING} (their own {measure}'s 95% interval reaches 0): nothing to match ({diff})."
    more = v["more_items"]
    settled = more is not None and not _missing(more)
    need = f"about {more} more item(s) judged by 2+ people would settle it" if settled else "more judgments are needed"
    return f"{NOT_ENOUGH}: {need} ({diff})."


def _refinement(found: PeopleFindings) -> list[str]:
    if found.plan.kind != "pair":
        return ["Did refinement help, by people? Ratings do not compare the two prompts: draw a pairwise plan.", ""]
    lines = [
        "Did refinement help, by people? Pairings ranked by the share of people preferring the returned prompt's text to the starting one's (ties half; p: t-test of the items' shares against 1/2, Holm across pairings):",
        "",
    ]
    lines += ["| rank | pairing | items | returned preferred | p | Holm p |", "| --- | --- | --- | --- | --- | --- |"]
    for r in found.refinement.sort_values("rank").to_dict("records"):
        lines.append(
            f"| {r['rank']} | {r['pairing']} | {r['items']} | {ci(r, 'returned_share', 'low', 'high')} | {num(r['p'])} | {num(r['p_holm'])} |"
        )
    return [*lines, ""]


NOTHING_RANKS = (
    "Pairings cannot be compared here yet: neither people nor a reference judge have judged the pairs (each "
    "pairing's critic scores its own outputs on its own scale). Judge in the notebook 08_judge, or name a "
    "`reference_judge` in the experiment file and run `promptlab judgments reference`."
)
"""What the section says when nothing ranks the pairings."""


def _reference(found: PeopleFindings) -> list[str]:
    """The pairings ranked by each reference judge; where neither people nor a judge judged, that they cannot be."""
    if found.plan.kind != "pair":
        return []
    ranked = list(dict.fromkeys(found.reference["judge"]))
    unranked = [
        f"- {judge} left {n} planned item(s) missing, judged none."
        for judge, n in found.reference_missing.items()
        if n and judge not in ranked
    ]
    open_ended = {i.pairing for i in found.plan.items if i.example is None}  # no test example measures them
    if not ranked and found.empty and len(open_ended) > 1:
        return [NOTHING_RANKS, *unranked, ""]
    lines: list[str] = []
    for judge in ranked:
        rows = found.reference[found.reference["judge"] == judge]
        lines += [
            f"Pairings ranked by the reference judge {judge}: blind, one prompt for every pairing, the two texts in "
            "an order drawn per item; the share of items on which it prefers the returned prompt's text (ties half; "
            "p: t-test of the items' shares against 1/2, Holm across pairings):",
            "",
            "| rank | pairing | items | returned preferred | p | Holm p |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows.sort_values("rank").to_dict("records"):
            lines.append(
                f"| {r['rank']} | {r['pairing']} | {r['items']} | {ci(r, 'returned_share', 'low', 'high')} | {num(r['p'])} | {num(r['p_holm'])} |"
            )
        lines.append("")
        if left := found.reference_missing.get(judge, 0):
            lines += [f"{left} planned item(s) left missing by {judge} (an unusable reply or a failed call).", ""]
        if found.empty:
            lines += [f"How far to trust {judge} is measured against people once people judge the same items.", ""]
    return lines + unranked + ([""] if unranked else [])


def _position(found: PeopleFindings) -> list[str]:
    if found.position.empty:
        return []
    row = found.position.iloc[0]
    share = f"{ci(row, 'share_a', 'low', 'high')} of {row['judgments']} judgments (binomial p {num(row['p'])})"
    if _missing(row["low"]):
        return [f"People chose the text shown first in {share}.", ""]
    fair = row["low"] <= 0.5 <= row["high"]
    words = "no position preference detected" if fair else "a position preference: the order matters to them"
    return [f"People chose the text shown first in {share}: {words} (a blind order should give 1/2).", ""]


def findings_text(found: PeopleFindings) -> str:
    """The section as text (markdown) for a terminal."""
    return "\n".join(findings_markdown(found))


__all__ = ["NOTHING_RANKS", "findings_markdown", "findings_text", "num", "verdict_words"]
