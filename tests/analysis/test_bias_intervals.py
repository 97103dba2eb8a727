"""The order probe's interval on ternary outcomes (promptlab.analysis.bias_intervals): Tango's score interval keeps
its stated coverage where the t interval it replaced did not, computed exactly (every outcome of n pairs
enumerated, weighted by its multinomial probability) over a grid of true outcome shares; and its statistic at 0 is
McNemar's, read back with statsmodels."""

from __future__ import annotations

import pytest
from scipy.stats import multinomial
from statsmodels.stats.contingency_tables import mcnemar

from promptlab.analysis.bias_intervals import mean_interval, tango_statistic, ternary_interval

SHARES = [
    (0.25, 0.25),
    (0.5, 0.5),
    (0.45, 0.45),
    (0.1, 0.1),
    (0.4, 0.1),
    (0.6, 0.1),
    (0.7, 0.2),
    (0.3, 0.0),
    (0.2, 0.05),
]
"""(share of pairs reading +1, share reading -1): no preference with many or few flips, pair-to-pair preferences
that cancel (0.5 / 0.5), and first-position preferences of 0.1 to 0.5."""
LEVEL = 0.994
"""The level of a bias table's intervals with five probes (1 - 0.03 / 5)."""


def _coverage(interval: object, n: int, plus_share: float, minus_share: float) -> float:
    """The exact probability that the interval from n pairs covers the true preference plus - minus."""
    truth, covered = plus_share - minus_share, 0.0
    for plus in range(n + 1):
        for minus in range(n + 1 - plus):
            values = [1.0] * plus + [-1.0] * minus + [0.0] * (n - plus - minus)
            est = interval(values, "pairs", LEVEL)  # type: ignore[operator]
            low, high = (est.value, est.value) if est.low is None else (est.low, est.high)
            if low - 1e-12 <= truth <= high + 1e-12:
                covered += multinomial.pmf(
                    [plus, minus, n - plus - minus], n, [plus_share, minus_share, 1 - plus_share - minus_share]
                )
    return covered


@pytest.mark.parametrize("n", [10, 30])
def test_the_score_interval_keeps_its_level_on_ternary_outcomes(n: int) -> None:
    coverage = {shares: _coverage(ternary_interval, n, *shares) for shares in SHARES}
    assert min(coverage.values()) >= 0.993, coverage  # 99.4% stated; the worst case within 0.1 point


def test_the_t_interval_it_replaced_missed_its_level() -> None:
    # at 10 pairs with a preference of 0.5 (70% read +1, 20% read -1) the t interval covered 93%, not 99.4%
    assert _coverage(mean_interval, 10, 0.7, 0.2) < 0.95
    assert _coverage(ternary_interval, 10, 0.7, 0.2) >= 0.993


def test_the_score_statistic_at_zero_is_mcnemars() -> None:
    for plus, minus, n in ((7, 2, 30), (12, 3, 20), (0, 5, 9)):
        chi2 = mcnemar([[n - plus - minus, plus], [minus, 0]], exact=False, correction=False).statistic
        assert tango_statistic(plus, minus, n, 0.0) ** 2 == pytest.approx(chi2)


def test_the_score_interval_is_where_the_statistic_reaches_z() -> None:
    from scipy.stats import norm

    est = ternary_interval([1.0] * 9 + [-1.0] * 3 + [0.0] * 18, "pairs", 0.95)
    assert est.value == pytest.approx(0.2) and est.low is not None and est.high is not None
    z = norm.ppf(0.975)
    assert tango_statistic(9, 3, 30, est.low) == pytest.approx(z, abs=1e-6)
    assert tango_statistic(9, 3, 30, est.high) == pytest.approx(-z, abs=1e-6)
    # no pair flips: no variation, yet an interval of some width (every pair could have read otherwise)
    flat = ternary_interval([0.0] * 30, "pairs", LEVEL)
    assert flat.low is not None and flat.high is not None and flat.low < 0 < flat.high
    ends = ternary_interval([1.0] * 12, "pairs", LEVEL)
    assert ends.high == 1.0 and ends.low is not None and 0 < ends.low < 1
