"""The report's "People and the critic" section and its chart (people.png): each critic's agreement with the
people, with intervals, beside the people's agreement with each other (the ceiling), when a results directory has
judgments (`promptlab.people`), with the pairings ranked by people and by the reference judge, which is itself
measured against the people like a critic. Without either, on open-ended runs of several critics, the section says
that pairings cannot be compared rather than comparing scores from different critics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..people.summary import has_judgments, people_findings
from ..people.text import CORRECTED, findings_markdown
from .by_critic import critics_differ, run_measure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

    from ..results.store import Results

NO_YARDSTICK = (
    "Pairings cannot be compared on these open-ended runs: each pairing's critic scores its own outputs, on scales "
    "that differ by critic, and neither people nor a reference judge have judged them (`promptlab judgments plan "
    "{path}`, then the notebook 08_judge, `promptlab judgments import`, or `promptlab judgments reference` with "
    "the experiment's `reference_judge`)."
)
"""What the section says when nothing can rank the pairings."""


def plot_people_agreement(agreement: pd.DataFrame, kind: str = "pair", ax: Axes | None = None) -> Axes:
    """Each critic's chance-corrected agreement with people (kappa, or alpha for ratings) beside the people's
    with each other, with 95% intervals (`promptlab.people.AGREEMENT_COLUMNS`); a missing estimate is not drawn."""
    import pandas as pd

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.5, 3.5))
    critics = list(dict.fromkeys(agreement["critic"]))
    series = (("critic vs people", -0.15, "tab:blue"), ("people vs people", 0.15, "tab:gray"))
    for comparison, offset, color in series:
        rows = agreement[agreement["comparison"] == comparison]
        for k, critic in enumerate(critics):
            row = rows[rows["critic"] == critic]
            if row.empty or pd.isna(row["corrected"].iloc[0]):
                continue
            value = float(row["corrected"].iloc[0])
            low, high = (
                float(row[c].iloc[0]) if pd.notna(row[c].iloc[0]) else value
                for c in ("corrected_low", "corrected_high")
            )
            ax.errorbar(k + offset, value, yerr=[[value - low], [high - value]], fmt="o", color=color, capsize=4)
        ax.plot([], [], "o", color=color, label=comparison)
    ax.set_xticks(range(len(critics)), critics, rotation=15, ha="right")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlim(-0.6, len(critics) - 0.4)
    ax.set_ylabel(CORRECTED.get(kind, "agreement"))
    ax.set_title("Each critic with people, beside people with each other")
    ax.legend(loc="best", fontsize="small")
    return ax


def people_section(res: Results, chart: Any) -> list[str]:
    """The section's lines for summary.md; draws people.png through `chart` (the report's chart writer)."""
    if not has_judgments(res.path):
        if len(res.runs) and run_measure(res.runs)[0] is None and critics_differ(res.runs):
            return ["## People and the critic", "", NO_YARDSTICK.format(path=Path(res.path)), ""]
        return []
    found = people_findings(res.path)
    why = "nobody has judged anything yet" if found.empty else None
    chart(
        "people.png",
        why,
        lambda fig: plot_people_agreement(found.agreement, found.plan.kind, fig.add_subplot()),
        (6.5, 3.5),
    )
    return findings_markdown(found)


__all__ = ["NO_YARDSTICK", "people_section", "plot_people_agreement"]
