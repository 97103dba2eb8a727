"""The prompt-search baselines' router (`opro`, `ape`, `protegi`, `resample`): before each step, NEXT or STOP,
and the run's stop reason. Pure: a function of the steps left and the budget's answer.

These loops decide nothing from a score about stopping (a candidate's score only changes the incumbent,
`promptlab.loops.runtime.search.Search.consider`): a run ends when its planned steps are done
('max_iterations') or when the budget refuses the next step ('budget')."""

from __future__ import annotations

from typing import Literal

from .budget import BUDGET
from .decision import Decision

Action = Literal["NEXT", "STOP"]


def route(left: int, budget: str | None) -> Decision[Action]:
    """The decision before a step: STOP with 'max_iterations' when no planned step is left (checked first:
    a run that did all it planned stopped for that), STOP with 'budget' when the budget refuses the step
    (`budget`: its reason, from `RunContext.budget_stop`), else NEXT.

    Args:
        left: planned steps left at this level (candidates of a step, steps, rounds), this one included.
        budget: why the budget refuses the step, or None when it allows it.
    """
    if left <= 0:
        return Decision("STOP", "every planned step is done", "max_iterations")
    if budget:
        return Decision("STOP", budget, BUDGET)
    return Decision("NEXT", f"{left} planned step(s) left")


__all__ = ["Action", "route"]
