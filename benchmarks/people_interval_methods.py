"""Why promptlab.people's intervals are BCa at the expanded level: four interval methods on the same bootstrap draws
of the same simulated sessions, their coverage of planted kappas, and the one-sided 5% bound the verdict reads.

    PYTHONPATH=. .venv/bin/python benchmarks/people_interval_methods.py [--reps 1000] [--boot 1000] [--items 60]

Each replication draws a session (`promptlab.people.simulated`, as benchmarks/people_agreement.py: 60 items,
3 people, critic accuracy 0.80, people 0.85, 10% pick A) and its per-item label tables (`item_units`); then
`scipy.stats.bootstrap` resamples item indices once, with kappa computed on the summed tables for a whole batch of
draws at once (checked against the package's statsmodels kappa on the first session), and gives the percentile and
the BCa interval at the nominal level and at `expanded_level(items, level)` from that one bootstrap distribution.
Part 2 plants a critic at the verdict's margin (kappa = people's - 0.1) and counts how often each method's 90%
lower bound on the difference lies above it: the verdict's false "as often as people" rate (target <= 5%).
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
from scipy.stats import bootstrap
from statsmodels.stats.proportion import proportion_confint

from promptlab.eval.stats import expanded_level
from promptlab.people.agreement import item_units
from promptlab.people.judged import judged_frame
from promptlab.people.simulated import boundary_accuracy, planted_pairs, simulated_pairs
from promptlab.people.statistics import kappa
from promptlab.people.verdicts import MARGIN

PERSON, POSITION = 0.85, 0.10
METHODS = (("percentile", False), ("BCa", False), ("percentile", True), ("BCa", True))
"""(scipy method, at the expanded level)."""


def batch_kappa(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each summed 3 x 3 table (..., 3, 3)."""
    n = tables.sum(axis=(-1, -2))
    observed = np.trace(tables, axis1=-2, axis2=-1) / n
    chance = (tables.sum(-1) * tables.sum(-2)).sum(-1) / n**2
    return (observed - chance) / (1 - chance)


def session(accuracy: float, items: int, seed: int) -> dict[str, np.ndarray]:
    plan, judgments = simulated_pairs(items, 3, accuracy, PERSON, position=POSITION, seed=seed)
    units = item_units(judged_frame(plan, judgments), "pair")
    tables = {pick: np.array([u.tables[pick] for u in units]) for pick in ("critic", "people")}
    if seed in (0, 10_000):  # the batch kappa is the package's (statsmodels) kappa
        assert np.isclose(batch_kappa(tables["critic"].sum(0)), kappa(list(tables["critic"])) or np.nan)
    return tables


def intervals(tables: dict[str, np.ndarray], name: str, level: float, boot: int, seed: int) -> list[tuple]:
    """Each method's (low, high) for 'critic', 'people' or 'difference' on one bootstrap distribution."""

    def stat(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(idx, dtype=int)
        of = {pick: batch_kappa(t[idx].sum(axis=-3)) for pick, t in tables.items()}
        return of["critic"] - of["people"] if name == "difference" else of[name]

    n = len(tables["critic"])
    data = (np.arange(n),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = bootstrap(data, stat, n_resamples=boot, rng=np.random.default_rng(seed), method="percentile")
        found = []
        for method, wide in METHODS:
            at = expanded_level(n, level) if wide else level
            ci = bootstrap(data, stat, n_resamples=0, bootstrap_result=first, method=method, confidence_level=at)
            found.append((ci.confidence_interval.low, ci.confidence_interval.high))
    return found


def label(method: str, wide: bool) -> str:
    return f"{method}{' expanded' if wide else ''}"


def share(k: int, n: int) -> str:
    low, high = proportion_confint(k, n, method="wilson")
    return f"{k / n:6.1%} ({low:.1%}-{high:.1%})"


def coverage(reps: int, boot: int, items: int) -> None:
    truth = planted_pairs(0.80, PERSON, POSITION)
    planted = {"critic": truth.critic_kappa, "people": truth.people_kappa}
    planted["difference"] = planted["critic"] - planted["people"]
    hits = {name: np.zeros(len(METHODS), dtype=int) for name in planted}
    for rep in range(reps):
        tables = session(0.80, items, rep)
        for name, value in planted.items():
            found = intervals(tables, name, 0.95, boot, rep)
            hits[name] += [low <= value <= high for low, high in found]
    print(f"1. 95% intervals covering the planted kappa ({reps} sessions, {items} items, Wilson 95% in brackets)")
    for name in planted:
        each = zip(METHODS, hits[name], strict=True)
        print(f"  {name:<11}" + "  ".join(f"{label(*m)}: {share(h, reps)}" for m, h in each))


def edge(reps: int, boot: int, items: int) -> None:
    accuracy = boundary_accuracy(PERSON, POSITION, MARGIN)
    truth = planted_pairs(accuracy, PERSON, POSITION)
    above = np.zeros(len(METHODS), dtype=int)
    for rep in range(reps):
        found = intervals(session(accuracy, items, 10_000 + rep), "difference", 0.90, boot, rep)
        above += [low > -MARGIN for low, _ in found]
    print(f"2. at the margin's edge (difference {truth.critic_kappa - truth.people_kappa:+.3f}), the 90% lower bound")
    print("   above it, i.e. a false 'as often as people' (target <= 5%):")
    print("  " + "  ".join(f"{label(*m)}: {share(k, reps)}" for m, k in zip(METHODS, above, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--items", type=int, default=60)
    args = parser.parse_args()
    print("(load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ")", flush=True)
    coverage(args.reps, args.boot, args.items)
    edge(args.reps, args.boot, args.items)
    print("(load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ")", flush=True)


if __name__ == "__main__":
    main()
