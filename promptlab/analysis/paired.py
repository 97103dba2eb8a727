"""Paired comparisons of configurations: the test-split gain per configuration (`delta_table`) and paired
differences between configurations over the same tasks x samples (`compare`), with Holm-corrected p-values.

P-values come from a paired sign-flip permutation test on the mean difference (scipy's `permutation_test`,
exact when 2^n <= its resample count): it tests the statistic reported (the mean), assumes no distribution,
and copes with the ties and zeros that accuracies on a few dozen examples produce, where Wilcoxon's
signed-rank test drops zeros and tests a different (rank) statistic. Holm's correction is `holm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..eval.stats import SEED, bootstrap_ci, canonical_samples, exact_mean
from ..results.configs import config_groups
from ..results.order import canonical_rows

ALPHA = 0.05
"""The family-wise error rate a reported claim is held to: its Holm-corrected p must be below it."""

Standing = Literal["no_ci", "spans", "not_after_holm", "up", "down"]

if TYPE_CHECKING:
    import pandas as pd


# paired comparisons -----------------------------------------------------------------------------
def delta_table(runs: pd.DataFrame, by: str | Sequence[str] = "config", metric: str = "delta") -> pd.DataFrame:
    """Mean of `metric` (default the test-split gain, final minus baseline) per configuration.

    Returns:
        Columns label, n, estimate, ci_low, ci_high (bootstrap, Wilson for 0/1), p_value (sign-flip test of
        mean 0), p_holm (Holm over the configurations); empty when the column is absent or all <NA>.
    """
    import pandas as pd

    cols = ["label", "n", "estimate", "ci_low", "ci_high", "p_value", "p_holm"]
    if metric not in runs.columns or runs[metric].isna().all():
        return pd.DataFrame(columns=cols)
    rows = []
    for label, g in config_groups(canonical_rows(runs), by):
        values = [float(v) for v in g[metric].dropna()]
        est, n, lo, hi = _plain_ci(values)  # run-level gains: bootstrap (Wilson is for 0/1 scores)
        rows.append([label, n, est, lo, hi, sign_flip_p(values)])
    return _holm(pd.DataFrame(rows, columns=cols[:-1]))


def compare(
    runs: pd.DataFrame, by: str | Sequence[str] = "config", metric: str = "delta", reference: str | None = None
) -> pd.DataFrame:
    """Paired differences of `metric` between configurations over the same tasks x samples.

    Pairs are matched on (task_id, sample); a run without a partner or a value is left out (n counts pairs).
    Every pair of configurations is compared (b minus a, in the order of `config_groups`), or each against
    `reference` (a label) when given.

    Returns:
        Columns a, b, label ("b - a"), n, estimate (mean paired difference), ci_low, ci_high (paired
        bootstrap 95%), p_value (paired sign-flip permutation test), p_holm (Holm across the rows).
    """
    import pandas as pd

    cols = ["a", "b", "label", "n", "estimate", "ci_low", "ci_high", "p_value"]
    ordered = canonical_rows(runs)  # a (task, sample) with several runs in a group is paired by its first, canonically
    groups = [(label, _by_pair(g, metric)) for label, g in config_groups(ordered, by)] if metric in runs.columns else []
    if reference is not None and reference not in [lab for lab, _ in groups]:
        raise ValueError(f"reference {reference!r} is not a configuration; known: {[lab for lab, _ in groups]}")
    rows = []
    for i, (la, a) in enumerate(groups):
        for lb, b in groups[i + 1 :]:
            if reference is not None and reference not in (la, lb):
                continue
            if reference == lb:
                la, a, lb, b = lb, b, la, a
            diffs = [b[k] - a[k] for k in a if k in b]
            lo, hi = bootstrap_ci(diffs) if diffs else (None, None)
            rows.append(
                [
                    la,
                    lb,
                    f"{lb} - {la}",
                    len(diffs),
                    exact_mean(diffs) if diffs else None,
                    lo,
                    hi,
                    sign_flip_p(diffs),
                ]
            )
    return _holm(pd.DataFrame(rows, columns=cols))


def _by_pair(group: pd.DataFrame, metric: str) -> dict[tuple[object, object], float]:
    """(task_id, sample) -> the value of `metric` of the group's first run with one (missing values skipped; the
    group's rows in the canonical order, `promptlab.results.order`)."""
    import pandas as pd

    out: dict[tuple[object, object], float] = {}
    for task, sample, value in zip(group["task_id"], group["sample"], group[metric], strict=True):
        if (task, sample) not in out and not pd.isna(value):
            out[(task, sample)] = float(value)
    return out


