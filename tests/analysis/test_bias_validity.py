"""Validity of the bias probes (promptlab.analysis.bias) on simulated critics with a planted bias (sim/biased).

Each probe is run over many simulated data sets, each scored by `SimCritic` itself (the instrument the report's
simulated critics use): with a bias planted, its 95% CI must cover the planted size in 93-97% of them; with
none planted, it must report a bias (CI excluding 0) at about the nominal 5% (2-8%). And `bias_table`, which
reads all five probes of a critic at once, calls a critic with no bias "biased" on any probe at most at the
nominal 5% (its intervals are simultaneous), where five separate 95% intervals would about one time in four.
Seeds fix every draw.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlab.analysis.bias import (
    anchoring_bias,
    bias_table,
    inflation,
    length_bias,
    order_bias,
    padding_bias,
)
from promptlab.critics.simulated import parse_sim

DATASETS = 400
"""Simulated data sets per check (coverage's standard error: about 1.1 points)."""
PAD = " Please answer carefully."
"""A neutral pad for the padding probe's data (the pad bank's first entry in spirit)."""


def _prompt(rng: np.random.Generator, i: int) -> str:
    """A candidate prompt of random length (about 70 to 400 characters)."""
    return f"Candidate {i}: " + "Solve the task step by step. " * int(rng.integers(2, 14))


def _logged(critic: str, seed: int, runs: int = 12, steps: int = 6) -> pd.DataFrame:
    """A logged sweep: `runs` runs of `steps` iterations whose dev accuracy wanders on a 20-example grid."""
    sim, rng = parse_sim(critic), np.random.default_rng(seed)
    rows = []
    for r in range(runs):
        acc = int(rng.integers(4, 10))
        for t in range(steps):
            acc = int(np.clip(acc + rng.integers(-2, 3), 2, 12))
            text = _prompt(rng, seed * 1000 + r * 10 + t)
            score = sim.score(acc / 20, text, sample=seed, criterion="c", iteration=t)
            rows.append({"run_id": f"r{r}", "iteration": t, "score": score, "accuracy": acc / 20, "chars": len(text)})
    return pd.DataFrame(rows)


def _padded(critic: str, seed: int, n: int = 40) -> pd.DataFrame:
    sim, rng = parse_sim(critic), np.random.default_rng(seed)
    rows = []
    for i in range(n):
        acc, text = int(rng.integers(2, 13)) / 20, f"candidate {seed}-{i}"
        pad = PAD * int(rng.integers(4, 12))
        plain = sim.score(acc, text, sample=seed, criterion="c")
        padded = sim.score(acc, text + pad, sample=seed, criterion="c")
        rows.append({"plain": plain, "padded": padded, "added_chars": len(pad)})
    return pd.DataFrame(rows)


def _pairs(critic: str, seed: int, n: int = 60) -> pd.DataFrame:
    sim, rng = parse_sim(critic), np.random.default_rng(seed)
    rows = []
    for i in range(n):
        a = (int(rng.integers(2, 13)) / 20, f"A{seed}-{i}")
        b = (int(rng.integers(2, 13)) / 20, f"B{seed}-{i}")
        for swapped, (x, y) in enumerate(((a, b), (b, a))):
            rows.append({"pair": i, "swapped": swapped, "first_won": sim.prefer(x, y, sample=seed, criterion="c") == 0})
    return pd.DataFrame(rows)


def _anchored(critic: str, seed: int, n: int = 40) -> pd.DataFrame:
    sim, rng = parse_sim(critic), np.random.default_rng(seed)
    rows = []
    for i in range(n):
        acc, text, anchor = int(rng.integers(2, 13)) / 20, f"candidate {seed}-{i}", float(rng.integers(2, 10))
        plain = sim.score(acc, text, sample=2 * seed, criterion="c")
        anchored = sim.score(acc, text, sample=2 * seed + 1, criterion="c", anchor=anchor)
        rows.append({"plain": plain, "anchored": anchored, "anchor": anchor})
    return pd.DataFrame(rows)


CASES = {
    "length": (length_bias, _logged, "per_100", 0.4),
    "inflation": (inflation, _logged, "inflation", 0.3),
    "padding": (padding_bias, _padded, "per_100", 0.5),
    "order": (order_bias, _pairs, "first", 0.3),
    "anchoring": (anchoring_bias, _anchored, "anchor", 0.4),
}
"""Probe -> (estimator, data set maker, sim/biased parameter it measures, the planted size)."""


def _run(probe: str, planted: float) -> tuple[float, float]:
    """(coverage of the planted size, share of data sets whose CI excludes 0) over DATASETS data sets."""
    estimator, make, param, _ = CASES[probe]
    critic = f"sim/biased?{param}={planted}&sd=0.7&seed=3"
    covered = excludes = 0
    for seed in range(DATASETS):
        est = estimator(make(critic, seed))
        assert est.low is not None and est.high is not None, est.why
        covered += est.low <= planted <= est.high
        excludes += est.low > 0 or est.high < 0
    return covered / DATASETS, excludes / DATASETS


@pytest.mark.slow
@pytest.mark.parametrize("probe", list(CASES))
def test_probe_recovers_the_planted_bias(probe: str) -> None:
    coverage, _ = _run(probe, CASES[probe][3])
    assert 0.93 <= coverage <= 0.97, f"{probe}: 95% CI covered the planted size in {coverage:.1%} of data sets"


@pytest.mark.slow
@pytest.mark.parametrize("probe", list(CASES))
def test_probe_reports_no_bias_at_the_nominal_rate(probe: str) -> None:
    _, false_bias = _run(probe, 0.0)
    assert 0.02 <= false_bias <= 0.08, f"{probe}: a bias reported in {false_bias:.1%} of unbiased data sets"


FAMILY_CRITICS = ["sim/biased?sd=0.7&seed=3", "sim/noisy?sd=2&seed=0"]
"""Critics with no bias planted: sim/biased with every bias 0, and the demo's noisy critic."""


@pytest.mark.slow
@pytest.mark.parametrize("critic", FAMILY_CRITICS)
def test_bias_table_calls_an_unbiased_critic_biased_at_most_at_the_nominal_rate(critic: str) -> None:
    flagged = 0
    for seed in range(DATASETS):
        logged = _logged(critic, seed)
        frames = {
            "length": logged,
            "inflation": logged,
            "padding": _padded(critic, seed),
            "order": _pairs(critic, seed),
            "anchoring": _anchored(critic, seed),
        }
        table = bias_table({probe: f.assign(critic_model=critic) for probe, f in frames.items()})
        assert len(table) == 5 and table["ci_low"].notna().all(), table
        flagged += bool(table["finding"].str.startswith("Biased").any())
    rate = flagged / DATASETS
    assert 0.01 <= rate <= 0.07, f"{critic}: called biased on some probe in {rate:.1%} of unbiased data sets"
