"""Simulated people with planted agreement: do the statistics of promptlab.people recover it, and do their 95%
intervals cover it 93-97% of the time? How often does the verdict say "as often as people" when it is false?

    PYTHONPATH=. .venv/bin/python benchmarks/people_agreement.py [--reps 400] [--boot 1000] [--items 60] \
        [--parts pairs,ratings,verdict]

Each replication draws a fresh judging session (`promptlab.people.simulated`) and measures it with the package's
own functions (`judged_frame`, `critic_agreement`, `position_table`, `verdict`), as a report would. Printed per
measure: the planted value, the mean estimate (its bias) and the share of intervals covering the planted value, with
its Wilson interval (statsmodels). The intervals are the package's (BCa at the level expanded for the items,
`promptlab.people.statistics`). At 400 replications one standard error of a 95% coverage is 1.1 points.

1. Pairs: 60 items, 3 people, critic accuracy 0.80, person accuracy 0.85, a planted preference for the text shown
   first (10% of judgments pick A whatever it says): Cohen's kappa critic-people and people-people, their
   difference, the share choosing A.
2. Ratings: 60 items, 3 people, critic noise sd 0.7, people's 0.5: Krippendorff's alpha (ordinal), its difference
   (what the verdict reads on ratings) and Spearman.
3. The verdict's false "as often as people" rate: a critic planted exactly at the margin's edge (kappa = people's
   kappa - 0.1), where "as often" is false; a one-sided 5% test should say it in at most about 5% of sessions.

`--parts` runs some of the three (e.g. in separate processes) and `--first` starts at another seed (more
replications in parts); each part prints the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from promptlab.people.agreement import critic_agreement
from promptlab.people.judged import judged_frame
from promptlab.people.simulated import (
    boundary_accuracy,
    planted_pairs,
    planted_ratings,
    simulated_pairs,
    simulated_ratings,
)
from promptlab.people.verdicts import AS_OFTEN, MARGIN, position_table, verdict

CRITIC, PERSON, POSITION = 0.80, 0.85, 0.10
CRITIC_SD, PERSON_SD = 0.7, 0.5


def covered(est: object, truth: float) -> tuple[float, bool]:
    value, low, high = est.value, est.low, est.high  # type: ignore[attr-defined]
    return float(value), low is not None and high is not None and low <= truth <= high


def wilson(k: int, n: int) -> str:
    low, high = proportion_confint(k, n, method="wilson")
    return f"{k / n:.1%} of {n} (Wilson {low:.1%}-{high:.1%})"


def line(name: str, truth: float, found: list[tuple[float, bool]]) -> str:
    values = np.array([v for v, _ in found])
    cover = sum(c for _, c in found)
    return (
        f"  {name:<28} planted {truth:+.3f}  mean estimate {values.mean():+.3f} (bias {values.mean() - truth:+.3f})"
        f"  coverage {wilson(cover, len(found))}"
    )


def pairs(seeds: range, boot: int, items: int) -> None:
    truth = planted_pairs(CRITIC, PERSON, POSITION)
    rows: dict[str, list[tuple[float, bool]]] = {"critic": [], "people": [], "difference": [], "share_a": []}
    for rep in seeds:
        plan, judgments = simulated_pairs(items, 3, CRITIC, PERSON, position=POSITION, seed=rep)
        frame = judged_frame(plan, judgments)
        ca = critic_agreement("sim-critic", frame, "pair", n_boot=boot, seed=rep)
        rows["critic"].append(covered(ca.measures["critic vs people", "corrected"], truth.critic_kappa))
        rows["people"].append(covered(ca.measures["people vs people", "corrected"], truth.people_kappa))
        rows["difference"].append(covered(ca.difference, truth.critic_kappa - truth.people_kappa))
        pos = position_table(frame, n_boot=boot, seed=rep).iloc[0]
        rows["share_a"].append((float(pos["share_a"]), bool(pos["low"] <= truth.share_a <= pos["high"])))
    print(f"1. pairs: {items} items x 3 people, critic accuracy {CRITIC}, people {PERSON}, position {POSITION}")
    print(line("kappa critic vs people", truth.critic_kappa, rows["critic"]))
    print(line("kappa people vs people", truth.people_kappa, rows["people"]))
    print(line("kappa difference", truth.critic_kappa - truth.people_kappa, rows["difference"]))
    print(line("share choosing A", truth.share_a, rows["share_a"]))


def ratings(seeds: range, boot: int, items: int) -> None:
    truth = planted_ratings(CRITIC_SD, PERSON_SD)
    truth["alpha_difference"] = truth["critic_alpha"] - truth["people_alpha"]
    names = {
        ("critic vs people", "corrected"): "critic_alpha",
        ("people vs people", "corrected"): "people_alpha",
        ("difference", ""): "alpha_difference",
        ("critic vs people", "agreement"): "critic_rho",
        ("people vs people", "agreement"): "people_rho",
    }
    rows: dict[str, list[tuple[float, bool]]] = {n: [] for n in names.values()}
    for rep in seeds:
        plan, judgments = simulated_ratings(items, 3, CRITIC_SD, PERSON_SD, seed=rep)
        ca = critic_agreement("sim-critic", judged_frame(plan, judgments), "rating", n_boot=boot, seed=rep)
        for key, name in names.items():
            est = ca.difference if key[0] == "difference" else ca.measures[key]
            rows[name].append(covered(est, truth[name]))
    print(f"2. ratings: {items} items x 3 people, critic noise sd {CRITIC_SD}, people's {PERSON_SD}")
    for name in names.values():
        print(line(name.replace("_", " "), truth[name], rows[name]))


def false_as_often(seeds: range, boot: int, items: int) -> None:
    reps = len(seeds)
    accuracy = boundary_accuracy(PERSON, POSITION, MARGIN)
    truth = planted_pairs(accuracy, PERSON, POSITION)
    said: dict[str, int] = {}
    for rep in seeds:
        plan, judgments = simulated_pairs(items, 3, accuracy, PERSON, position=POSITION, seed=10_000 + rep)
        ca = critic_agreement("sim-critic", judged_frame(plan, judgments), "pair", n_boot=boot, seed=rep)
        found = verdict(ca).verdict
        said[found] = said.get(found, 0) + 1
    print(
        f"3. verdict at the margin's edge (critic kappa {truth.critic_kappa:.3f} = people's "
        f"{truth.people_kappa:.3f} - {MARGIN}, critic accuracy {accuracy:.3f}):"
    )
    print(f"  said '{AS_OFTEN}' in {wilson(said.get(AS_OFTEN, 0), reps)} (target <= 5%)")
    print("  all verdicts: " + ", ".join(f"'{v}' {k}" for v, k in sorted(said.items())))


PARTS = {"pairs": pairs, "ratings": ratings, "verdict": false_as_often}


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--first", type=int, default=0, help="seed of the first replication (to run more in parts)")
    parser.add_argument("--parts", default=",".join(PARTS), help="some of " + ",".join(PARTS))
    args = parser.parse_args()
    for part in args.parts.split(","):
        start = time.perf_counter()
        print(f"({part}: {load()})", flush=True)
        PARTS[part](range(args.first, args.first + args.reps), args.boot, args.items)
        took = time.perf_counter() - start
        seeds = f"seeds {args.first}-{args.first + args.reps - 1}"
        print(f"({args.reps} replications ({seeds}), {args.boot} bootstrap draws, {took:.0f} s; {load()})", flush=True)


if __name__ == "__main__":
    main()
