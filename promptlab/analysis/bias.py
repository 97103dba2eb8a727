"""Is the critic biased? Five probes of the judge biases a refinement loop is exposed to, each an estimate with
its n and a CI (95% for one probe alone; `bias_table` widens each critic's intervals so they hold together at
95%: FAMILY_ERROR). Pure functions over tidy frames; the re-asks that feed three of them are in
`promptlab.analysis.reask` (model calls, cached, with a budget).

| probe | data | statistic (unit) | 95% CI |
|---|---|---|---|
| `length` | logs | score ~ characters / 100 + iteration + one level per dev accuracy: the slope (points per 100 characters at equal accuracy and iteration) | OLS, clustered by run (t, runs - 1 df) |
| `inflation` | logs | score change ~ accuracy change + length change / 100 over consecutive iterations of each run: the intercept (points per step at no change in accuracy or length) | OLS, clustered by run |
| `padding` | re-asks | (padded score - plain score) / (characters added / 100), averaged over candidates (points per 100 characters) | `eval.stats.bootstrap_ci` |
| `order` | re-asks | per pair, (first shown won, order AB) + (first shown won, order BA) - 1, averaged: the first-position preference (0: none, 1: always the first) | `eval.stats.bootstrap_ci` |
| `anchoring` | re-asks | (score with a shown previous score - plain score) ~ shown score: the slope (the weight pulled towards the shown score) | OLS, heteroskedasticity-robust (HC2) |

The shown score of the anchoring probe is drawn at random (from ANCHORS, by a fixed seed), not taken from the
log: a random anchor is independent of the candidate's quality, so the slope is the anchoring weight and not
partly the critic's own consistency.

A verdict (`BIAS_COLUMNS`' `finding`) says "biased" only when the CI excludes 0, and "no evidence of bias" only
when the CI lies inside +/- the probe's stated size (MARGINS: an equivalence reading, not "the CI spans 0"); a
CI that spans 0 but not inside the margin is inconclusive. `tests/analysis/test_bias_validity.py` checks each
probe on simulated critics with a planted bias (`sim/biased`, `promptlab.critics.simulated`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..critics.simulated import simulated_critic
from ..eval.stats import bootstrap_ci

if TYPE_CHECKING:
    import pandas as pd

MARGINS = {"length": 0.2, "inflation": 0.2, "padding": 0.2, "order": 0.1, "anchoring": 0.1}
"""The size each probe must rule out to report "no evidence of bias": 0.2 points per 100 characters (length,
padding), 0.2 points per step (inflation), a first-position preference of 0.1 (order), an anchoring weight of
0.1 (anchoring)."""
UNITS = {
    "length": "points per 100 characters",
    "inflation": "points per step",
    "padding": "points per 100 characters",
    "order": "first-position preference",
    "anchoring": "weight towards the shown score",
}
"""The unit of each probe's estimate."""
BIAS_COLUMNS = [
    "critic_model",
    "probe",
    "unit",
    "estimate",
    "n",
    "ci_low",
    "ci_high",
    "margin",
    "finding",
    "ci_level",
    "planted",
]
"""Columns of `bias_table` (one row per critic x probe; n counts candidates, steps, pairs or re-asks; ci_level
is the confidence of that row's interval, 1 - FAMILY_ERROR / the critic's probes; planted is the size a
simulated critic was built with, `planted`, NA for a model)."""
FAMILY_ERROR = 0.05
"""The chance, for a critic with no bias at all, that `bias_table` calls any of its probes "biased": each of
its m measured probes' intervals is at 1 - 0.05 / m (Bonferroni), so the m intervals hold together with at
least 95% confidence. Five probes at 95% each would call an unbiased critic biased on some probe about one
time in four."""


@dataclass(frozen=True)
class Estimate:
    """One probe's estimate: value, n and 95% CI (None where there is too little data, `why` then says so)."""

    value: float | None
    n: int
    low: float | None = None
    high: float | None = None
    why: str | None = None