def sign_flip_p(diffs: Sequence[float]) -> float | None:
    """Two-sided p-value of a paired sign-flip permutation test that the mean difference is 0 (scipy). The signs
    are drawn for the differences in `canonical_order`, so the p-value is the same for them in any order."""
    import numpy as np
    from scipy.stats import permutation_test

    (xs,) = canonical_samples((diffs,))
    if xs.size == 0:
        return None
    if not np.any(xs) or xs.size == 1:  # one pair: both sign patterns are as extreme, so p = 1 exactly
        return 1.0
    res = permutation_test(
        (xs,),
        np.mean,
        permutation_type="samples",
        n_resamples=10_000,
        alternative="two-sided",
        rng=np.random.default_rng(SEED),
    )
    return float(res.pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest p times (m - i + 1), made
    non-decreasing along that order, capped at 1. It controls the family-wise error rate under any
    dependence between the tests (`tests/analysis/test_statistics_validity.py` checks it on simulated
    families of true nulls, and `tests/analysis/test_analysis.py` against statsmodels' `multipletests`,
    which is not called here because its Holm branch runs `gc.collect()` on every call: 70 ms each in a
    process holding a few frames, two minutes over the validity test's 1,000 families)."""
    import numpy as np

    ps = np.asarray(p_values, dtype=float)
    order = np.argsort(ps, kind="stable")
    steps = ps[order] * np.arange(len(ps), 0, -1)
    adjusted = np.empty_like(ps)
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return [float(v) for v in adjusted]


def standing(low: Any, high: Any, p_holm: Any = None, null: float = 0.0) -> Standing:
    """What an estimate's 95% CI [low, high] and Holm-corrected p let a report claim, the one rule the findings'
    sentences and the forest plot follow: "no_ci" (a bound missing), "spans" (the CI holds `null`, touching
    included), "not_after_holm" (the CI excludes it but `p_holm`, when known, is `ALPHA` or more), else "up" or
    "down" (the side of `null` the CI lies on)."""
    if _missing(low) or _missing(high):
        return "no_ci"
    if float(low) <= null <= float(high):
        return "spans"
    if not _missing(p_holm) and float(p_holm) >= ALPHA:
        return "not_after_holm"
    return "up" if float(low) > null else "down"


def _missing(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _holm(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with p_holm: Holm-corrected p_value (`holm`), <NA> where p_value is missing."""
    frame = frame.copy()
    ps = frame["p_value"].astype("Float64")
    known = ps.notna()
    frame["p_holm"] = ps.astype("Float64") * float("nan")
    if known.any():
        frame.loc[known, "p_holm"] = holm(ps[known].astype(float).tolist())
    frame["n"] = frame["n"].astype("Int64")
    for c in ("estimate", "ci_low", "ci_high", "p_value", "p_holm"):
        frame[c] = frame[c].astype("Float64")
    return frame


def _plain_ci(values: Sequence[float]) -> tuple[float | None, int, float | None, float | None]:
    if not values:
        return None, 0, None, None
    lo, hi = bootstrap_ci(values)
    return exact_mean(values), len(values), lo, hi


__all__ = ["ALPHA", "Standing", "compare", "delta_table", "holm", "sign_flip_p", "standing"]
