"""Is the critic a reliable instrument? Test-retest and inter-critic agreement of critic scores.

`agreement(scores)` is pure: it takes a tidy frame of scores (one row per item x rater) and reports
Krippendorff's alpha (interval level, from the `krippendorff` package) with a bootstrap CI over items, and
the mean absolute score change. `reliability(runs, k)` MAKES MODEL CALLS: it re-asks each run's critic(s)
about logged candidates k times through the loop's `rescore` hook (cached, so a re-run is free) and feeds
the scores to `agreement`. It is also importable from `promptlab.analysis`.

Re-scores are independent draws: re-score s (1..k) of a run logged at sample r calls the critic at sample
`promptlab.loops.rescore_sample(r, s)` = RESCORE_BASE * s + RESCORE_STRIDE * r (plus the critic's
index), with RESCORE_BASE = 1,000,000 and RESCORE_STRIDE = 1,000. That space is disjoint from every logged
call of any run (its sample plus small per-call offsets), so no re-score is a cache hit of a logged score,
of another critic's logged score or of another re-score (for run samples below 1,000 and fewer than 1,000
critics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..aio import run_sync
from ..errors import ConfigError
from ..eval.stats import BOOTSTRAP_RESAMPLES, bootstrap_interval, canonical_order, mean_ci

if TYPE_CHECKING:
    import pandas as pd

    from ..record import Run

AGREEMENT_COLUMNS = [
    "kind",
    "critic",
    "n_items",
    "n_raters",
    "alpha",
    "alpha_ci_low",
    "alpha_ci_high",
    "mean_abs_change",
    "mean_abs_change_n",
    "mean_abs_change_ci_low",
    "mean_abs_change_ci_high",
]
"""Columns of `agreement()` and `reliability()`."""


def agreement(
    scores: pd.DataFrame,
    *,
    item: Sequence[str] = ("run_id", "iteration", "criterion"),
    retest: str = "sample",
    critic: str = "judge",
) -> pd.DataFrame:
    """Test-retest agreement per critic and, with several critics, inter-critic agreement.

    Args:
        scores: One row per item x critic x sample with a numeric `score` (missing scores are <NA>).
        item: Columns naming one judged thing (a candidate and criterion).
        retest: Column of the repetition index (0 = the logged score, 1..k = re-scores).
        critic: Column naming the critic.

    Returns:
        Rows of kind "test-retest" (one per critic; raters are the samples) and, when there are several
        critics, one of kind "inter-critic" (raters are the critics, at each item's first sample). alpha is
        Krippendorff's interval alpha with a 95% percentile bootstrap CI over items (<NA> with fewer than 2
        items or no variation); mean_abs_change is the mean |score - that item's score at the first sample|
        over re-scores (test-retest), or |score - the first critic's score| (inter-critic), with its n and
        bootstrap CI.
    """
    import pandas as pd

    item = list(item)
    rows = []
    for name, g in scores.groupby(critic, sort=True):
        rows.append(
            [
                "test-retest",
                name,
                *_stats(g.pivot_table(index=item, columns=retest, values="score", aggfunc="first", dropna=False)),
            ]
        )
    if scores[critic].nunique() > 1:
        first = scores[scores[retest] == scores[retest].min()]
        rows.append(
            [
                "inter-critic",
                "(all)",
                *_stats(first.pivot_table(index=item, columns=critic, values="score", aggfunc="first", dropna=False)),
            ]
        )
    out = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    for c in ("n_items", "n_raters", "mean_abs_change_n"):
        out[c] = out[c].astype("Int64")
    for c in (
        "alpha",
        "alpha_ci_low",
        "alpha_ci_high",
        "mean_abs_change",
        "mean_abs_change_ci_low",
        "mean_abs_change_ci_high",
    ):
        out[c] = out[c].astype("Float64")
    return out


def _stats(matrix: pd.DataFrame) -> list[Any]:
    """[n_items, n_raters, alpha, lo, hi, mac, mac_n, mac_lo, mac_hi] of an items x raters matrix (its items
    resampled in `canonical_order` of their scores, so the interval does not depend on how items are named)."""
    import numpy as np

    m = matrix.to_numpy(dtype=float, na_value=np.nan)
    m = m[canonical_order(*m.T)] if m.size else m
    n_items, n_raters = m.shape
    alpha = _alpha(m)
    lo = hi = None
    if alpha is not None:  # items resampled; a resample without variation has no alpha and is left out

        def resampled(idx: Any) -> float:
            a = _alpha(m[np.asarray(idx, dtype=int)])
            return float("nan") if a is None else a

        interval = bootstrap_interval(
            (np.arange(n_items),), resampled, vectorized=False, n_resamples=BOOTSTRAP_RESAMPLES // 2
        )
        lo, hi = interval if interval is not None else (None, None)
    changes = [
        abs(m[i, j] - m[i, 0])
        for i in range(n_items)
        for j in range(1, n_raters)
        if not np.isnan(m[i, j]) and not np.isnan(m[i, 0])
    ]
    mac, n, mlo, mhi = mean_ci(changes)
    return [n_items, n_raters, alpha, lo, hi, mac, n, mlo, mhi]


def _alpha(m: Any) -> float | None:
    """Krippendorff's interval alpha of an items x raters matrix; None when it is undefined."""
    import krippendorff
    import numpy as np

    pairable = np.sum(~np.isnan(m), axis=1) >= 2
    values = m[pairable]
    if values.shape[0] < 2 or np.nanmax(values) == np.nanmin(values):
        return None
    return float(krippendorff.alpha(reliability_data=values.T, level_of_measurement="interval"))


