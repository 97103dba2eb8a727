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

from .context import RunContext

BUDGET = "budget"
"""The stop reason of a run its budget stopped."""


def last_step_cost(ctx: RunContext) -> tuple[int, int]:
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


def phase_tokens(ctx: RunContext, phase: str, calls: int, fallback: int) -> int:
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


__all__ = ["BUDGET", "last_step_cost", "phase_tokens", "rough_tokens"]
