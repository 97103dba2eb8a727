"""The intervals every table, chart and report of promptlab uses, built on scipy (no hand-rolled resampling).

Every seeded resampling draws from the values in one canonical order (`canonical_order`), so an interval is a
function of the values alone: the same runs give the same interval in whatever order they finished.

More in docs/analysis.md, section "promptlab.eval.stats".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

BOOTSTRAP_RESAMPLES = 2000
"""Bootstrap resamples for every interval (fixed, with SEED, so intervals are reproducible)."""
SEED = 0
"""Seed of every bootstrap."""


def present(values: Sequence[float | None]) -> list[float]:
    """The values that are not None or NaN."""
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def canonical_order(*columns: Iterable[Any]) -> list[int]:
    """The positions of equal-length columns sorted by their values: by the first column, ties by the next, a
    missing value (None, NaN) after every number.

    A seeded bootstrap or permutation test draws positions; drawing them from the values in this order makes its
    result a function of the values alone (of the pairs, for paired columns), whatever order they came in.

    Raises:
        ValueError: the columns differ in length.
    """
    import numpy as np

    arrays = [np.asarray([np.nan if v is None else v for v in c], dtype=float).reshape(-1) for c in columns]
    if len({a.size for a in arrays}) > 1:
        raise ValueError(f"columns to order differ in length: {[a.size for a in arrays]}")
    if not arrays:
        return []
    return [int(i) for i in np.lexsort(arrays[::-1])]  # lexsort's last key is its primary one; NaN sorts last


def exact_mean(xs: Sequence[float]) -> float:
    """The mean of `xs`, the same float for the values in any order: their exactly rounded sum (`math.fsum`) over
    their number, or the value itself when they are all equal.

    Raises:
        ValueError: `xs` is empty.
    """
    if not xs:
        raise ValueError("the mean of no values")
    first = float(xs[0])
    return first if all(float(x) == first for x in xs) else math.fsum(xs) / len(xs)


def mean_ci(
    values: Sequence[float | None], confidence: float = 0.95
) -> tuple[float | None, int, float | None, float | None]:
    """(mean, n, ci_low, ci_high) of the present values; (None, 0, None, None) when none is present.

    Wilson score interval for 0/1 values; the bootstrap interval of the mean otherwise (a single value, or
    values that are all equal, give a zero-width interval at the mean).
    """
    xs = present(values)
    n = len(xs)
    if n == 0:
        return None, 0, None, None
    mean = exact_mean(xs)
    if all(x in (0.0, 1.0) for x in xs):
        from scipy.stats import binomtest

        ci = binomtest(int(sum(xs)), n).proportion_ci(confidence_level=confidence, method="wilson")
        return mean, n, float(ci.low), float(ci.high)
    low, high = bootstrap_ci(xs, confidence)
    return mean, n, low, high


def expanded_level(n: int, confidence: float = 0.95) -> float:
    """The nominal level at which the percentile bootstrap of a mean of n values is computed so that its
    interval covers about `confidence` (Hesterberg's expanded percentile interval; see the module docstring).
    It tends to `confidence` as n grows (0.9785 for n = 12, 0.956 for n = 60)."""
    from scipy.stats import norm, t

    if n < 2:
        return confidence
    tail = float(norm.cdf(-math.sqrt(n / (n - 1)) * t.ppf(1 - (1 - confidence) / 2, n - 1)))
    return 1 - 2 * tail


def bootstrap_interval(
    samples: Sequence[Any],
    statistic: Callable[..., Any],
    *,
    paired: bool = False,
    level: float = 0.95,
    vectorized: bool = True,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    batch: int | None = None,
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of `statistic` over `samples`: promptlab's one bootstrap.

    `scipy.stats.bootstrap` draws the resamples (with SEED; `paired` resamples the samples' positions
    together) from the samples in `canonical_order` (each sorted; paired samples sorted as pairs), so the
    interval depends on the values, not on the order they are given in. A resample whose statistic is undefined (NaN, e.g. a correlation of a resample with a constant
    side) is left out, not counted as any value.

    Args:
        samples: The data, one 1-D array per sample (equal lengths when `paired`).
        statistic: Of the samples (and `axis` when `vectorized`), as `scipy.stats.bootstrap` takes it.
        paired: Resample positions jointly across the samples.
        level: Nominal level of the percentile interval (see `expanded_level` for a mean).
        vectorized: Whether `statistic` takes an `axis` argument.
        n_resamples: Resamples (default BOOTSTRAP_RESAMPLES).
        batch: Resamples computed at once (bounds memory for a statistic that builds n x n arrays).

    Returns:
        (low, high), or None when no resample has a defined statistic.

    Raises:
        ValueError: a sample is not one-dimensional, or paired samples differ in length.
    """
    import warnings

    import numpy as np
    from scipy.stats import bootstrap

    data = canonical_samples(samples, paired=paired)
    with warnings.catch_warnings():  # a degenerate resample distribution is handled below, not warned about
        warnings.simplefilter("ignore")
        res = bootstrap(
            data,
            statistic,
            paired=paired,
            vectorized=vectorized,
            n_resamples=n_resamples,
            batch=batch,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(SEED),
        )
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    dist = dist[~np.isnan(dist)]
    if dist.size == 0:
        return None
    low, high = np.percentile(dist, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(low), float(high)


def canonical_samples(samples: Sequence[Any], *, paired: bool = False) -> tuple[Any, ...]:
    """The samples as float arrays in `canonical_order`: each sorted, or, when `paired`, sorted together as pairs.

    Raises:
        ValueError: a sample is not one-dimensional, or paired samples differ in length.
    """
    import numpy as np

    data = tuple(np.asarray(s, dtype=float) for s in samples)
    flat = [d.ndim for d in data if d.ndim != 1]
    if flat:
        raise ValueError(f"each sample must be one-dimensional (one value per observation), got {flat[0]} dimensions")
    if paired:
        order = canonical_order(*data)
        return tuple(d[order] for d in data)
    return tuple(d[canonical_order(d)] for d in data)


def _mean(x: Any, axis: int = -1) -> Any:
    import numpy as np

    return np.mean(x, axis=axis)


def bootstrap_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The bootstrap interval of the mean of `xs` (the expanded percentile interval, fixed seed); zero width
    at the mean when there are fewer than two values or they do not vary.

    Raises:
        ValueError: `xs` is empty or holds a missing value (drop them with `present` first).
    """
    import numpy as np

    arr = np.asarray(xs, dtype=float)
    if arr.size == 0 or np.isnan(arr).any():
        raise ValueError("bootstrap_ci needs at least one value and no missing ones (use present())")
    if arr.size < 2 or float(arr.max()) == float(arr.min()):
        m = exact_mean(arr.tolist())
        return m, m
    interval = bootstrap_interval((arr,), _mean, level=expanded_level(arr.size, confidence))
    assert interval is not None  # a mean is always defined
    return interval


def paired_delta_ci(
    before: Sequence[float | None], after: Sequence[float | None], confidence: float = 0.95
) -> tuple[float | None, int, float | None, float | None]:
    """(mean of after - before, n pairs, ci_low, ci_high) over positions where both are present.

    Raises:
        ValueError: the sequences differ in length (they must be the same examples, in the same order).
    """
    if len(before) != len(after):
        raise ValueError(f"paired scores differ in length: {len(before)} vs {len(after)}")
    diffs = [
        float(b) - float(a)
        for a, b in zip(before, after, strict=True)
        if a is not None and b is not None and present([a]) and present([b])
    ]
    if not diffs:
        return None, 0, None, None
    low, high = bootstrap_ci(diffs, confidence)
    return exact_mean(diffs), len(diffs), low, high


__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "SEED",
    "bootstrap_ci",
    "bootstrap_interval",
    "canonical_order",
    "canonical_samples",
    "exact_mean",
    "expanded_level",
    "mean_ci",
    "paired_delta_ci",
    "present",
]