def length_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Score against candidate length at equal dev accuracy and iteration (columns run_id, iteration, score,
    accuracy, chars)."""
    import numpy as np
    import pandas as pd

    d = frame.dropna(subset=["score", "accuracy", "chars", "iteration"])
    levels = pd.get_dummies(d["accuracy"].astype(float).round(9), dtype=float)
    x = np.column_stack([d["chars"].to_numpy(float) / 100, d["iteration"].to_numpy(float), levels.to_numpy()])
    if len(x) and np.ptp(x[:, 1]) == 0:  # one iteration only: nothing to hold fixed
        x = np.delete(x, 1, axis=1)
    what = "candidates whose length varies at equal accuracy"
    return _ols(d["score"].to_numpy(float), x, d["run_id"], 0, what, confidence)


def inflation(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Score change at no change in accuracy (nor in length, when `chars` is given), step by step along each
    run (columns run_id, iteration, score, accuracy, optionally chars)."""
    import numpy as np

    cols = ["score", "accuracy", *(["chars"] if "chars" in frame.columns and frame["chars"].notna().all() else [])]
    d = frame.dropna(subset=["score", "accuracy"]).sort_values(["run_id", "iteration"])
    steps = d.groupby("run_id", sort=False)[cols].diff().assign(run_id=d["run_id"]).dropna()
    x = np.column_stack([np.ones(len(steps)), steps[cols[1:]].to_numpy(float) / [1, 100][: len(cols) - 1]])
    return _ols(steps["score"].to_numpy(float), x, steps["run_id"], 0, "consecutive scored iterations", confidence)


def padding_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Score change per 100 characters of neutral padding (columns plain, padded, added_chars)."""
    d = frame.dropna(subset=["plain", "padded"])
    d = d[d["added_chars"] > 0]
    per_100 = ((d["padded"] - d["plain"]) / (d["added_chars"] / 100)).astype(float).tolist()
    return _mean(per_100, "candidates with a plain and a padded score", confidence)


def order_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """First-position preference over pairs judged in both orders (columns pair, swapped, first_won; and draw
    when a pair was judged several times: its share of first-shown wins in each order is averaged over them)."""
    d = frame.dropna(subset=["first_won"])
    shares = d.assign(first_won=d["first_won"].astype(float)).groupby(["pair", "swapped"])["first_won"].mean()
    both = shares.unstack("swapped")
    values = (both[0] + both[1] - 1).dropna().tolist() if {0, 1} <= set(both.columns) else []
    return _mean(values, "pairs judged in both orders", confidence)


def flip_rate(frame: pd.DataFrame) -> tuple[float | None, int]:
    """(share of judgements whose verdict changes candidate when the order is swapped, pairs judged in both
    orders): over each pair's draws (column draw, when present) judged in both orders. A tie (column tie, when
    present: the judge saw no difference) is a verdict of its own: tied in both orders is no flip, a tie in one
    order and a winner in the other is one."""
    import pandas as pd

    tie = frame["tie"].fillna(False).astype(bool) if "tie" in frame.columns else pd.Series(False, index=frame.index)
    d = frame[frame["first_won"].notna() | tie].copy()
    named_a = d["first_won"].fillna(False).astype(bool) == (d["swapped"] == 0)  # the first shown is a unswapped
    d["verdict"] = named_a.map({True: "a", False: "b"}).where(~tie[d.index], "tie")
    keys = ["pair", "draw"] if "draw" in d.columns else ["pair"]
    both = d.groupby(keys)["verdict"].agg(["nunique", "count"])
    both = both[both["count"] == 2]
    pairs = both.index.get_level_values("pair").nunique()
    return (float((both["nunique"] != 1).mean()) if len(both) else None), pairs


def anchoring_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Weight towards a shown previous score (columns plain, anchored, anchor)."""
    import numpy as np

    d = frame.dropna(subset=["plain", "anchored", "anchor"])
    x = np.column_stack([np.ones(len(d)), d["anchor"].to_numpy(float)])
    what = "re-asks with and without a shown score"
    return _ols((d["anchored"] - d["plain"]).to_numpy(float), x, None, 1, what, confidence)


