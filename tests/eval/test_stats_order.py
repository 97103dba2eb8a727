"""Every interval and test of `promptlab.eval.stats` (and the sign-flip test and agreement interval built on it) is a
function of the values alone: the same values in another order give the same numbers, to the last bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlab.analysis.consistency import agreement
from promptlab.analysis.critic import correlations
from promptlab.analysis.paired import sign_flip_p
from promptlab.eval.stats import (
    bootstrap_ci,
    bootstrap_interval,
    canonical_order,
    exact_mean,
    mean_ci,
    paired_delta_ci,
)

ACCURACIES = [round(float(v), 4) for v in np.random.default_rng(7).integers(3, 9, size=21) / 20 + 0.0125]
"""21 run-level accuracies that are not 0/1 (a bootstrap interval, as the demo's cap-0 row), with ties."""


def orders(n: int, k: int = 6) -> list[list[int]]:
    """The identity, the reverse and k - 2 seeded shuffles of range(n)."""
    rng = np.random.default_rng(3)
    return [list(range(n)), list(range(n))[::-1], *(rng.permutation(n).tolist() for _ in range(k - 2))]


def test_mean_ci_is_the_same_for_the_values_in_any_order() -> None:
    expected = mean_ci(ACCURACIES)
    assert expected[2] is not None and expected[2] < expected[0] < expected[3]  # type: ignore[operator]
    for order in orders(len(ACCURACIES)):
        values = [ACCURACIES[i] for i in order]
        assert mean_ci(values) == expected
        assert bootstrap_ci(values) == bootstrap_ci(ACCURACIES)
        assert mean_ci([None, *values, float("nan")]) == expected  # missing values change nothing


def test_a_paired_bootstrap_resamples_pairs_whatever_their_order() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(1, 10, size=30).astype(float)
    y = np.round(x / 10 + rng.normal(0, 0.2, size=30), 2)
    expected = correlations(x, y)
    before, after = list(y), list(y + rng.normal(0.05, 0.1, size=30))
    delta = paired_delta_ci(before, after)
    for order in orders(30):
        assert correlations(x[order], y[order]) == expected
        assert paired_delta_ci([before[i] for i in order], [after[i] for i in order]) == delta
    # the pairs stay pairs: sorting each side alone would give another (a perfect) correlation
    assert expected[0] is not None and expected[0] < 0.99


def test_sign_flip_p_is_the_same_for_the_differences_in_any_order() -> None:
    diffs = [round(float(v), 3) for v in np.random.default_rng(5).normal(0.05, 0.2, size=24)]  # 2^24: sampled
    expected = sign_flip_p(diffs)
    assert expected is not None and 0 < expected < 1
    assert all(sign_flip_p([diffs[i] for i in order]) == expected for order in orders(len(diffs)))


def test_agreement_is_the_same_for_items_in_any_order_and_under_any_run_ids() -> None:
    rng = np.random.default_rng(2)
    truth = rng.integers(2, 9, size=25)
    rows = [
        {"run_id": f"r{i:02d}", "iteration": 1, "criterion": "c", "judge": "critic", "sample": s, "score": float(v)}
        for i, t in enumerate(truth)
        for s, v in enumerate([t, np.clip(t + rng.integers(-2, 3), 1, 10), np.clip(t + rng.integers(-2, 3), 1, 10)])
    ]
    scores = pd.DataFrame(rows)
    expected = agreement(scores)
    assert expected.loc[0, "alpha_ci_low"] < expected.loc[0, "alpha"] < expected.loc[0, "alpha_ci_high"]
    renamed = scores.assign(run_id=scores["run_id"].map({f"r{i:02d}": f"x{(i * 7) % 25:02d}" for i in range(25)}))
    for order in orders(len(scores), 4):
        pd.testing.assert_frame_equal(agreement(renamed.iloc[order].reset_index(drop=True)), expected)


def test_canonical_order_sorts_by_each_column_in_turn_with_missing_values_last() -> None:
    assert canonical_order([2.0, 1.0, None, 1.0], [0.0, 5.0, 1.0, 4.0]) == [3, 1, 0, 2]
    assert canonical_order() == []
    with pytest.raises(ValueError, match="differ in length"):
        canonical_order([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="one-dimensional"):
        bootstrap_interval((np.ones((3, 2)),), np.mean)


def test_exact_mean_is_the_same_float_in_any_order() -> None:
    values = [0.1, 0.2, 0.3, 0.7, 0.45]
    assert {exact_mean([values[i] for i in order]) for order in orders(5, 20)} == {exact_mean(values)}
    assert sum([0.1, 0.2, 0.3]) != sum([0.3, 0.2, 0.1])  # a plain sum's last bit depends on the order
    assert exact_mean([0.1, 0.2, 0.3]) == exact_mean([0.3, 0.2, 0.1]) == exact_mean([0.2, 0.1, 0.3])
    assert exact_mean([0.1] * 3) == 0.1  # equal values: the value itself
