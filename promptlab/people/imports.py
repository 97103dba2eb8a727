"""Judgments made elsewhere: a CSV (item, person, value; optional seconds and comment) or rows from code, checked
against the plan and stored only when every row is right.

An unknown item, a value off the scale, a bad name or a row already imported is refused by name (with its line),
before anything is stored: nothing stored before is touched. A pair's A and B are the item's `order`, as
`plan.csv` lists them.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError
from ..reading import read_text
from .plan import Plan, read_plan
from .storage import PERSON, Judgment, Source, append_judgments, now, read_judgments

REQUIRED = ("item", "person", "value")
OPTIONAL = ("seconds", "comment")
SHOWN_PROBLEMS = 10
"""At most this many problems are listed in the error (the count says how many there were)."""


def import_csv(results: str | os.PathLike[str], path: str | os.PathLike[str]) -> int:
    """Store the judgments of a CSV file (header: item, person, value[, seconds, comment]); returns how many.

    Raises:
        ConfigError: naming every bad row (file:line) before any is stored; nothing is written then.
    """
    text = read_text(path, "judgments CSV")
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if missing or unknown:
        raise ConfigError(
            f"{path}: the header must name {', '.join(REQUIRED)} (and may name {', '.join(OPTIONAL)}); "
            + "; ".join(
                p for p in (f"missing {missing}" if missing else "", f"unknown {unknown}" if unknown else "") if p
            )
        )
    rows = [(f"{path}:{reader.line_num}", dict(row)) for row in reader]
    return store_rows(results, rows, source="csv")


def add_judgments(results: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Store judgments given as mappings (item, person, value[, seconds, comment]) from code; returns how many.

    Raises:
        ConfigError: naming every bad row (by index) before any is stored.
    """
    return store_rows(results, [(f"row {k}", dict(r)) for k, r in enumerate(rows)], source="code")


def store_rows(results: str | os.PathLike[str], rows: list[tuple[str, dict[str, Any]]], *, source: Source) -> int:
    """Check every row against the stored plan, then append them all (or raise, storing none)."""
    plan = read_plan(results)
    stored = {(j.item, j.person) for j in read_judgments(results, warn=False).judgments if j.source == source}
    judgments: list[Judgment] = []
    problems: list[str] = []
    for where, row in rows:
        found = _judgment(plan, row, source)
        if isinstance(found, str):
            problems.append(f"{where}: {found}")
        elif (found.item, found.person) in stored:
            problems.append(f"{where}: {found.person} on item {found.item} was already imported (refused, not doubled)")
        else:
            judgments.append(found)
    if problems:
        listed = "\n".join(problems[:SHOWN_PROBLEMS])
        more = f"\n(and {len(problems) - SHOWN_PROBLEMS} more)" if len(problems) > SHOWN_PROBLEMS else ""
        raise ConfigError(f"{len(problems)} of {len(rows)} judgment(s) refused; nothing stored:\n{listed}{more}")
    return append_judgments(results, judgments)


def _judgment(plan: Plan, row: dict[str, Any], source: Source) -> Judgment | str:
    """The judgment a row gives, or what is wrong with it."""
    item_id, person = str(row.get("item") or "").strip(), str(row.get("person") or "").strip()
    item = plan.by_id().get(item_id)
    if item is None:
        return f"unknown item {item_id!r} (not in the plan)"
    if not PERSON.fullmatch(person):
        return f"person {person!r} is not a name (1-64 letters, digits, '.', '_' or '-')"
    value = _value(row.get("value"), plan)
    problem = plan.value_problem(value)
    if problem:
        return problem
    seconds = row.get("seconds")
    try:
        secs = float(seconds) if seconds not in (None, "") else None
    except (TypeError, ValueError):
        return f"seconds {seconds!r} is not a number"
    if secs is not None and not secs >= 0:
        return f"seconds {seconds!r} is negative"
    return Judgment(
        item=item_id,
        person=person,
        value=value,
        shown=list(item.order),
        seconds=secs,
        time=now(),
        comment=str(row.get("comment") or ""),
        source=source,
    )


def _value(raw: Any, plan: Plan) -> Any:
    """A CSV's text as the plan's kind of value: A/B/tie/skip in any case, or a whole number."""
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    for word in ("A", "B", "tie", "skip"):
        if text.lower() == word.lower():
            return word
    if plan.kind == "rating" and text.lstrip("-").isdigit():
        return int(text)
    return text


__all__ = ["add_judgments", "import_csv", "store_rows"]
