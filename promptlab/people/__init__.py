"""People as the ground truth where nothing is labelled: judging plans, judgments stored beside the results
(`<results>/judgments/<person>.jsonl`), judgments imported from a CSV or code, and each critic measured against
the people, the people against each other and against themselves. More in docs/people.md."""

from __future__ import annotations

from .agreement import AGREEMENT_COLUMNS, agreement_table, critic_agreement
from .imports import add_judgments, import_csv
from .items import Item
from .judged import JUDGED_COLUMNS, judged_frame
from .plan import Plan, Scale, Slot, make_plan, read_plan, write_plan
from .session import Session
from .statistics import cluster_bootstrap
from .storage import Judgment, append_judgments, read_judgments
from .summary import PeopleFindings, has_judgments, people_findings
from .verdicts import MARGIN, POSITION_COLUMNS, REFINEMENT_COLUMNS, VERDICT_COLUMNS, verdict

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
    "verdict",
    "write_plan",
]
