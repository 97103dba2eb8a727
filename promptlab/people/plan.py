"""A judging plan: which items people judge, in which order, drawn with a seed, stored as
`<results>/judgments/plan.json`.

The order is stratified: items are dealt round-robin over the strata (critic x pairing), so a person's first
judgments cover every critic and pairing (the first 40 do when there are at most 36 strata). About one slot in ten
is an earlier item coming back, unannounced and in a freshly drawn order, to measure each person's consistency.
More in docs/people.md.
"""

from __future__ import annotations

import csv
import io
import os
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..reading import RefusedFile, read_bounded
from ..results.atomic import atomic_write
from .items import Item, Kind, candidate_items
from .storage import judgments_dir, read_judgments

PLAN_FILE = "plan.json"
MAX_PLAN_BYTES = 2**28
REPEAT_GAP = 5
"""A repeat comes back at least this many slots after the item was first shown."""
DEFAULT_ANCHORS = {
    1: "misses the goal entirely",
    4: "partly meets the goal, with clear faults",
    7: "meets the goal, with small faults",
    10: "meets the goal fully; nothing to improve",
}


class Scale(BaseModel):
    """The rating scale: whole numbers from `low` to `high`, with words at some points."""

    model_config = ConfigDict(extra="forbid")

    low: int = 1
    """The lowest value."""
    high: int = 10
    """The highest value."""
    anchors: dict[int, str] = Field(default_factory=lambda: dict(DEFAULT_ANCHORS))
    """Value -> what it means, shown beside the scale."""


class Slot(BaseModel):
    """One place in the judging order."""

    model_config = ConfigDict(extra="forbid")

    position: int
    """0, 1, 2, ...: the order every person judges in."""
    item: str
    """The item shown."""
    shown: list[str]
    """Its sides in the order shown (pairs: A then B)."""
    repeat: bool = False
    """An item shown before, back unannounced (the person is not told)."""


class Plan(BaseModel):
    """What people judge in a results directory, and in which order."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Record format version."""
    kind: Kind
    """'pair' or 'rating'."""
    seed: int
    """The seed the items, their order and their sides' order were drawn with."""
    scale: Scale = Field(default_factory=Scale)
    """The rating scale (ratings only)."""
    items: list[Item]
    """Every item, by first position."""
    slots: list[Slot]
    """The judging order, repeats included."""
    left_out: dict[str, int] = Field(default_factory=dict)
    """Runs that gave no item, by why."""

    def item(self, item_id: str) -> Item:
        """The item with that id (ConfigError when the plan has none)."""
        found = self.by_id().get(item_id)
        if found is None:
            raise ConfigError(f"item {item_id!r} is not in the plan ({len(self.items)} items)")
        return found

    def by_id(self) -> dict[str, Item]:
        """Item id -> item."""
        return {i.id: i for i in self.items}

    def value_problem(self, value: object) -> str | None:
        """Why `value` is no judgment of this plan's kind (None when it is one)."""
        if value == "skip":
            return None
        if self.kind == "pair":
            return None if value in ("A", "B", "tie") else f"value {value!r} is not A, B, tie or skip"
        low, high = self.scale.low, self.scale.high
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return None
        return f"value {value!r} is off the scale (a whole number {low}-{high}, or skip)"


def make_plan(
    results: str | os.PathLike[str],
    *,
    kind: Kind = "pair",
    seed: int = 0,
    limit: int | None = None,
    repeat_every: int = 10,
    per_run: int = 1,
    scale: Scale | None = None,
) -> Plan:
    """Draw a plan over a results directory's ok runs (nothing is written: `write_plan`).

    Args:
        results: The results directory.
        kind: 'pair' (start against returned, A/B/tie) or 'rating' (each text on `scale`).
        seed: Seed of every draw: the same seed gives the same plan.
        limit: At most this many items (kept stratified); None: all.
        repeat_every: One slot in this many is a repeat (0: none).
        per_run: Inputs per run (a grounded run has one per test example).
        scale: The rating scale (default 1-10 with anchors).
    """
    rng = random.Random(seed)
    items, left_out = candidate_items(str(results), kind, rng, per_run)
    ordered = stratified(items, rng)[:limit]
    return Plan(
        kind=kind,
        seed=seed,
        scale=scale or Scale(),
        items=ordered,
        slots=slots_with_repeats(ordered, rng, repeat_every),
        left_out=left_out,
    )