PROBES: dict[str, Callable[[pd.DataFrame, float], Estimate]] = {
    "length": length_bias,
    "inflation": inflation,
    "padding": padding_bias,
    "order": order_bias,
    "anchoring": anchoring_bias,
}
"""Probe name -> its estimator (frame, confidence of its CI)."""
REASKED = ("padding", "order", "anchoring")
"""The probes that re-ask the critic (`promptlab.analysis.bias_asks`); the others read the logs."""


def _ols(y: Any, x: Any, clusters: Any, coef: int, what: str, confidence: float) -> Estimate:
    """Coefficient `coef` of OLS y ~ x with its CI at `confidence`: clustered by `clusters` (t with clusters - 1 df), or
    HC2 without clusters (statsmodels)."""
    import numpy as np
    import statsmodels.api as sm

    n = len(y)
    if n < 3 or np.linalg.matrix_rank(x) < x.shape[1] or n <= x.shape[1]:
        return Estimate(None, n, why=f"too few {what} (n={n}) for the regression")
    groups = None if clusters is None else np.unique(np.asarray(clusters, dtype=str), return_inverse=True)[1]
    if groups is not None and groups.max() < 1:
        return Estimate(None, n, why=f"only one run: no run-clustered CI (n={n} {what})")
    with warnings.catch_warnings():  # an undefined interval is reported below, not warned about
        warnings.simplefilter("ignore", RuntimeWarning)
        if groups is None:
            fit = sm.OLS(y, x).fit(cov_type="HC2", use_t=True)
        else:
            fit = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    low, high = np.round(fit.conf_int(1 - confidence)[coef], 12)  # an exact fit's rounding error is no bias
    value = round(float(fit.params[coef]), 12)
    if not (np.isfinite(low) and np.isfinite(high)):
        return Estimate(value, n, why=f"no CI (the {what} leave no residual variation)")
    return Estimate(value, n, float(low), float(high))


def _mean(values: list[float], what: str, confidence: float) -> Estimate:
    """The mean of `values` with `eval.stats.bootstrap_ci` at `confidence`."""
    if len(values) < 2:
        return Estimate(None, len(values), why=f"too few {what} (n={len(values)})")
    low, high = bootstrap_ci(values, confidence)
    return Estimate(round(sum(values) / len(values), 12), len(values), round(low, 12), round(high, 12))


PLANTED: dict[str, Callable[[dict[str, Any]], dict[str, float]]] = {
    "length": lambda p: {"length": p["per_100"], "padding": p["per_100"]},
    "biased": lambda p: {
        "length": p["per_100"],
        "padding": p["per_100"],
        "inflation": p["inflation"],
        "order": p["first"],
        "anchoring": p["anchor"],
    },
}
"""Simulated-critic kind -> its parameters -> the size of each bias it was built with (probes not named: 0).
The sizes are the formula's, before the clip to 1-10, which pulls a score near either end towards the middle;
in a loop that shows the critic a previous score, sim/biased's anchoring weight also scales what the logs show
of its length slope and inflation by (1 - anchor)."""


def planted(critic_model: str) -> dict[str, float] | None:
    """Probe -> the size of that bias a simulated critic was built with (0 for every probe of sim/oracle,
    sim/noisy, sim/random, sim/constant); None for a model critic, whose biases are unknown."""
    sim = simulated_critic(critic_model)
    if sim is None:
        return None
    built = PLANTED.get(sim.kind, lambda _p: {})(sim.params)
    return {probe: float(built.get(probe, 0.0)) for probe in PROBES}


def bias_verdict(probe: str, est: Estimate) -> str:
    """The finding in words: biased (CI excludes 0), no evidence of bias (CI inside +/- the margin) or
    inconclusive."""
    if est.value is None or est.low is None or est.high is None:
        return f"Not measured: {est.why}"
    margin = MARGINS[probe]
    if est.low > 0 or est.high < 0:
        return f"Biased: the CI excludes 0 ({'above' if est.low > 0 else 'below'})"
    if -margin < est.low and est.high < margin:
        return f"No evidence of bias: the CI lies within +/-{margin:g}"
    return f"Inconclusive: the CI spans 0 but reaches beyond +/-{margin:g}"


