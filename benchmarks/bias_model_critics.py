"""The critic-bias probes on scripted MODEL critics through the real call path, at more replications than the slow
tests (tests/analysis/test_bias_model_critics.py): the tables of docs/analysis.md's "Validity on model critics".

Per scenario (benchmarks/support/model_critics.py: Creator/Critic runs at one fixed sample, 3 tasks x 4 styles
giving 72 candidates with the loops' repeats, 9 tasks for the large budget; re-asks within the scenario's budget),
per probe: the mean estimate against the planted size and the coverage of the planted size by the interval (where
the row has one), the share of rows "Biased" (with no bias planted: false ones, to set against each probe's share
of the 5%, SHARE), "No evidence" and "Not enough data", the mean n and smallest detectable bias (80% power),
"Biased" rows that say "underpowered" (there should be none) and rows that say the estimate "likely understates";
and the share of replications "Biased" on some probe, and on length or padding (Wilson 95% CIs).
Run: PYTHONPATH=.:benchmarks/support .venv/bin/python benchmarks/bias_model_critics.py [--replications N] [--budget B]
[--scenario NAME] [--first K]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pandas as pd  # noqa: E402
from model_critics import Planted, Simulation  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from promptlab.analysis.bias_asks import BUDGET  # noqa: E402

SENTENCES = Planted(sentence_sd=0.2)
"""No bias at all, but each distinct sentence shown shifts the score by a fixed Normal(0, 0.2) draw."""
LARGE = 1000
"""A large budget: on the 9-task sweep, every distinct candidate and pair is re-asked (about 850 calls)."""


@dataclass(frozen=True)
class Scenario:
    planted: Planted
    history_chars: int | None = None
    budget: int | None = None
    """Re-ask calls per critic (None: the --budget given, by default BUDGET)."""
    tasks: int = 3
    replications: int = 100
    """Replications when --replications is not given."""


SCENARIOS = {
    "unbiased, reacting to sentences": Scenario(SENTENCES, replications=400),
    "unbiased, reacting to sentences, large budget": Scenario(SENTENCES, budget=LARGE, tasks=9, replications=200),
    "unbiased, reacting to sentences, few candidates": Scenario(SENTENCES, budget=50, replications=200),
    "unbiased, reacting to its own sentences too": Scenario(Planted(sentence_sd=0.2, own_sentences=True)),
    "planted": Scenario(Planted(per_100=0.6, anchor=0.4, first=0.3)),
    "saturated (offset 6)": Scenario(Planted(per_100=0.6, anchor=0.4, first=0.3, offset=6.0), replications=50),
    "history_chars=150": Scenario(Planted(per_100=0.6), history_chars=150),
}
"""Scenario -> its critic, sweep and budget. The first four have no length preference: a "Biased" there is a false
one (the fourth's reaction to the candidates' own filler sentences, whose number grows with length, is what the
logged length probe cannot tell from length: docs/analysis.md, Limits)."""
SHARE = 0.05 / 5
"""Each probe's share of the family-wise 5%: its false "Biased" rate should be at or under it."""
PROBES = ["length", "padding", "anchoring", "order", "inflation"]


def _rate(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="wilson") if n else None
    return f"{k / n:.1%} ({k}/{n}; Wilson 95% {ci.low:.1%}-{ci.high:.1%})" if ci else "NA"


def run(name: str, replications: int | None, budget: int, first: int = 0) -> list[str]:
    sc = SCENARIOS[name]
    reps, planted = replications or sc.replications, sc.planted
    truth = {"length": planted.per_100, "padding": planted.per_100, "anchoring": planted.anchor}
    truth |= {"order": planted.first, "inflation": 0.0}
    sim = Simulation(planted, history_chars=sc.history_chars, budget=sc.budget or budget, tasks=sc.tasks)
    keys = ("est", "cov", "biased", "none", "nodata", "n", "mde", "underpowered", "understates")
    stats: dict[str, dict[str, list[float]]] = {p: {k: [] for k in keys} for p in PROBES}
    flagged = length_or_padding = 0
    top: list[float] = []
    cpu = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(first, first + reps):
            table, frames = sim.replicate(r, Path(tmp) / f"r{r}")
            biased = table["finding"].str.startswith("Biased")
            flagged += bool(biased.any())
            length_or_padding += bool(biased[table["probe"].isin(["length", "padding"])].any())
            top.append(float((frames["length"]["score"] >= 10).mean()))
            for row in table.itertuples():
                _tally(stats[str(row.probe)], row, truth[str(row.probe)])
    cpu = time.process_time() - cpu
    lines = [
        f"### {name}: {reps} replications (from {first}), budget {sim.budget}, {sc.tasks * 4} runs, {cpu / reps:.2f} s CPU each, "
        f"{sum(top) / len(top):.0%} of logged scores at 10",
        "",
        f'"Biased" on some probe: {_rate(flagged, reps)}; on length or padding: {_rate(length_or_padding, reps)}',
        "",
        '| probe | planted | mean estimate | coverage (99.4% CI) | "Biased" | "No evidence" | "Not enough data" | '
        'mean n | mean detectable (80% power) | "underpowered" on "Biased" rows | "likely understates" |',
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for probe, s in stats.items():
        k, rows = len(s["est"]) or 1, len(s["biased"]) or 1
        lines.append(
            f"| {probe} | {truth[probe]:+.2f} | {sum(s['est']) / k:+.3f} | {sum(s['cov']):.0f}/{k} | "
            f"{sum(s['biased']):.0f} ({sum(s['biased']) / rows:.1%}) | {sum(s['none']) / rows:.1%} | {sum(s['nodata']) / rows:.1%} | "
            f"{sum(s['n']) / rows:.0f} | {sum(s['mde']) / k:.3f} | {sum(s['underpowered']):.0f} | "
            f"{sum(s['understates']) / rows:.0%} |"
        )
    return [*lines, ""]


def _tally(s: dict[str, list[float]], row: Any, truth: float) -> None:
    """One bias-table row into its probe's tallies (the interval's only where it has one)."""
    finding = str(row.finding)
    s["biased"].append(finding.startswith("Biased"))
    s["none"].append(finding.startswith("No evidence"))
    s["nodata"].append(finding.startswith("Not enough data"))
    s["underpowered"].append(finding.startswith("Biased") and "underpowered" in finding)
    s["understates"].append("likely understates" in finding)
    s["n"].append(float(row.n))
    if not pd.isna(row.ci_low):
        s["est"].append(float(row.estimate))
        s["cov"].append(float(row.ci_low) <= truth <= float(row.ci_high))
        s["mde"].append(float(row.detectable))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, help="per scenario (default: each scenario's own)")
    parser.add_argument("--budget", type=int, default=BUDGET, help="of the scenarios without a budget of their own")
    parser.add_argument("--scenario", choices=list(SCENARIOS), action="append")
    parser.add_argument("--first", type=int, default=0, help="the first replication's index (to run one in parts)")
    args = parser.parse_args()
    for name in args.scenario or list(SCENARIOS):
        print("\n".join(run(name, args.replications, args.budget, args.first)), flush=True)


if __name__ == "__main__":
    main()