def stratified(items: list[Item], rng: random.Random) -> list[Item]:
    """Items dealt round-robin over their strata (critic x pairing, in a drawn order), each stratum shuffled."""
    strata: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        strata.setdefault((item.critic, item.pairing), []).append(item)
    keys = sorted(strata)
    rng.shuffle(keys)
    for key in keys:
        rng.shuffle(strata[key])
    out: list[Item] = []
    for k in range(max((len(v) for v in strata.values()), default=0)):
        out.extend(strata[key][k] for key in keys if k < len(strata[key]))
    return out


def slots_with_repeats(items: list[Item], rng: random.Random, repeat_every: int) -> list[Slot]:
    """The judging order: each item once in order, and after every `repeat_every - 1` of them one earlier item
    (shown at least `REPEAT_GAP` slots before, never repeated twice) again in a fresh order."""
    slots: list[Slot] = []
    repeated: set[str] = set()
    for item in items:
        slots.append(Slot(position=len(slots), item=item.id, shown=list(item.order)))
        if repeat_every and len(slots) % repeat_every == repeat_every - 1:
            earlier = [s for s in slots[: len(slots) - REPEAT_GAP + 1] if not s.repeat and s.item not in repeated]
            if earlier:
                back = rng.choice(earlier)
                repeated.add(back.item)
                slots.append(
                    Slot(
                        position=len(slots), item=back.item, shown=rng.sample(back.shown, len(back.shown)), repeat=True
                    )
                )
    return slots


def plan_path(results: str | os.PathLike[str]) -> Path:
    """`<results>/judgments/plan.json`."""
    return judgments_dir(results) / PLAN_FILE


def write_plan(results: str | os.PathLike[str], plan: Plan) -> Path:
    """Store the plan (whole or not at all). A plan that drops an item someone has judged is refused: those
    judgments would lose their item."""
    path = plan_path(results)
    judged = {j.item for j in read_judgments(results, warn=False).judgments}
    lost = sorted(judged - set(plan.by_id()))
    if lost:
        raise ConfigError(
            f"{path}: the new plan leaves out {len(lost)} judged item(s) ({', '.join(lost[:3])}); refused, the "
            "stored plan is kept (draw it with the same seed and settings, or judge in a new results directory)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, plan.model_dump_json(indent=1).encode())
    return path


def write_plan_csv(results: str | os.PathLike[str], plan: Plan) -> Path:
    """`<results>/judgments/plan.csv`: one row per slot (item, input, and A and B, or the text) for an annotation
    tool; what it sends back is imported with `import_csv` (a pair's A and B are each item's `order`)."""
    by_id = plan.by_id()
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["item", "kind", "input", "a", "b", "scale"])
    for slot in plan.slots:
        item = by_id[slot.item]
        texts = [item.texts[side] for side in item.order]
        scale = f"{plan.scale.low}-{plan.scale.high}" if plan.kind == "rating" else "A, B, tie, skip"
        writer.writerow([item.id, item.kind, item.input, texts[0], texts[1] if len(texts) > 1 else "", scale])
    path = judgments_dir(results) / "plan.csv"
    atomic_write(path, out.getvalue().encode("utf-8"))
    return path


def read_plan(results: str | os.PathLike[str]) -> Plan:
    """The stored plan (ConfigError naming the file when missing or unreadable)."""
    path = plan_path(results)
    try:
        text = read_bounded(path, MAX_PLAN_BYTES, "plan")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no judging plan; draw one with `promptlab judgments plan {results}`") from None
    except (OSError, RefusedFile) as e:
        raise ConfigError(f"{path}: unreadable: {e}") from e
    try:
        return Plan.model_validate_json(text)
    except ValidationError as e:
        raise ConfigError(f"{path}: not a judging plan: {e.error_count()} error(s): {e.errors()[0]['msg']}") from e


__all__ = [
    "DEFAULT_ANCHORS",
    "PLAN_FILE",
    "Plan",
    "Scale",
    "Slot",
    "make_plan",
    "plan_path",
    "read_plan",
    "write_plan",
    "write_plan_csv",
]