def bias_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every probe that has data, per critic: `BIAS_COLUMNS`. A critic's intervals are simultaneous: each at
    1 - FAMILY_ERROR / (the probes measured for that critic), so "biased" on any probe is a family-wise 5% error
    for a critic with no bias (the single-probe estimators themselves default to 95%).

    Args:
        frames: Probe name -> its tidy frame (with a `critic_model` column; see each estimator for the rest).
            `logged_frame` gives the frame of `length` and `inflation`; `promptlab.analysis.reask` those of
            `padding`, `order` and `anchoring`, and "skipped" (critic_model, why) for a critic whose re-asks
            failed.
    """
    import pandas as pd

    rows = []
    skipped = frames.get("skipped")
    for r in skipped.itertuples() if skipped is not None else []:
        sizes = planted(str(r.critic_model)) or {}
        rows += [
            [r.critic_model, p, UNITS[p], None, 0, None, None, MARGINS[p], f"Not measured: {r.why}", None, sizes.get(p)]
            for p in REASKED
        ]
    probed = [
        (probe, str(critic), g)
        for probe, frame in frames.items()
        if probe != "skipped" and len(frame)
        for critic, g in frame.groupby("critic_model", sort=True)
    ]
    family = pd.Series([critic for _, critic, _ in probed]).value_counts().to_dict()
    for probe, critic, g in probed:
        confidence = 1 - FAMILY_ERROR / family[critic]
        est = PROBES[probe](g, confidence)
        finding = bias_verdict(probe, est)
        if probe == "order":
            rate, n = flip_rate(g)
            draws = int(g["draw"].nunique()) if "draw" in g.columns else 1
            each = f" (each judged {draws} times)" if draws > 1 else ""
            finding += f"; {rate:.0%} of {n} pairs{each} flip under swap" if rate is not None else ""
        size = (planted(critic) or {}).get(probe)
        rows.append(
            [
                critic,
                probe,
                UNITS[probe],
                est.value,
                est.n,
                est.low,
                est.high,
                MARGINS[probe],
                finding,
                confidence,
                size,
            ]
        )
    out = pd.DataFrame(rows, columns=BIAS_COLUMNS).sort_values(["critic_model", "probe"], kind="stable")
    out = out.reset_index(drop=True)
    for c in ("estimate", "ci_low", "ci_high", "margin", "ci_level", "planted"):
        out[c] = out[c].astype("Float64")
    out["n"] = out["n"].astype("Int64")
    for c in ("critic_model", "probe", "unit", "finding"):
        out[c] = out[c].astype("string")
    return out


def logged_frame(trajectories: pd.DataFrame, chars: pd.DataFrame) -> pd.DataFrame:
    """One row per critic x run x iteration from the logs: critic_model, run_id, iteration, score (the critic's
    own mean score over its criteria), accuracy (the dev score), chars (the candidate's length).

    Args:
        trajectories: `Results.trajectories`.
        chars: run_id, iteration, chars of each logged candidate (`promptlab.analysis.reask.candidate_lengths`).
    """
    import pandas as pd

    cols = ["critic_model", "run_id", "iteration", "score", "accuracy", "chars"]
    need = {"score", "grounded_score", "critic_model", "run_id", "iteration"}
    if trajectories.empty or not need <= set(trajectories.columns):
        return pd.DataFrame(columns=cols)
    t = trajectories[trajectories["score"].notna() & trajectories["grounded_score"].notna()]
    per = t.groupby(["critic_model", "run_id", "iteration"], as_index=False).agg(
        score=("score", "mean"), accuracy=("grounded_score", "first")
    )
    out = per.merge(chars, on=["run_id", "iteration"], how="left")
    return out[cols].astype({"score": float, "accuracy": float, "chars": float})


__all__ = [
    "BIAS_COLUMNS",
    "MARGINS",
    "PLANTED",
    "PROBES",
    "REASKED",
    "UNITS",
    "Estimate",
    "anchoring_bias",
    "bias_table",
    "bias_verdict",
    "flip_rate",
    "inflation",
    "length_bias",
    "logged_frame",
    "order_bias",
    "padding_bias",
    "planted",
]
