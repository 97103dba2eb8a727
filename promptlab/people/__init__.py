"""People as the ground truth where nothing is labelled: judging plans, judgments stored beside the results
(`<results>/judgments/<person>.jsonl`), judgments imported from a CSV or code, a reference judge's (apart, in
`<results>/judgments/reference/judge.jsonl`), and each critic measured against the people, the people against
each other and against themselves. More in docs/people.md.

Each name loads on first use (`NAMES`: name -> defining module), so the `promptlab` command starts without numpy.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

NAMES = {
    "AGREEMENT_COLUMNS": "promptlab.people.agreement",
    "agreement_table": "promptlab.people.agreement",
    "critic_agreement": "promptlab.people.agreement",
    "add_judgments": "promptlab.people.imports",
    "import_csv": "promptlab.people.imports",
    "Item": "promptlab.people.items",
    "JUDGED_COLUMNS": "promptlab.people.judged",
    "judged_frame": "promptlab.people.judged",
    "Plan": "promptlab.people.plan",
    "Scale": "promptlab.people.plan",
    "Slot": "promptlab.people.plan",
    "make_plan": "promptlab.people.plan",
    "read_plan": "promptlab.people.plan",
    "write_plan": "promptlab.people.plan",
    "ReferenceJudgment": "promptlab.people.reference",
    "read_reference": "promptlab.people.reference",
    "run_reference": "promptlab.people.reference",
    "Session": "promptlab.people.session",
    "cluster_bootstrap": "promptlab.people.statistics",
    "Judgment": "promptlab.people.storage",
    "append_judgments": "promptlab.people.storage",
    "read_judgments": "promptlab.people.storage",
    "PeopleFindings": "promptlab.people.summary",
    "has_judgments": "promptlab.people.summary",
    "people_findings": "promptlab.people.summary",
    "MARGIN": "promptlab.people.verdicts",
    "POSITION_COLUMNS": "promptlab.people.verdicts",
    "REFINEMENT_COLUMNS": "promptlab.people.verdicts",
    "VERDICT_COLUMNS": "promptlab.people.verdicts",
    "verdict": "promptlab.people.verdicts",
}

if TYPE_CHECKING:
    from .agreement import AGREEMENT_COLUMNS, agreement_table, critic_agreement
    from .imports import add_judgments, import_csv
    from .items import Item
    from .judged import JUDGED_COLUMNS, judged_frame
    from .plan import Plan, Scale, Slot, make_plan, read_plan, write_plan
    from .reference import ReferenceJudgment, read_reference, run_reference
    from .session import Session
    from .statistics import cluster_bootstrap
    from .storage import Judgment, append_judgments, read_judgments
    from .summary import PeopleFindings, has_judgments, people_findings
    from .verdicts import MARGIN, POSITION_COLUMNS, REFINEMENT_COLUMNS, VERDICT_COLUMNS, verdict


def __getattr__(name: str) -> object:
    if name in NAMES:
        value = getattr(_importlib.import_module(NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'promptlab.people' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AGREEMENT_COLUMNS",
    "JUDGED_COLUMNS",
    "MARGIN",
    "POSITION_COLUMNS",
    "REFINEMENT_COLUMNS",
    "VERDICT_COLUMNS",
    "Item",
    "Judgment",
    "PeopleFindings",
    "Plan",
    "ReferenceJudgment",
    "Scale",
    "Session",
    "Slot",
    "add_judgments",
    "agreement_table",
    "append_judgments",
    "cluster_bootstrap",
    "critic_agreement",
    "has_judgments",
    "import_csv",
    "judged_frame",
    "make_plan",
    "people_findings",
    "read_judgments",
    "read_plan",
    "read_reference",
    "run_reference",
    "verdict",
    "write_plan",
]
