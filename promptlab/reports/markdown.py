"""Markdown tables for summary.md: every cell one line, whatever its text (an error message with newlines, a value
with a pipe), so a row never breaks the table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def table_cell(value: Any) -> str:
    """`value` as one markdown table cell: line breaks (and the spaces around them) become one space, pipes are
    escaped."""
    return _BREAKS.sub(" ", str(value)).strip().replace("|", "\\|")


def table_row(cells: Iterable[Any]) -> str:
    """One markdown table row of `cells` (each through `table_cell`)."""
    return "| " + " | ".join(table_cell(c) for c in cells) + " |"


def table_lines(header: Sequence[Any], rows: Iterable[Iterable[Any]], align: Sequence[str] | None = None) -> list[str]:
    """A markdown table: the header, its rule (`align`: "---", "---:" per column; default "---") and the rows."""
    rule = "|" + "|".join(align or ["---"] * len(header)) + "|"
    return [table_row(header), rule, *(table_row(r) for r in rows)]


def percent(share: float) -> str:
    """A share as a percentage, as it is (0.975 -> "97.5%", 0.99 -> "99%"; at most 4 decimals), never rounded to a
    whole number that is not the level."""
    return f"{round(float(share) * 100, 4):g}%"


__all__ = ["percent", "table_cell", "table_lines", "table_row"]
