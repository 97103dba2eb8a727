"""PES's router: after each planning round, continue (plan again) or synthesize, why, and why planning stopped;
and the run's stop reason once the synthesis has (or has not) written an answer. Pure: functions of counts.

The budget's refusal of the next round is the runtime's rule (`RunContext.budget_stop`, stop reason 'budget'),
asked before each round; the synthesis still answers from what was gathered."""

from __future__ import annotations

from typing import Literal

from ..runtime.decision import Decision

Action = Literal["continue", "synthesize"]


def route(index: int, calls: int | None, successes: int, max_iterations: int) -> Decision[Action]:
    """The decision after planning round `index` (1, 2, ...), and why planning stops when it does.

    synthesize when the planning call failed (`calls` None; planning stop 'error'), when the plan calls no
    tool ('no_tool_calls') or when round `max_iterations` is done ('max_iterations'); else continue.

    Args:
        index: the round's number.
        calls: the round's tool calls (delegations included); None when the planning call failed.
        successes: how many of them succeeded.
        max_iterations: the cap on planning rounds.
    """
    if calls is None:
        return Decision("synthesize", "the planning call failed (see errors)", "error")
    if calls == 0:
        return Decision("synthesize", "the plan calls no tool", "no_tool_calls")
    if index >= max_iterations:
        return Decision("synthesize", f"reached max_iterations ({max_iterations})", "max_iterations")
    return Decision("continue", f"{successes} of {calls} tool calls succeeded; planning again")


def run_stop_reason(planning_stop: str, answered: bool) -> str:
    """The run's stop reason: 'error' without an answer (the synthesis failed), 'planning_error' for an answer
    written after a failed planning call, else why planning stopped."""
    if not answered:
        return "error"
    return "planning_error" if planning_stop == "error" else planning_stop


__all__ = ["Action", "route", "run_stop_reason"]
