"""The small pure helpers every loop shares: cutting text for a prompt (`cut`), the mean of present scores
(`mean_present`) and the best iteration by a loop's own ranking (`best_iteration`, `by_average`,
`by_decision_score`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...record import Iteration


def cut(text: Any, limit: int | None, *, count: bool = False) -> str:
    """`text` (JSON for any other value) stripped, and cut to `limit` characters with '...' when longer (None:
    never cut). With `count`, the first `limit` characters are kept and '... [N more characters]' says how
    much was left out (for a model that should know the text goes on)."""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, sort_keys=True, default=str)
    text = text.strip()
    if limit is None or len(text) <= limit:
        return text
    if count:
        return f"{text[:limit]}... [{len(text) - limit} more characters]"
    return text[: max(limit - 3, 0)].rstrip() + "..."


def mean_present(values: Iterable[float | None]) -> float | None:
    """The mean of the present (not None) values, unrounded; None when none is present."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def by_average(it: Iteration) -> float | None:
    """Rank iterations by their average (loops whose router uses no score: PES, PCEE)."""
    return it.average


def by_decision_score(it: Iteration) -> float | None:
    """Rank iterations by the score their router used (`Iteration.decision_score`: P³RO, Creator/Critic)."""
    return it.decision_score


def best_iteration(
    iterations: Sequence[Iteration], key: Callable[[Iteration], float | None] = by_average
) -> Iteration | None:
    """The highest-scoring iteration with a candidate (by `key`, default the average); ties go to the
    earliest (a tie is no evidence that the later candidate is better)."""
    scored = [(v, i) for i in iterations if i.candidate is not None and (v := key(i)) is not None]
    return max(scored, key=lambda p: (p[0], -p[1].index))[1] if scored else None


__all__ = ["best_iteration", "by_average", "by_decision_score", "cut", "mean_present"]
