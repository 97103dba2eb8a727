"""PCEE's router: before each tool execution and after each verdict, what next (the next step, a correction or
the end), why, and the run's stop reason when it ends. Pure: a function of counts, the verdict and the config.

The loop (`promptlab.loops.pcee.loop`) records each decision on the execution it follows (a stop decided
before an execution re-decides the last one) and ends the run with the decision's stop reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..runtime.budget import BUDGET
from ..runtime.decision import Decision
from .config import PCEEConfig

Action = Literal["next_step", "correct", "stop"]


@dataclass(frozen=True)
class Progress:
    """What the router reads: the run's counts, and the verdict it decides on (None: before an execution)."""

    executions: int
    """Tool executions so far (plan steps, retries and fix steps together)."""
    budget: str | None = None
    """Why the budget refuses the next execution (None: it allows it)."""
    ok: bool | None = None
    """The verdict on the last execution of a plan step: True (success), False (failure), None (no verdict:
    the decision before an execution)."""
    step_id: int = 0
    """The plan step the verdict is about."""
    reason: str = ""
    """Why that step succeeded or failed (the evaluator's or the controller's words; after failed
    corrections, the whole chain)."""
    last_step: bool = False
    """Whether that step is the plan's last."""
    plan_steps: int = 0
    """The plan's length."""
    retries_used: int = 0
    """Corrections asked for so far (per run)."""
    correction_failed: str | None = None
    """Why the correction just made failed (None: no correction has just failed)."""


def route(p: Progress, cfg: PCEEConfig) -> Decision[Action]:
    """The next move and, when it ends the run, its stop reason.

    Before an execution (`ok` None): stop with 'max_iterations' when `max_iterations` executions are done,
    with 'budget' when the budget refuses the next one, else go on (next_step).
    After a success: stop with 'plan_complete' after the plan's last step, else next_step.
    After a failure, in order: 'max_iterations' when a correction just failed with no execution left;
    'budget' when the budget refuses the next execution; 'failed_step' when `retry_budget` corrections are
    spent, or when fewer than two executions are left (a fix step and the retry: nothing the corrector
    proposes could then lead to the step passing; the stop is named for what happened, not for the cap);
    else correct (correction `retries_used + 1`). None for `max_iterations` or `retry_budget`: no cap.
    """
    cap, left = cfg.max_iterations, cfg.execution_cap - p.executions
    if p.ok is None:
        if left <= 0:
            return Decision("stop", f"max_iterations ({cap}) tool executions reached", "max_iterations")
        if p.budget:
            return Decision("stop", p.budget, BUDGET)
        return Decision("next_step", f"{left:g} execution(s) left")
    if p.ok:
        if p.last_step:
            return Decision("stop", f"all {p.plan_steps} plan steps succeeded", "plan_complete")
        return Decision("next_step", p.reason)
    if p.correction_failed is not None and left <= 0:
        why = f"correction failed ({p.correction_failed}); max_iterations ({cap}) tool executions reached"
        return Decision("stop", why, "max_iterations")
    if p.budget:
        return Decision("stop", p.budget, BUDGET)
    failed = f"step {p.step_id} failed ({p.reason})"
    if p.retries_used >= cfg.correction_cap:
        return Decision("stop", f"{failed} and the retry budget ({cfg.retry_budget}) is spent", "failed_step")
    if left < 2:
        few = f"{left:g} execution(s) left under max_iterations ({cap}), too few for a fix and a retry"
        return Decision("stop", f"{failed} and {few}", "failed_step")
    budget = "unlimited" if cfg.retry_budget is None else cfg.retry_budget
    return Decision("correct", f"{failed}; correction {p.retries_used + 1} of {budget}")


__all__ = ["Action", "Progress", "route"]
