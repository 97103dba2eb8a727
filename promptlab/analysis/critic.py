"""Is the critic calibrated? Its OWN scores against the accuracy of what it scored.

`calibration(trajectories)` correlates each critic's own scores (the `score` of its rows: sampled, expected
in G-Eval mode, or simulated) with the dev-split grounded score of the same candidate. It never uses
`decision_score`: under `score_source="grounded"` that is `1 + 9 x grounded_score`, so correlating it with the
grounded score would measure the grounded score against itself.

A critic whose scores (nearly) do not vary carries no information about accuracy: its row has no correlation
and says so in words (`finding`), as does a set of candidates whose dev scores are all equal. Simulated
critics (`sim/...` models, see `promptlab.critics.simulated`) are computed from the dev score by a known formula;
their rows say so, and are what checks this function against a known truth.

Correlations are Spearman's rho and Kendall's tau-b with percentile-bootstrap 95% CIs over candidates
(`promptlab.eval.stats.bootstrap_interval`, pairs resampled together).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..results.order import canonical_rows

if TYPE_CHECKING:
    import pandas as pd


ALL = "(all)"
"""Criterion label of a critic's row over all its criteria (its mean score per candidate)."""
NEAR_CONSTANT_SD = 0.1
"""A critic whose scores have a standard deviation below this (on the 1-10 scale) is treated as constant:
no correlation is reported, only the finding that it carries no information about accuracy."""
CALIBRATION_COLUMNS = [
    "critic_model",
    "criterion",
    "n",
    "critic_mean",
    "critic_sd",
    "critic_min",
    "critic_max",
    "spearman",
    "spearman_ci_low",
    "spearman_ci_high",
    "kendall",
    "kendall_ci_low",
    "kendall_ci_high",
    "finding",
]
"""Columns of `calibration()`."""


def calibration(trajectories: pd.DataFrame) -> pd.DataFrame:
    """Rank correlation of each critic's own scores with the grounded (dev-split) score of what it scored.

    Rows, for each critic model (`critic_model`, else `judge`): one with criterion "(all)" over candidates
    (one per run x iteration: the critic's mean score over its criteria and, with several critics of that
    model, over them), and, when the critic scored more than one criterion, one per criterion. Only
    candidates with both a critic score and a grounded score count; iteration 0 (the starting prompt) is a
    candidate like any other.

    Returns:
        `CALIBRATION_COLUMNS`: n pairs; the critic's score mean, sd, min and max; Spearman and Kendall with
        95% bootstrap CIs (<NA> for fewer than 3 pairs, a critic whose sd is below NEAR_CONSTANT_SD, or
        grounded scores that are all equal); and `finding`, a sentence where there is no correlation to
        report (<NA> otherwise).
    """
    need = {"score", "grounded_score", "run_id", "iteration"}
    if trajectories.empty or not need <= set(trajectories.columns):
        return _frame([])
    ordered = canonical_rows(trajectories)  # means and "first" rows the same for the rows in any order
    traj = ordered.assign(critic_model=_critic(ordered))
    scored = traj[traj["score"].notna() & traj["grounded_score"].notna()]
    rows: list[list[Any]] = []
    keys = [c for c in ("cell_id", "run_id", "iteration") if c in scored.columns]
    for critic, g in scored.groupby("critic_model", sort=True):
        per_candidate = g.groupby(keys, sort=False).agg(score=("score", "mean"), grounded=("grounded_score", "first"))
        rows.append([critic, ALL, *_row(str(critic), per_candidate["score"], per_candidate["grounded"])])
        if g["criterion"].nunique() > 1:
            for criterion, c in g.groupby("criterion", sort=True):
                rows.append([critic, criterion, *_row(str(critic), c["score"], c["grounded_score"])])
    return _frame(rows) if rows else _frame([])


def _frame(rows: list[list[Any]]) -> pd.DataFrame:
    import pandas as pd

    out = pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)
    out["n"] = out["n"].astype("Int64")
    for c in CALIBRATION_COLUMNS[3:-1]:
        out[c] = out[c].astype("Float64")
    out["finding"] = out["finding"].astype("string")
    for c in ("critic_model", "criterion"):
        out[c] = out[c].astype("string")
    return out


