"""The critic-bias probes on scripted MODEL critics through the real call path, at more replications than the slow
tests (tests/analysis/test_bias_model_critics.py): the tables of docs/analysis.md's "Validity on model critics".

Per scenario (benchmarks/support/model_critics.py: 12 Creator/Critic runs at one fixed sample, 72 candidates with
the loops' repeats, re-asks within `--budget` calls), per probe: the mean estimate against the planted size, the
coverage of the planted size by the 99% interval, the share of intervals excluding 0, the mean n and the mean
smallest detectable bias (80% power); and the share of replications with "Biased" on some probe (Wilson 95% CI).
Run: .venv/bin/python benchmarks/bias_model_critics.py [--replications 300] [--budget 150]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from model_critics import Planted, Simulation  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from promptlab.analysis.bias_asks import BUDGET  # noqa: E402

SCENARIOS = {
    "unbiased": (Planted(), None),
    "planted": (Planted(per_100=0.6, anchor=0.4, first=0.3), None),
    "saturated (offset 6)": (Planted(per_100=0.6, anchor=0.4, first=0.3, offset=6.0), None),
    "history_chars=150": (Planted(per_100=0.6), 150),
}
"""Scenario -> (planted biases, history_chars)."""


def run(name: str, replications: int, budget: int) -> list[str]:
    planted, history = SCENARIOS[name]
    truth = {"length": planted.per_100, "padding": planted.per_100, "anchoring": planted.anchor}
    truth |= {"order": planted.first, "inflation": 0.0}
    sim = Simulation(planted, history_chars=history, budget=budget)
    stats: dict[str, dict[str, list[float]]] = {
        p: {"est": [], "cov": [], "excl": [], "n": [], "mde": []} for p in truth
    }
    flagged, no_evidence, top = 0, 0, []
    cpu = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(replications):
            table, frames = sim.replicate(r, Path(tmp) / f"r{r}")
            flagged += bool(table["finding"].str.startswith("Biased").any())
            no_evidence += bool(table["finding"].str.startswith("No evidence").any())
            top.append(float((frames["length"]["score"] >= 10).mean()))
            for row in table.itertuples():
                s, lo, hi = stats[str(row.probe)], row.ci_low, row.ci_high
                if lo is None or str(lo) == "<NA>":
                    continue
                s["est"].append(float(row.estimate))
                s["cov"].append(float(lo) <= truth[str(row.probe)] <= float(hi))
                s["excl"].append(float(lo) > 0 or float(hi) < 0)
                s["n"].append(float(row.n))
                s["mde"].append(float(row.detectable))
    cpu = time.process_time() - cpu
    ci = binomtest(flagged, replications).proportion_ci(method="wilson")
    lines = [
        f"### {name}: {replications} replications, {cpu / replications:.2f} s CPU each, "
        f"{sum(top) / len(top):.0%} of logged scores at 10",
        "",
        f'"Biased" on some probe: {flagged / replications:.1%} (Wilson 95% CI {ci.low:.1%}-{ci.high:.1%}); '
        f'"No evidence of bias" on some probe: {no_evidence / replications:.1%}',
        "",
        "| probe | planted | mean estimate | coverage (99.4% CI) | CI excludes 0 | mean n | mean detectable (80% power) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for probe, s in stats.items():
        k = len(s["est"]) or 1
        lines.append(
            f"| {probe} | {truth[probe]:+.2f} | {sum(s['est']) / k:+.3f} | {sum(s['cov']) / k:.1%} | "
            f"{sum(s['excl']) / k:.1%} | {sum(s['n']) / k:.0f} | {sum(s['mde']) / k:.2f} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--scenario", choices=list(SCENARIOS), action="append")
    args = parser.parse_args()
    for name in args.scenario or list(SCENARIOS):
        print("\n".join(run(name, args.replications, args.budget)), flush=True)


if __name__ == "__main__":
    main()
