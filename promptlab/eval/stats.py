"""Confidence intervals for grounded scores, from scipy (a well-kept library, so no hand-rolled statistics).

- `mean_ci(values)`: the mean of per-example scores in [0, 1] with a 95% CI: Wilson's interval when every
  value is 0 or 1 (a proportion; it behaves at 0/n and n/n, unlike the normal approximation), else a
  percentile bootstrap with a fixed seed (so a replay gives the same interval).
- `paired_delta_ci(a, b)`: the mean of b - a over the pairs where both are present, with a paired bootstrap CI.

Missing values (None or NaN) are dropped, never counted as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BOOTSTRAP_RESAMPLES = 2000
"""Bootstrap resamples for every interval (fixed, with SEED, so intervals are reproducible)."""
SEED = 0


def present(values: Sequence[float | None]) -> list[float]:
    """The values that are not None or NaN."""
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def mean_ci(values: Sequence[float | None], confidence: float = 0.95) -> tuple[float | None, int, float | None,
                                                                                 float | None]:
    """(mean, n, ci_low, ci_high) of the present values; (None, 0, None, None) when none is present.

    Wilson score interval for 0/1 values; percentile bootstrap otherwise (a single value, or values that are
    all equal, give a zero-width interval at the mean).
    """
    xs = present(values)
    n = len(xs)
    if n == 0:
        return None, 0, None, None
    mean = sum(xs) / n
    if all(x in (0.0, 1.0) for x in xs):
        from scipy.stats import binomtest

        ci = binomtest(int(sum(xs)), n).proportion_ci(confidence_level=confidence, method="wilson")
        return mean, n, float(ci.low), float(ci.high)
    low, high = bootstrap_ci(xs, confidence)
    return mean, n, low, high


def bootstrap_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of `xs` (fixed seed); zero width when the values do not vary."""
    import numpy as np
    from scipy.stats import bootstrap

    arr = np.asarray(xs, dtype=float)
    if arr.size < 2 or float(arr.max()) == float(arr.min()):
        m = float(arr.mean())
        return m, m
    res = bootstrap((arr,), np.mean, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                    method="percentile", random_state=np.random.default_rng(SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_delta_ci(before: Sequence[float | None], after: Sequence[float | None],
                    confidence: float = 0.95) -> tuple[float | None, int, float | None, float | None]:
    """(mean of after - before, n pairs, ci_low, ci_high) over positions where both are present.

    Raises:
        ValueError: the sequences differ in length (they must be the same examples, in the same order).
    """
    if len(before) != len(after):
        raise ValueError(f"paired scores differ in length: {len(before)} vs {len(after)}")
    diffs = [float(b) - float(a) for a, b in zip(before, after, strict=True)
             if a is not None and b is not None and present([a]) and present([b])]
    if not diffs:
        return None, 0, None, None
    low, high = bootstrap_ci(diffs, confidence)
    return sum(diffs) / len(diffs), len(diffs), low, high


__all__ = ["BOOTSTRAP_RESAMPLES", "SEED", "bootstrap_ci", "mean_ci", "paired_delta_ci", "present"]
