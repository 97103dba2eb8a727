"""One person judging a plan, from code or behind the JupyterLab widget (`promptlab.ui.judging`).

A session reads where the person stopped from their file (the slots they judged), so it resumes after a kernel
restart or a closed tab: what is stored is the only state.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .items import Item
from .plan import Plan, Slot, read_plan
from .storage import Judgment, Source, append_judgments, check_person, now, read_judgments


@dataclass(frozen=True)
class Shown:
    """What a person sees for one slot: nothing about which prompt, loop, model or critic made the texts."""

    position: int
    """The slot (0-based)."""
    number: int
    """1-based: 'number of total'."""
    total: int
    """Slots in the plan."""
    kind: str
    """'pair' or 'rating'."""
    input: str
    """What the texts answer."""
    texts: list[str]
    """The texts in the order shown (A, B for a pair)."""


class Session:
    """A person's judging of a results directory's plan.

    Args:
        results: The results directory (with a plan: `promptlab judgments plan`).
        person: Who judges (their file's name).
        source: What the judgments are recorded as made with ('widget' behind the JupyterLab widget).
    """

    def __init__(self, results: str | os.PathLike[str], person: str, *, source: Source = "code") -> None:
        self.source: Source = source
        self.results = Path(results)
        self.person = check_person(person)
        self.plan: Plan = read_plan(results)
        self.items: dict[str, Item] = self.plan.by_id()
        self.started = time.monotonic()

    def judged(self) -> set[int]:
        """The slots this person has judged (from their file)."""
        stored = read_judgments(self.results, warn=False).judgments
        return {j.position for j in stored if j.person == self.person and j.position is not None}

    def next_slot(self) -> Slot | None:
        """The first slot this person has not judged, or None when they are done."""
        done = self.judged()
        return next((s for s in self.plan.slots if s.position not in done), None)

    def show(self, slot: Slot) -> Shown:
        """The slot as the person sees it (the clock for its seconds starts now)."""
        item = self.items[slot.item]
        self.started = time.monotonic()
        return Shown(
            position=slot.position,
            number=slot.position + 1,
            total=len(self.plan.slots),
            kind=item.kind,
            input=item.input,
            texts=[item.texts[side] for side in slot.shown],
        )

    def record(self, slot: Slot, value: str | int, *, comment: str = "", seconds: float | None = None) -> Judgment:
        """Store this person's judgment of `slot` (seconds since `show`, unless given).

        Raises:
            ConfigError: a value that is not one of the plan's, or a slot already judged (nothing stored).
        """
        problem = self.plan.value_problem(value)
        if problem:
            raise ConfigError(f"slot {slot.position}: {problem}")
        if slot.position in self.judged():
            raise ConfigError(
                f"slot {slot.position}: {self.person} has judged it already (a judgment is never rewritten)"
            )
        judgment = Judgment(
            item=slot.item,
            person=self.person,
            value=value,
            shown=list(slot.shown),
            position=slot.position,
            seconds=round(time.monotonic() - self.started, 3) if seconds is None else seconds,
            time=now(),
            comment=comment,
            source=self.source,
        )
        append_judgments(self.results, [judgment])
        return judgment


__all__ = ["Session", "Shown"]
