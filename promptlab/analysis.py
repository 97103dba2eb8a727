"""Findings over sweep results: is the critic calibrated, when should a loop stop, which configuration wins.

Pure functions over the tidy frames of `promptlab.results` (no model calls), except `reliability()`, which
re-asks the critics. Every estimate comes with its n and a 95% CI:

- `calibration(trajectories)`: Spearman and Kendall correlation of the critic's score against the grounded
  (dev-split) score, per critic model and criterion, with percentile-bootstrap CIs.
- `counterfactual_stopping(results, thresholds, caps)`: what the loops would have returned under other stopping
  rules, by truncating the logged trajectories (defined in `promptlab.stopping`).
- `reliability(runs, k)` and `agreement(scores)`: test-retest and inter-critic agreement of the critics
  (defined in `promptlab.reliability`; reliability MAKES MODEL CALLS).
- `delta_table(runs, by)` and `compare(runs, by, metric)`: the test-split gain per configuration, and paired
  differences between configurations over the same tasks x samples, with Holm-corrected p-values.
- `provenance_warnings(runs)`: what makes rows of a results directory not comparable.

P-values come from a paired sign-flip permutation test on the mean difference (scipy's `permutation_test`,
exact when 2^n <= its resample count): it tests the statistic reported (the mean), assumes no distribution,
and copes with the ties and zeros that accuracies on a few dozen examples produce, where Wilcoxon's
signed-rank test drops zeros and tests a different (rank) statistic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .provenance import PROVENANCE_CHECKS, provenance_warnings
from .reliability import agreement, reliability
from .stats import BOOTSTRAP_RESAMPLES, SEED, bootstrap_ci
from .stopping import (
    TRUNCATION_EXACT_LOOPS,
    best_stopping_rule,
    counterfactual_stopping,
    default_final,
    select,
    truncate,
)

if TYPE_CHECKING:
    import pandas as pd


ALL = "(all)"
"""Label of a pooled row (all critics, or the iteration average rather than one criterion)."""


# calibration ------------------------------------------------------------------------------------
def calibration(trajectories: pd.DataFrame) -> pd.DataFrame:
    """Rank correlation of critic scores with grounded scores, per critic model and criterion.

    Rows: one per (critic_model, criterion) over the criterion rows that have both a score and a grounded
    score; one per critic with criterion "(all)" correlating the iteration's decision score (its average when
    no decision_score column exists) with the grounded score, one row per run x iteration; and a pooled
    critic "(all)" row of the same. The critic is `critic_model` when present, else `judge`.

    Returns:
        Columns critic_model, criterion, n, spearman, spearman_ci_low, spearman_ci_high, kendall,
        kendall_ci_low, kendall_ci_high. Correlations are <NA> for fewer than 3 pairs or a constant score.
    """
    import pandas as pd

    from .results import iteration_frame

    cols = ["critic_model", "criterion", "n", "spearman", "spearman_ci_low", "spearman_ci_high", "kendall",
            "kendall_ci_low", "kendall_ci_high"]
    if "grounded_score" not in trajectories.columns or trajectories.empty:
        return pd.DataFrame(columns=cols)
    traj = trajectories.assign(critic_model=_critic(trajectories))
    rows: list[list[Any]] = []
    scored = traj[traj["score"].notna() & traj["grounded_score"].notna()]
    for (critic, criterion), g in scored.groupby(["critic_model", "criterion"], sort=True):
        rows.append([critic, criterion, *_correlations(g["score"], g["grounded_score"])])
    its = iteration_frame(traj)
    decision = "decision_score" if "decision_score" in its.columns else "average"
    its = its[its[decision].notna() & its["grounded_score"].notna()]
    for critic, g in its.groupby("critic_model", sort=True):
        rows.append([critic, ALL, *_correlations(g[decision], g["grounded_score"])])
    if its["critic_model"].nunique() > 1:
        rows.append([ALL, ALL, *_correlations(its[decision], its["grounded_score"])])
    out = pd.DataFrame(rows, columns=cols)
    out["n"] = out["n"].astype("Int64")
    for c in cols[3:]:
        out[c] = out[c].astype("Float64")
    return out


def _critic(frame: pd.DataFrame) -> pd.Series:
    """The critic of each row: critic_model, else judge, else "critic"."""
    for col in ("critic_model", "judge"):
        if col in frame.columns and frame[col].notna().any():
            return frame[col].astype("string").fillna("(unknown)")
    return frame["loop"].astype("string").map(lambda _: "critic")


def _correlations(x: pd.Series, y: pd.Series) -> list[Any]:
    """[n, rho, lo, hi, tau, lo, hi] with percentile bootstrap CIs over resampled pairs (fixed seed)."""
    import numpy as np
    from scipy.stats import kendalltau, spearmanr

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(xs)
    if n < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return [n] + [None] * 6
    out: list[Any] = [n]
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    for fn in (spearmanr, kendalltau):
        est = float(fn(xs, ys).statistic)
        boots = []
        for i in idx:  # a resample with a constant side has no correlation: it is skipped, not counted as 0
            bx, by = xs[i], ys[i]
            if np.ptp(bx) > 0 and np.ptp(by) > 0:
                boots.append(float(fn(bx, by).statistic))
        lo, hi = (np.percentile(boots, [2.5, 97.5]) if boots else (est, est))
        out += [est, float(lo), float(hi)]
    return out


# paired comparisons -----------------------------------------------------------------------------
def delta_table(runs: pd.DataFrame, by: str | Sequence[str] = "config", metric: str = "delta") -> pd.DataFrame:
    """Mean of `metric` (default the test-split gain, final minus baseline) per configuration.

    Returns:
        Columns label, n, estimate, ci_low, ci_high (bootstrap, Wilson for 0/1), p_value (sign-flip test of
        mean 0), p_holm (Holm over the configurations); empty when the column is absent or all <NA>.
    """
    import pandas as pd

    from .plots import config_groups

    cols = ["label", "n", "estimate", "ci_low", "ci_high", "p_value", "p_holm"]
    if metric not in runs.columns or runs[metric].isna().all():
        return pd.DataFrame(columns=cols)
    rows = []
    for label, g in config_groups(runs, by):
        values = [float(v) for v in g[metric].dropna()]
        est, n, lo, hi = _plain_ci(values)  # run-level gains: bootstrap (Wilson is for 0/1 scores)
        rows.append([label, n, est, lo, hi, sign_flip_p(values)])
    return _holm(pd.DataFrame(rows, columns=cols[:-1]))


def compare(runs: pd.DataFrame, by: str | Sequence[str] = "config", metric: str = "delta",
            reference: str | None = None) -> pd.DataFrame:
    """Paired differences of `metric` between configurations over the same tasks x samples.

    Pairs are matched on (task_id, sample); a run without a partner or a value is left out (n counts pairs).
    Every pair of configurations is compared (b minus a, in the order of `config_groups`), or each against
    `reference` (a label) when given.

    Returns:
        Columns a, b, label ("b - a"), n, estimate (mean paired difference), ci_low, ci_high (paired
        bootstrap 95%), p_value (paired sign-flip permutation test), p_holm (Holm across the rows).
    """
    import pandas as pd

    from .plots import config_groups

    cols = ["a", "b", "label", "n", "estimate", "ci_low", "ci_high", "p_value"]
    groups = [(label, g.dropna(subset=[metric]).drop_duplicates(["task_id", "sample"]).set_index(
        ["task_id", "sample"])[metric]) for label, g in config_groups(runs, by)] if metric in runs.columns else []
    if reference is not None and reference not in [lab for lab, _ in groups]:
        raise ValueError(f"reference {reference!r} is not a configuration; known: {[lab for lab, _ in groups]}")
    rows = []
    for i, (la, a) in enumerate(groups):
        for lb, b in groups[i + 1:]:
            if reference is not None and reference not in (la, lb):
                continue
            if reference == lb:
                la, a, lb, b = lb, b, la, a
            both = a.index.intersection(b.index)
            diffs = [float(b[k]) - float(a[k]) for k in both]
            lo, hi = bootstrap_ci(diffs) if diffs else (None, None)
            rows.append([la, lb, f"{lb} - {la}", len(diffs), sum(diffs) / len(diffs) if diffs else None, lo, hi,
                         sign_flip_p(diffs)])
    return _holm(pd.DataFrame(rows, columns=cols))


def sign_flip_p(diffs: Sequence[float]) -> float | None:
    """Two-sided p-value of a paired sign-flip permutation test that the mean difference is 0 (scipy)."""
    import numpy as np
    from scipy.stats import permutation_test

    xs = np.asarray(diffs, dtype=float)
    if xs.size == 0:
        return None
    if not np.any(xs) or xs.size == 1:  # one pair: both sign patterns are as extreme, so p = 1 exactly
        return 1.0
    res = permutation_test((xs,), np.mean, permutation_type="samples", n_resamples=10_000,
                           alternative="two-sided", random_state=np.random.default_rng(SEED))
    return float(res.pvalue)


def _holm(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with p_holm: Holm-corrected p_value (statsmodels), <NA> where p_value is missing."""
    from statsmodels.stats.multitest import multipletests

    frame = frame.copy()
    ps = frame["p_value"].astype("Float64")
    known = ps.notna()
    frame["p_holm"] = ps.astype("Float64") * float("nan")
    if known.any():
        frame.loc[known, "p_holm"] = multipletests(ps[known].astype(float), method="holm")[1]
    frame["n"] = frame["n"].astype("Int64")
    for c in ("estimate", "ci_low", "ci_high", "p_value", "p_holm"):
        frame[c] = frame[c].astype("Float64")
    return frame


def _plain_ci(values: Sequence[float]) -> tuple[float | None, int, float | None, float | None]:
    if not values:
        return None, 0, None, None
    lo, hi = bootstrap_ci(values)
    return sum(values) / len(values), len(values), lo, hi


__all__ = ["ALL", "PROVENANCE_CHECKS", "TRUNCATION_EXACT_LOOPS", "agreement", "best_stopping_rule", "calibration",
           "compare", "counterfactual_stopping", "default_final", "delta_table", "provenance_warnings",
           "reliability", "select", "sign_flip_p", "truncate"]
