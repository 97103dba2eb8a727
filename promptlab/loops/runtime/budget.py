"""Budgets: whether a loop's next step may start, and what it is expected to cost.

Every loop config takes `budget_calls` and `budget_tokens` (`promptlab.loops.runtime.config.LoopConfig`). The run
counts what it spends (`RunContext.spent`: every call but test-split measurement, a cache hit with its original
call's tokens, so a replay spends exactly what the first run did), and before each step a loop asks
`RunContext.budget_stop(calls, tokens)` with the step's expected cost; on a reason it stops with stop reason
`BUDGET`. An estimate that falls short lets the run pass a budget by at most that one step.

What a step is, per loop:

- P³RO and Creator/Critic: one iteration (a rewrite, its dev measurement and its critique; P³RO's strategy
  revision and reflection with it); PES: one planning round and its tool calls (the synthesis after the last
  round always runs); PCEE: one tool execution with its evaluation. The next step is expected to cost what the
  last one did (`last_step_cost`), which is exact for steps that are alike and unknown (0) for the first.
- OPRO, APE, resample: one candidate, i.e. the call that writes it and its dev evaluation; ProTeGi: one call
  (a gradient, an edit or a paraphrase) or one bandit pull (a prompt on a few dev examples). Their calls are
  known in advance; their tokens are estimated by `phase_tokens`: the run's mean per call of the same kind so
  far, and, for the first call of a kind, its prompt's length alone (`rough_tokens`).
"""

from __future__ import annotations

from ...llm.spending.tally import Tally
from ...record import Run
from .config import LoopConfig
from .interrupt import INTERRUPTED, stop_requested

OUTPUT_PHASE = "output"
"""The phase of a prompt's own reply recorded for people to judge (`grounding.record_outputs`)."""

BUDGET_FREE_PHASES = frozenset({"score_test", OUTPUT_PHASE})
"""Phases whose calls measure a run rather than drive it (the test split, the replies recorded for people to
judge): left out of its budget spend."""

BUDGET = "budget"
"""The stop reason of a run its budget stopped."""


class BudgetMeter:
    """What a run has used of its budget of calls and tokens, and whether its next step may start (`RunContext` is one)."""

    config: LoopConfig
    run: Run

    def __init__(self) -> None:
        self.spent = Tally()
        """What the run has spent towards its budget: every call outside `BUDGET_FREE_PHASES`, a cache hit with
        its original call's tokens and cost (so a replay spends what the first run did)."""
        self.spent_by_phase: dict[str, Tally] = {}
        """`spent` by phase: what a loop estimates its next step's cost from (`last_step_cost`, `phase_tokens`)."""

    def spend(
        self,
        phase: str,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = 0.0,
        *,
        failed: bool = False,
    ) -> None:
        """Count one call of `phase` towards the run's budget (`spent`), unless the phase is budget-free."""
        if phase not in BUDGET_FREE_PHASES:
            for tally in (self.spent, self.spent_by_phase.setdefault(phase, Tally())):
                tally.count(failed=failed, input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd)

    def spend_tally(self, phase: str, tally: Tally) -> None:
        """Count calls made outside `completion` (a judge scorer's, as a budget counts them) towards the
        budget, unless the phase is budget-free."""
        if tally.calls and phase not in BUDGET_FREE_PHASES:
            self.spent.merge(tally)
            self.spent_by_phase.setdefault(phase, Tally()).merge(tally)

    @staticmethod
    def recorded_stop(stop_reason: str) -> str:
        """The stop reason a run records: 'budget' is INTERRUPTED while a Stop is asked (`stop_scope`), since the
        loop then stopped as on a budget."""
        return INTERRUPTED if stop_reason == BUDGET and stop_requested() else stop_reason

    def budget_stop(self, next_calls: int = 0, next_tokens: int = 0) -> str | None:
        """Why the next step, expected to make `next_calls` calls of `next_tokens` tokens, must not start
        (its spend would pass `budget_calls` or `budget_tokens`), or None when it may. A loop asks before each
        step and stops with stop reason 'budget' on a reason; an estimate that falls short can pass a budget
        by at most that one step. While a `stop_scope` flag is set, every step must not start."""
        if stop_requested():
            return f"{INTERRUPTED}: asked to stop"
        cfg, s = self.config, self.spent
        if cfg.budget_calls is not None and s.calls + next_calls > cfg.budget_calls:
            return (
                f"budget: {s.calls} calls spent, the next step needs about {next_calls} more "
                f"(budget_calls {cfg.budget_calls})"
            )
        if cfg.budget_tokens is not None and s.tokens + next_tokens > cfg.budget_tokens:
            return (
                f"budget: {s.tokens} tokens spent, the next step needs about {next_tokens} more "
                f"(budget_tokens {cfg.budget_tokens})"
            )
        return None


def last_step_cost(ctx: BudgetMeter) -> tuple[int, int]:
    """(calls, tokens) the run spent between its last two decisions: the expected cost of the next step of a loop
    whose steps are alike. With one decision, what the run had spent by then (setup included: an
    over-estimate); with none, (0, 0)."""
    decided = [it.spent for it in ctx.run.iterations if it.spent is not None]
    if not decided:
        return 0, 0
    if len(decided) == 1:
        return decided[0].calls, decided[0].tokens
    before, last = decided[-2], decided[-1]
    return max(last.calls - before.calls, 0), max(last.tokens - before.tokens, 0)


def phase_tokens(ctx: BudgetMeter, phase: str, calls: int, fallback: int) -> int:
    """Expected tokens of `calls` calls of `phase`: the run's mean tokens per call of that phase so far, else
    `fallback` per call (e.g. the prompt's characters / 4 plus the reply cap)."""
    tally = ctx.spent_by_phase.get(phase)
    per_call = tally.tokens / tally.calls if tally is not None and tally.calls else fallback
    return round(per_call * calls)


def rough_tokens(text: str) -> int:
    """A first guess at a call's tokens before the run has made one like it: its prompt's characters / 4, and
    nothing for the reply, whose length is unknown (the reply cap would stop most runs before their first
    step). Optimistic, so a run may pass a budget by that one step."""
    return len(text) // 4


__all__ = [
    "BUDGET",
    "BUDGET_FREE_PHASES",
    "OUTPUT_PHASE",
    "BudgetMeter",
    "last_step_cost",
    "phase_tokens",
    "rough_tokens",
]
