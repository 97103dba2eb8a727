"""People's judgments on disk: `<results>/judgments/<person>.jsonl`, one JSON line per judgment, append-only.

A file is only ever appended to (never rewritten), so a judgment once stored is never lost. A line that does not
read as a `Judgment` (a crash mid-write, a hand edit) is named by file and line with a short excerpt, and skipped:
one damaged line costs that line. More in docs/people.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..errors import PromptlabWarning as Note
from ..reading import RefusedFile, jsonl_lines, open_regular, read_bounded

R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)

JUDGMENTS_DIR = "judgments"
"""The folder of a results directory that holds the plan and one file per person."""
MAX_JUDGMENTS_BYTES = 2**28
"""The largest judgments file read (a judgment is about 300 bytes)."""
EXCERPT_CHARS = 40
"""How much of a damaged line a warning quotes."""
PERSON = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A person's name: it is their file's name (letters, digits, '.', '_', '-'; at most 64 characters)."""
PAIR_VALUES = ("A", "B", "tie", "skip")
"""A pairwise judgment: the text shown first (A) or second (B) is better, they are as good, or skipped."""
SKIP = "skip"

Source = Literal["widget", "csv", "code"]


class Judgment(BaseModel):
    """One person's judgment of one item, as stored (one JSON line)."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Record format version."""
    item: str
    """The plan item judged (`promptlab.people.plan.Item.id`)."""
    person: str
    """Who judged (their file's name)."""
    value: str | int
    """Pairs: 'A', 'B', 'tie' or 'skip' (A is the text shown first); ratings: a whole number on the plan's scale,
    or 'skip'."""
    shown: list[str] = Field(default_factory=list)
    """The item's sides in the order they were shown ('start' / 'returned'): what A and B stood for."""
    position: int | None = None
    """The plan slot judged (None for a judgment imported off the plan's order)."""
    seconds: float | None = Field(None, ge=0)
    """Seconds the person took (None when not measured, e.g. imported)."""
    time: str = ""
    """UTC time the judgment was stored (ISO 8601)."""
    comment: str = ""
    """The person's optional comment."""
    source: Source = "widget"
    """Where it was made: the JupyterLab widget, a CSV import, or code."""


@dataclass
class Stored:
    """The judgments of a results directory, and the lines that could not be read."""

    judgments: list[Judgment] = field(default_factory=list)
    """Every readable judgment, file by file (people in name order), in the order stored."""
    damaged: list[str] = field(default_factory=list)
    """One note per damaged line: 'file:line: why (excerpt)'."""


def judgments_dir(results: str | os.PathLike[str]) -> Path:
    """`<results>/judgments` (not created)."""
    return Path(results) / JUDGMENTS_DIR


def check_person(person: str) -> str:
    """The name, or a ConfigError saying what a name may hold."""
    if not isinstance(person, str) or not PERSON.fullmatch(person):
        raise ConfigError(
            f"person {person!r}: a name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit "
            "(it names the file <results>/judgments/<person>.jsonl)"
        )
    return person


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def append_judgments(results: str | os.PathLike[str], judgments: Iterable[Judgment]) -> int:
    """Append judgments to their people's files (created as needed); returns how many were written.

    Each file is opened for appending only, never through a link; a file whose last line was cut short (a crash
    mid-write) gets a line break first, so its damaged line stays one line."""
    by_person: dict[str, list[Judgment]] = {}
    for j in judgments:
        by_person.setdefault(check_person(j.person), []).append(j)
    folder = judgments_dir(results)
    for person, items in by_person.items():
        append_records(folder / f"{person}.jsonl", items, "judgments file")
    return sum(len(v) for v in by_person.values())


def append_records(path: Path, records: Iterable[BaseModel], what: str) -> None:
    """Append one JSON line per record to `path` (its folder created as needed), opened for appending only and
    never through a link; a file whose last line was cut short (a crash mid-write) gets a line break first, so
    its damaged line stays one line. `what` names the file in an error."""
    text = "".join(r.model_dump_json() + "\n" for r in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, what)
    with os.fdopen(fd, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                text = "\n" + text
        f.write(text.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def read_judgments(results: str | os.PathLike[str], *, warn: bool = True) -> Stored:
    """Every judgment stored beside a results directory; each damaged line is named (and warned about) and skipped.

    Args:
        results: The results directory.
        warn: Emit a PromptlabWarning per damaged line (the notes are in `Stored.damaged` either way).
    """
    out = Stored()
    folder = judgments_dir(results)
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.jsonl")):
        found, damaged = read_records(path, partial(_problem, person=path.stem), "judgments file", path.name)
        out.judgments += found
        out.damaged += damaged
    if warn:
        for note in out.damaged:
            warnings.warn(f"judgments: skipped a damaged line: {note}", Note, stacklevel=2)
    return out


def read_records(path: Path, parse: Callable[[str], R | str], what: str, shown: str) -> tuple[list[R], list[str]]:
    """The records of one append-only JSONL file and a note per line that holds none ('shown:line: why (excerpt)',
    or 'shown: unreadable: ...' for the whole file). `parse` gives a line's record or why it holds none; `what`
    names the file in a read error."""
    try:
        text = read_bounded(path, MAX_JUDGMENTS_BYTES, what).decode("utf-8", errors="replace")
    except (OSError, RefusedFile) as e:
        return [], [f"{shown}: unreadable: {e}"]
    records: list[R] = []
    damaged: list[str] = []
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        found = parse(line)
        if isinstance(found, str):
            damaged.append(f"{shown}:{number}: {found} ({excerpt(line)})")
        else:
            records.append(found)
    return records, damaged


def parse_record(line: str, model: type[M], noun: str) -> M | str:
    """The `model` record a JSON line holds, or why it holds none ('not JSON (...)', 'not a <noun> (field: ...)')."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        return f"not JSON ({e.msg})"
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        return f"not a {noun} ({'.'.join(str(p) for p in first['loc']) or 'record'}: {first['msg']})"


def excerpt(line: str) -> str:
    """The start of a line, quoted, never the whole of a long one."""
    return repr(line[:EXCERPT_CHARS]) + ("..." if len(line) > EXCERPT_CHARS else "")


def _problem(line: str, person: str) -> Judgment | str:
    """The judgment a line holds, or why it holds none."""
    judgment = parse_record(line, Judgment, "judgment")
    if isinstance(judgment, str):
        return judgment
    if judgment.person != person:
        return f"person {judgment.person!r} in the file of {person!r}"
    return judgment


__all__ = [
    "JUDGMENTS_DIR",
    "PAIR_VALUES",
    "SKIP",
    "Judgment",
    "Source",
    "Stored",
    "append_judgments",
    "append_records",
    "parse_record",
    "read_records",
    "check_person",
    "excerpt",
    "judgments_dir",
    "now",
    "read_judgments",
]