async def ascores(
    runs: Sequence[Run], k: int = 3, *, iterations: Sequence[int] | None = None, cache: Any = None, settings: Any = None
) -> pd.DataFrame:
    """The logged critic scores (sample 0) and re-scores 1..k of each run's iterations.

    MODEL CALLS: one `get_loop(run.loop).rescore(run, iteration, sample=s)` per run x iteration x s (cached;
    each a new draw, disjoint from the logged calls: see the module docstring).

    Returns:
        One row per run_id x iteration x criterion x judge x sample with the score (<NA> when unusable).
    """
    import pandas as pd

    from ..loops.registry import get_loop

    rows: list[dict[str, Any]] = []
    for run in runs:
        rescore = getattr(get_loop(run.loop), "rescore", None)
        if rescore is None:
            raise ConfigError(f"reliability: loop {run.loop!r} cannot re-score its candidates (no rescore hook)")
        for it in run.iterations:
            if iterations is not None and it.index not in iterations:
                continue
            samples = [(0, it.scores)]
            for s in range(1, k + 1):
                samples.append((s, await rescore(run, it.index, sample=s, cache=cache, settings=settings)))
            for s, scored in samples:
                rows += [
                    {
                        "run_id": run.run_id,
                        "iteration": it.index,
                        "criterion": sc.criterion,
                        "judge": sc.judge or "critic",
                        "sample": s,
                        "score": sc.score,
                    }
                    for sc in scored
                ]
    frame = pd.DataFrame(rows, columns=["run_id", "iteration", "criterion", "judge", "sample", "score"])
    frame["score"] = frame["score"].astype("Float64")
    return frame


def reliability(
    runs: Sequence[Run], k: int = 3, *, iterations: Sequence[int] | None = None, cache: Any = None, settings: Any = None
) -> pd.DataFrame:
    """Test-retest (and inter-critic) agreement of the runs' critics. MAKES MODEL CALLS (cached).

    Re-scores every logged candidate (or the given iterations) k times through the loop's `rescore` hook,
    each re-score a new draw disjoint from every logged call (see the module docstring), and reports
    `agreement()` over the logged and re-scored values. Use `promptlab.results.read_runs` for the Run records
    of a results directory. Works inside a running event loop (a Jupyter kernel); from async code, `await
    ascores(...)` and pass the frame to `agreement`.

    Raises:
        ConfigError: a run's loop has no rescore hook.
    """
    return agreement(run_sync(ascores(runs, k, iterations=iterations, cache=cache, settings=settings)))


__all__ = ["AGREEMENT_COLUMNS", "agreement", "ascores", "reliability"]