def _critic(frame: pd.DataFrame) -> pd.Series:
    """The critic of each row: critic_model, else judge, else "critic"."""
    for col in ("critic_model", "judge"):
        if col in frame.columns and frame[col].notna().any():
            return frame[col].astype("string").fillna("(unknown)")
    return frame["loop"].astype("string").map(lambda _: "critic")


def _row(critic: str, scores: pd.Series, grounded: pd.Series) -> list[Any]:
    """[n, mean, sd, min, max, rho, lo, hi, tau, lo, hi, finding] of one critic's scores against accuracy."""
    import numpy as np

    xs, ys = np.asarray(scores, dtype=float), np.asarray(grounded, dtype=float)
    n = len(xs)
    sd = float(np.std(xs, ddof=1)) if n > 1 else 0.0
    described = [n, float(np.mean(xs)), sd, float(np.min(xs)), float(np.max(xs))]
    why = _no_correlation(critic, xs, ys, sd)
    if why is not None:
        return [*described, *([None] * 6), why]
    return [*described, *correlations(xs, ys), None]


def _no_correlation(critic: str, xs: Any, ys: Any, sd: float) -> str | None:
    """Why there is no correlation to report (a sentence), or None when there is one."""
    import numpy as np

    n = len(xs)
    if sd < NEAR_CONSTANT_SD:
        gave = (
            f"gave every candidate {xs[0]:.3g}"
            if np.ptp(xs) == 0
            else f"scores barely vary ({np.min(xs):.3g} to {np.max(xs):.3g}, sd {sd:.2g})"
        )
        return f"the critic {critic} {gave} (n={n}): it carries no information about accuracy"
    if n < 3:
        return f"too few candidates with both scores (n={n}) for a correlation"
    if np.ptp(ys) == 0:
        return (
            f"every candidate had the same dev score ({ys[0]:.3g}, n={n}): there is no difference in "
            "accuracy for the critic to track"
        )
    return None


def correlations(x: Any, y: Any) -> list[float | None]:
    """[rho, lo, hi, tau, lo, hi]: Spearman's rho and Kendall's tau-b of paired values, each with its 95%
    percentile bootstrap CI over resampled pairs (a resample with a constant side has no correlation and is
    left out). The estimates are scipy's; the resamples use vectorised versions of the same statistics."""
    import numpy as np
    from scipy.stats import kendalltau, spearmanr

    from ..eval.stats import bootstrap_interval

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out: list[float | None] = []
    batch = max(1, 2_000_000 // max(len(xs) ** 2, 1))
    for estimate, statistic in ((spearmanr, spearman_along), (kendalltau, kendall_along)):
        interval = bootstrap_interval((xs, ys), statistic, paired=True, batch=batch)
        est = float(estimate(xs, ys).statistic)
        out += [est, *(interval if interval is not None else (None, None))]
    return out


def spearman_along(x: Any, y: Any, axis: int = -1) -> Any:
    """Spearman's rho along `axis` (ranks with ties averaged, then Pearson); NaN where a side is constant."""
    from scipy.stats import rankdata

    return _pearson(rankdata(x, axis=axis), rankdata(y, axis=axis), axis)


def kendall_along(x: Any, y: Any, axis: int = -1) -> Any:
    """Kendall's tau-b along `axis` (from the signs of all pairwise differences); NaN where a side is constant."""
    import numpy as np

    x, y = np.moveaxis(np.asarray(x, dtype=float), axis, -1), np.moveaxis(np.asarray(y, dtype=float), axis, -1)
    sx = np.sign(x[..., :, None] - x[..., None, :])
    sy = np.sign(y[..., :, None] - y[..., None, :])
    num = (sx * sy).sum(axis=(-2, -1))
    den = np.sqrt((sx * sx).sum(axis=(-2, -1)) * (sy * sy).sum(axis=(-2, -1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _pearson(a: Any, b: Any, axis: int) -> Any:
    import numpy as np

    a = a - a.mean(axis=axis, keepdims=True)
    b = b - b.mean(axis=axis, keepdims=True)
    den = np.sqrt((a * a).sum(axis=axis) * (b * b).sum(axis=axis))
    num = (a * b).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, num / np.where(den > 1e-12, den, 1), np.nan)


__all__ = [
    "ALL",
    "CALIBRATION_COLUMNS",
    "NEAR_CONSTANT_SD",
    "calibration",
    "correlations",
    "kendall_along",
    "spearman_along",
]
