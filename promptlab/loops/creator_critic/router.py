"""Creator/Critic's router: after each iteration, FINISH or CONTINUE, why, and (on FINISH) the run's stop
reason. Pure: a function of the aggregates and the config."""

from __future__ import annotations

from typing import Literal

from ..runtime.decision import Decision
from .config import CreatorCriticConfig

Action = Literal["FINISH", "CONTINUE"]


def threshold_streak(aggregates: list[float | None], threshold: float) -> int:
    """Consecutive iterations, counted back from the last, whose aggregate is >= `threshold`."""
    n = 0
    for a in reversed(aggregates):
        if a is None or a < threshold:
            break
        n += 1
    return n


def route(aggregates: list[float | None], config: CreatorCriticConfig, *, start: bool = False) -> Decision[Action]:
    """Stop or go on after the last iteration, why, and the stop reason when it stops.

    FINISH when the aggregate has been >= `finish_threshold` for the last `patience` iterations (a
    missing aggregate breaks the run of iterations; stop reason 'threshold'), or when `max_iterations` is
    reached ('max_iterations'); else CONTINUE. With `start`, the first aggregate is the starting prompt's
    (candidate 0): it counts in the run of iterations at or above the threshold but not towards
    `max_iterations`, which counts rewrites.

    Raises:
        ValueError: `aggregates` is empty.
    """
    if not aggregates:
        raise ValueError("route needs the aggregate of at least one iteration")
    last, t = aggregates[-1], config.finish_threshold
    if t is not None and threshold_streak(aggregates, t) >= config.patience:
        reason = f"aggregate {last:g} >= threshold {t:g} for {config.patience} iteration(s) in a row"
        return Decision("FINISH", reason, "threshold")
    if len(aggregates) - start >= config.max_iterations:
        return Decision("FINISH", f"reached max_iterations {config.max_iterations}", "max_iterations")
    if last is None:
        return Decision("CONTINUE", "no critic score this iteration")
    if t is None:
        return Decision("CONTINUE", f"aggregate {last:g}; no early-stop threshold")
    if last < t:
        return Decision("CONTINUE", f"aggregate {last:g} below threshold {t:g}")
    streak = threshold_streak(aggregates, t)
    return Decision("CONTINUE", f"aggregate {last:g} >= threshold {t:g} for {streak} of {config.patience} iterations")


__all__ = ["Action", "route", "threshold_streak"]
