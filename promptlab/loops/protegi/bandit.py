"""ProTeGi's beam selection on the dev split: UCB bandits or successive rejects (Pryzant et al. 2023, section 2.3,
which frames choosing the beam as a best-arm identification problem).

Arms are candidate prompts. Pulling an arm runs its prompt on dev examples it has not run on yet, taken in the
run's own random order of the dev split (so arms are first compared on the same examples), and an arm's
estimate is its mean score over the examples it has run on (an example whose call failed is left out, never
counted as a score). A reply at temperature 0 is one measurement, so an arm never runs an example twice: an arm
that has run on the whole dev split is exact and is pulled no more.

- `select_ucb`: `eval_rounds` rounds; each pulls, on `samples_per_eval` examples, the `eval_prompts_per_round`
  arms with the highest upper confidence bound, mean + c sqrt(ln t / n) (UCB1, Auer et al. 2002; t: pulls so
  far plus one, n: the arm's scored examples), an arm never pulled first.
- `select_successive_rejects`: Audibert and Bubeck's (2010) successive rejects with the evaluation budget
  n = samples_per_eval x eval_rounds x eval_prompts_per_round over the K arms: in phase k every surviving arm is
  brought to n_k = ceil((n - K) / (logbar(K) (K + 1 - k))) examples, logbar(K) = 1/2 + sum_{i=2..K} 1/i, and
  the arm with the lowest mean is rejected; it stops once the beam is full, as the paper's code does.

Each pull is a step of the run's budget; a pull the budget refuses ends the selection (None).
"""

from __future__ import annotations

import math

from ...eval.stats import mean_ci
from ...record import GroundedScore, Iteration
from ..runtime.provenance import text_hash
from ..runtime.search import Search
from .config import ProTeGiConfig


class Arms:
    """The dev measurements of every candidate of a run, by iteration index: position -> score (None: failed)."""

    def __init__(self, search: Search, order: list[int]) -> None:
        self.search = search
        self.order = order
        """The run's order of the dev positions: what a pull runs next."""
        self.ledgers: dict[int, dict[int, float | None]] = {}
        self.stopped: str | None = None
        """Why the budget refused a pull (None while it has not)."""

    def ledger(self, it: Iteration) -> dict[int, float | None]:
        """`it`'s measurements so far."""
        return self.ledgers.setdefault(it.index, {})

    def record(self, it: Iteration, scores: dict[int, float | None]) -> None:
        """Add measurements of `it` and set its dev score (`Iteration.grounded`) from all it has."""
        ledger = self.ledger(it)
        ledger.update(scores)
        n_dev = len(self.search.dev)
        values = [ledger.get(i) for i in range(n_dev)]
        mean, n, low, high = mean_ci(values)
        assert it.candidate is not None
        self.search.scored(
            it,
            GroundedScore(
                split="dev",
                score=mean,
                n=n,
                ci_low=low,
                ci_high=high,
                errors=sum(i in ledger and ledger[i] is None for i in range(n_dev)),
                scores=values,
                prompt_hash=text_hash(it.candidate),
            ),
        )

    def mean(self, it: Iteration) -> float | None:
        """`it`'s estimate: its mean score over the examples it has run on (None before any)."""
        present = [s for s in self.ledger(it).values() if s is not None]
        return sum(present) / len(present) if present else None

    def count(self, it: Iteration) -> int:
        """Examples `it` has a score on."""
        return sum(s is not None for s in self.ledger(it).values())

    def todo(self, it: Iteration, n: int) -> list[int]:
        """The next `n` dev positions `it` has not run on, in the run's order."""
        ledger = self.ledger(it)
        return [i for i in self.order if i not in ledger][: max(n, 0)]

    async def pull(self, it: Iteration, positions: list[int]) -> bool:
        """Run `it` on `positions` (those it has not run on), a step of the budget; False when the budget
        refuses it."""
        positions = [i for i in positions if i not in self.ledger(it)]
        if not positions:
            return True
        assert it.candidate is not None
        reason = self.search.stop(self.search.dev_cost(it.candidate, len(positions)))
        if reason:
            self.stopped = reason
            return False
        g = await self.search.measure(it, positions)
        self.record(it, dict(zip(positions, g.scores, strict=True)))
        return True

    def ranked(self, arms: list[Iteration]) -> list[Iteration]:
        """`arms` by estimate, highest first (ties to the earlier iteration; arms without one last)."""
        return sorted(arms, key=lambda a: (self.mean(a) is None, -(self.mean(a) or 0.0), a.index))


async def select_ucb(arms: Arms, pool: list[Iteration], cfg: ProTeGiConfig) -> list[Iteration] | None:
    """The pool ranked after `eval_rounds` rounds of UCB pulls; None when the budget stopped a pull."""
    pulls = 0
    for _ in range(cfg.eval_rounds):
        open_arms = [a for a in pool if arms.todo(a, 1)]
        if not open_arms:
            break
        bounds = {a.index: _bound(arms, a, pulls + 1, cfg.ucb_c) for a in open_arms}
        chosen = sorted(open_arms, key=lambda a: (-bounds[a.index], a.index))[: cfg.eval_prompts_per_round]
        for arm in chosen:
            if not await arms.pull(arm, arms.todo(arm, cfg.samples_per_eval)):
                return None
            pulls += 1
    return arms.ranked(pool)


def _bound(arms: Arms, arm: Iteration, t: int, c: float) -> float:
    """UCB1's upper bound of an arm after t - 1 pulls (infinite for an arm without a score)."""
    n = arms.count(arm)
    return (arms.mean(arm) or 0.0) + c * math.sqrt(math.log(t) / n) if n else math.inf


async def select_successive_rejects(arms: Arms, pool: list[Iteration], cfg: ProTeGiConfig) -> list[Iteration] | None:
    """The survivors ranked (the beam first), then the rejected arms, last rejected first; None when the budget
    stopped a pull."""
    k_arms = len(pool)
    budget = cfg.samples_per_eval * cfg.eval_rounds * cfg.eval_prompts_per_round
    logbar = 0.5 + sum(1.0 / i for i in range(2, k_arms + 1))
    alive, rejected = list(pool), list[Iteration]()
    phase = 1
    while len(alive) > cfg.beam_size:
        n_k = max(1, math.ceil((budget - k_arms) / (logbar * (k_arms + 1 - phase))))
        for arm in alive:
            if not await arms.pull(arm, arms.todo(arm, n_k - len(arms.ledger(arm)))):
                return None
        worst = arms.ranked(alive)[-1]
        alive.remove(worst)
        rejected.insert(0, worst)
        phase += 1
    return arms.ranked(alive) + rejected


SELECTIONS = {"ucb": select_ucb, "successive_rejects": select_successive_rejects}
"""The beam selection by the config's `selection` name."""

__all__ = ["Arms", "SELECTIONS", "select_successive_rejects", "select_ucb"]
