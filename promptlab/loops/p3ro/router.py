"""P³RO's router, the NextStepDecider: after each iteration, FINISH, REVISE_STRATEGY or CONTINUE_PROBING, why,
and (on FINISH) the run's stop reason. Pure: a function of the averages and the config."""

from __future__ import annotations

from typing import Literal

from ..runtime.decision import Decision
from .config import P3ROConfig

Action = Literal["FINISH", "REVISE_STRATEGY", "CONTINUE_PROBING"]


def route(averages: list[float | None], config: P3ROConfig, *, start: bool = False) -> Decision[Action]:
    """The next step after the last iteration, why, and the stop reason when it finishes.

    Rules, in order: FINISH when the last average >= `finish_threshold` (stop reason 'threshold') or
    `len(averages)` >= `max_iterations` ('max_iterations'); REVISE_STRATEGY when there are two or more
    iterations and the last average did not increase; CONTINUE_PROBING otherwise.

    A missing average (None: no candidate, or the evaluator failed) is never replaced by a number: it
    never finishes by threshold, and as the last average it counts as "did not increase". When the
    iteration just before has no average, the last one is compared with the most recent present average;
    if there is none, there is nothing to compare with and probing continues.

    With `start`, `averages` holds only the starting prompt's (candidate 0): it finishes the run by the
    threshold alone (the cap counts rewrites), else probing starts.

    Args:
        averages: the average score of every rewrite so far, in order (None where missing).
        config: supplies `finish_threshold` and `max_iterations`.
        start: the decision is about candidate 0, the starting prompt.

    Raises:
        ValueError: `averages` is empty.
    """
    if not averages:
        raise ValueError("route needs the averages of at least one iteration")
    n, last = len(averages), averages[-1]
    if last is not None and last >= config.finish_threshold:
        return Decision("FINISH", f"average {last:g} >= threshold {config.finish_threshold:g}", "threshold")
    if start:
        return Decision("CONTINUE_PROBING", "the starting prompt (candidate 0) is below the threshold")
    if n >= config.max_iterations:
        return Decision("FINISH", f"reached max_iterations {config.max_iterations}", "max_iterations")
    if n < 2:
        if last is None:
            return Decision("CONTINUE_PROBING", "first iteration has no score; nothing to compare with")
        return Decision("CONTINUE_PROBING", f"first iteration (average {last:g}); nothing to compare with yet")
    if last is None:
        return Decision("REVISE_STRATEGY", "average missing this iteration: counted as no improvement")
    earlier = [(i, a) for i, a in enumerate(averages[:-1], start=1) if a is not None]
    if not earlier:
        return Decision("CONTINUE_PROBING", f"average {last:g}; no earlier average to compare with")
    idx, prev = earlier[-1]
    where = f"iteration {idx}" + ("" if idx == n - 1 else f"; iteration {n - 1} had no score")
    if last <= prev:
        return Decision("REVISE_STRATEGY", f"average {last:g} did not increase over {prev:g} ({where})")
    return Decision("CONTINUE_PROBING", f"average {last:g} increased over {prev:g} ({where})")


__all__ = ["Action", "route"]
