"""Findings over sweep results: is the critic calibrated, when should a loop stop, which configuration wins.

Pure functions over the tidy frames of `promptlab.results` (no model calls), except `reliability()`, which
re-asks the critics. Every estimate comes with its n and a 95% CI:

- `calibration(trajectories)`: Spearman and Kendall correlation of the critic's score against the grounded
  (dev-split) score, per critic model and criterion, with percentile-bootstrap CIs.
- `counterfactual_stopping(results, thresholds, caps)`: what the loops would have returned under other stopping
  rules, by truncating the logged trajectories (defined in `promptlab.analysis.stopping`).
- `reliability(runs, k)` and `agreement(scores)`: test-retest and inter-critic agreement of the critics
  (defined in `promptlab.analysis.consistency`; reliability MAKES MODEL CALLS).
- `delta_table(runs, by)` and `compare(runs, by, metric)`: the test-split gain per configuration, and paired
  differences between configurations over the same tasks x samples, with Holm-corrected p-values.
- `provenance_warnings(runs)`: what makes rows of a results directory not comparable.

P-values come from a paired sign-flip permutation test on the mean difference (scipy's `permutation_test`,
exact when 2^n <= its resample count): it tests the statistic reported (the mean), assumes no distribution,
and copes with the ties and zeros that accuracies on a few dozen examples produce, where Wilcoxon's
signed-rank test drops zeros and tests a different (rank) statistic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..eval.stats import BOOTSTRAP_RESAMPLES, SEED

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

    from ..results.frames import iteration_frame

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


__all__ = ["ALL", "calibration"]
