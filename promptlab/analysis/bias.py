"""Is the critic biased? Five probes of the judge biases a refinement loop is exposed to, each an estimate with
its n and a CI (95% for one probe alone; `bias_table` widens each critic's intervals so they hold together at
95%: FAMILY_ERROR). Pure functions over tidy frames; the re-asks that feed three of them are in
`promptlab.analysis.reask` (model calls, cached, with a budget).

More in docs/analysis.md, section "promptlab.analysis.bias".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..critics.simulated import simulated_critic
from ..results.order import canonical_rows
from .bias_intervals import Estimate, mean_interval, ols_interval, ternary_interval
from .bias_limits import detectable, end_shares, limited_verdict

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
    "at_bottom",
    "at_top",
    "detectable",
    "source",
]
"""Columns of `bias_table` (one row per critic x probe; n counts candidates, steps, pairs or re-asks; ci_level
is the confidence of that row's interval, 1 - SPENT_ERROR / the critic's probes; planted is the size a
simulated critic was built with, `planted`, NA for a model; at_bottom / at_top the share of the probe's scores at
1 / at 10, NA for order: above `bias_limits.SATURATED` the estimate likely understates the bias; detectable the
smallest bias the probe detects with 80% power at its n, `bias_limits.detectable`: an inconclusive row whose
detectable size is above the margin is underpowered; source where the interval came from, `source`: the logs or
re-asks)."""
FAMILY_ERROR = 0.05
"""The most often, for a critic with no bias at all, that `bias_table` calls any of its probes "biased". Five
probes at 95% each would call an unbiased critic biased on some probe about one time in four."""
SPENT_ERROR = 0.03
"""The error Bonferroni divides among a critic's m measured probes: each interval is at 1 - 0.03 / m (99.4% for
five). Less than FAMILY_ERROR because the probes' intervals are approximate at the few dozen observations a
sweep gives: at 1 - 0.05 / 5 each missed a true 0 in 1.0-1.7% of 300 scripted model critics (nominal 1%), and
together they called 6.0% of them biased (benchmarks/bias_model_critics.py); at 0.03 the family-wise rate
measured is in docs/analysis.md (Validity on model critics)."""


def length_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Score against candidate length at equal dev accuracy and iteration (columns run_id, iteration, score,
    accuracy, chars; and key: rows with one key are one ask of the critic, logged again, and count once,
    `distinct_asks`)."""
    import numpy as np
    import pandas as pd

    d = distinct_asks(frame.dropna(subset=["score", "accuracy", "chars", "iteration"]))
    levels = pd.get_dummies(d["accuracy"].astype(float).round(9), dtype=float)
    x = np.column_stack([d["chars"].to_numpy(float) / 100, d["iteration"].to_numpy(float), levels.to_numpy()])
    if len(x) and np.ptp(x[:, 1]) == 0:  # one iteration only: nothing to hold fixed
        x = np.delete(x, 1, axis=1)
    what = "candidates whose length varies at equal accuracy"
    return ols_interval(d["score"].to_numpy(float), x, d["run_id"], 0, what, confidence)


def distinct_asks(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per ask of the critic: rows with the same `key` (the same text shown at the same sample, which a
    model critic answers the same, `bias_asks.text_key`) averaged into one (score and iteration; clustered
    with the run that logged it first). Without a key column, the frame as it is."""
    if "key" not in frame.columns or frame["key"].isna().any():
        return frame
    first = [c for c in ("critic_model", "run_id", "accuracy", "chars") if c in frame.columns]
    mean = [c for c in ("score", "iteration") if c in frame.columns]
    return frame.groupby("key", sort=False, as_index=False).agg(
        {**dict.fromkeys(first, "first"), **dict.fromkeys(mean, "mean")}
    )


def inflation(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Score change at no change in accuracy (nor in length, when `chars` is given), step by step along each
    run (columns run_id, iteration, score, accuracy, optionally chars and key: a step between the same two
    asks, logged again in another run, counts once, with the run that comes first in the frame; runs are taken
    in the frame's order, never by run id: `logged_frame` gives them in the canonical order)."""
    import numpy as np
    import pandas as pd

    cols = ["score", "accuracy", *(["chars"] if "chars" in frame.columns and frame["chars"].notna().all() else [])]
    d = frame.dropna(subset=["score", "accuracy"])
    d = d.iloc[np.lexsort((d["iteration"].to_numpy(float), pd.factorize(d["run_id"])[0]))]
    steps = d.groupby("run_id", sort=False)[cols].diff().assign(run_id=d["run_id"])
    if "key" in d.columns and d["key"].notna().all():
        steps = steps.assign(step=d.groupby("run_id", sort=False)["key"].shift() + ">" + d["key"])
        steps = steps.drop_duplicates("step")
    steps = steps.dropna(subset=cols)
    x = np.column_stack([np.ones(len(steps)), steps[cols[1:]].to_numpy(float) / [1, 100][: len(cols) - 1]])
    return ols_interval(
        steps["score"].to_numpy(float), x, steps["run_id"], 0, "consecutive scored iterations", confidence
    )


def padding_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Score change per 100 characters of neutral padding the critic was shown (columns plain, padded,
    added_chars): the slope through the origin of (padded - plain) on added_chars / 100, so a candidate shown
    little padding weighs little (with equal padding everywhere: the mean of the per-candidate ratios)."""
    d = frame.dropna(subset=["plain", "padded"])
    d = d[d["added_chars"] > 0]
    x = (d["added_chars"].to_numpy(float) / 100).reshape(-1, 1)
    what = "candidates with a plain and a padded score"
    return ols_interval((d["padded"] - d["plain"]).to_numpy(float), x, None, 0, what, confidence)


def order_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """First-position preference over pairs judged in both orders (columns pair, swapped, first_won; and draw
    when a pair was judged several times). Each pair judged once reads -1, 0 or +1 (first-shown won in none,
    one or both orders, minus 1): their mean with Tango's score interval (`bias_intervals.ternary_interval`). A
    pair judged several times (a simulated critic's draws) is one observation, its share of first-shown wins in
    each order averaged over the draws: their mean with a t interval (draws of one pair are not independent)."""
    d = frame.dropna(subset=["first_won"])
    shares = d.assign(first_won=d["first_won"].astype(float)).groupby(["pair", "swapped"])["first_won"].mean()
    both = shares.unstack("swapped")
    values = (both[0] + both[1] - 1).dropna().tolist() if {0, 1} <= set(both.columns) else []
    what = "pairs judged in both orders"
    if all(v in (-1.0, 0.0, 1.0) for v in values) and ("draw" not in d.columns or d["draw"].nunique() <= 1):
        return ternary_interval(values, what, confidence)
    return mean_interval(values, what, confidence)


def flip_rate(frame: pd.DataFrame) -> tuple[float | None, int]:
    """(share of a pair's draws judged in both orders whose verdict changes candidate when swapped, pairs). A
    tie (column tie) is a verdict of its own: tied both ways is no flip, a tie one way and a winner the other is."""
    tie = frame["tie"].fillna(False).astype(bool) if "tie" in frame.columns else frame["first_won"].isna() & False
    d = frame[frame["first_won"].notna() | tie]
    named_a = d["first_won"].fillna(False).astype(bool) == (d["swapped"] == 0)  # the first shown is a unswapped
    d = d.assign(verdict=named_a.map({True: "a", False: "b"}).where(~tie[d.index], "tie"))
    both = d.groupby(["pair", "draw"] if "draw" in d.columns else ["pair"])["verdict"].agg(["nunique", "count"])
    both = both[both["count"] == 2]
    return (float((both["nunique"] != 1).mean()) if len(both) else None), both.index.get_level_values("pair").nunique()


def anchoring_bias(frame: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Weight towards a shown previous score (columns plain, anchored, anchor)."""
    import numpy as np

    d = frame.dropna(subset=["plain", "anchored", "anchor"])
    x = np.column_stack([np.ones(len(d)), d["anchor"].to_numpy(float)])
    what = "re-asks with and without a shown score"
    return ols_interval((d["anchored"] - d["plain"]).to_numpy(float), x, None, 1, what, confidence)


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
MIN_N = dict.fromkeys(PROBES, 10)
"""The fewest observations a probe gives a verdict from ("Not enough data" below): the intervals' levels are
checked by simulation down to about 10 (tests/analysis/test_bias_intervals.py; the few-candidates case of
benchmarks/bias_model_critics.py), and a handful of values can all agree by chance."""
NOUNS = {
    "length": "distinct candidates",
    "inflation": "steps",
    "padding": "padded candidates",
    "order": "pairs judged in both orders",
    "anchoring": "candidates",
}
"""What a probe's n counts."""


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
    """The finding in words: not enough data (fewer than MIN_N observations, or no interval: data without
    variation), biased (CI excludes 0), no evidence of bias (CI inside +/- the margin) or inconclusive."""
    if est.n < MIN_N[probe]:
        return f"Not enough data: {est.n} {NOUNS[probe]}, the probe needs at least {MIN_N[probe]}"
    if est.value is None or est.low is None or est.high is None:
        return f"Not enough data: {est.why}; a verdict needs data that vary, and at least {MIN_N[probe]} {NOUNS[probe]}"
    margin = MARGINS[probe]
    if est.low > 0 or est.high < 0:
        return f"Biased: the CI excludes 0 ({'above' if est.low > 0 else 'below'})"
    if -margin < est.low and est.high < margin:
        return f"No evidence of bias: the CI lies within +/-{margin:g}"
    return f"Inconclusive: the CI spans 0 but reaches beyond +/-{margin:g}"


def bias_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every probe that has data, per critic: `BIAS_COLUMNS`. A critic's intervals are simultaneous: each at
    1 - SPENT_ERROR / (the probes measured for that critic), so "biased" on any probe is at most a family-wise 5% error
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
            + [None] * 3
            + ["none: the re-asks failed"]
            for p in REASKED
        ]
    probed = [
        (probe, str(critic), g)
        for probe, frame in frames.items()
        if probe != "skipped" and len(frame)
        for critic, g in frame.groupby("critic_model", sort=True)
    ]
    family = pd.Series([critic for _, critic, _ in probed]).value_counts().to_dict()
    rows += [_row(probe, critic, g, 1 - SPENT_ERROR / family[critic]) for probe, critic, g in probed]
    out = pd.DataFrame(rows, columns=BIAS_COLUMNS).sort_values(["critic_model", "probe"], kind="stable")
    out = out.reset_index(drop=True)
    for c in ("estimate", "ci_low", "ci_high", "margin", "ci_level", "planted", "at_bottom", "at_top", "detectable"):
        out[c] = out[c].astype("Float64")
    out["n"] = out["n"].astype("Int64")
    for c in ("critic_model", "probe", "unit", "finding", "source"):
        out[c] = out[c].astype("string")
    return out


def _row(probe: str, critic: str, g: pd.DataFrame, confidence: float) -> list[Any]:
    """One row of `bias_table`: the probe's estimate for one critic at `confidence`, its verdict with what limits
    it (`bias_limits`), the size planted in a simulated critic, and where its data came from."""
    est = PROBES[probe](g, confidence)
    bottom, top = end_shares(probe, g)
    mde = detectable(est.low, est.high, confidence)
    finding = limited_verdict(bias_verdict(probe, est), MARGINS[probe], (bottom, top), mde, (est.n, NOUNS[probe]))
    if probe == "order":
        rate, n = flip_rate(g)
        draws = int(g["draw"].nunique()) if "draw" in g.columns else 1
        each = f" (each judged {draws} times)" if draws > 1 else ""
        finding += f"; {rate:.0%} of {n} pairs{each} flip under swap" if rate is not None else ""
    if probe == "padding" and "why_not" in g.columns and g["why_not"].notna().any():
        why = g["why_not"].dropna()
        finding += f"; {len(why)} candidates not padded (the padding would be out of the critic's view: {why.iloc[0]})"
    size = (planted(critic) or {}).get(probe)
    values = [est.value, est.n, est.low, est.high, MARGINS[probe], finding, confidence, size, bottom, top, mde]
    return [critic, probe, UNITS[probe], *values, source(probe, critic)]


def source(probe: str, critic: str) -> str:
    """Where a probe's interval comes from: "logs" (the logged scores) or "re-asks" (new asks of the critic:
    model calls, or a simulated critic's SIM_DRAWS free draws)."""
    if probe not in REASKED:
        return "logs"
    return "re-asks (simulated, averaged draws)" if simulated_critic(critic) is not None else "re-asks"


def logged_frame(trajectories: pd.DataFrame, chars: pd.DataFrame) -> pd.DataFrame:
    """One row per critic x run x iteration from the logs, in the canonical order of the trajectories' rows
    (`promptlab.results.order`): critic_model, run_id, iteration, score (the critic's
    own mean score over its criteria), accuracy (the dev score), chars (the characters of the candidate the
    critic was shown: all of it for a simulated critic, what the loop's prompt showed a model critic) and key
    (the ask: `bias_asks.text_key` of the text shown; rows with one key are one observation).

    Args:
        trajectories: `Results.trajectories`.
        chars: run_id, iteration, chars of each logged candidate, and optionally shown, key and shown_key
            (`promptlab.analysis.bias_asks.candidate_lengths`).
    """
    import pandas as pd

    cols = ["critic_model", "run_id", "iteration", "score", "accuracy", "chars", "key"]
    need = {"score", "grounded_score", "critic_model", "run_id", "iteration"}
    if trajectories.empty or not need <= set(trajectories.columns):
        return pd.DataFrame(columns=cols)
    t = canonical_rows(trajectories)  # runs in the canonical order, not by run id: which run an ask counts for
    t = t[t["score"].notna() & t["grounded_score"].notna()]
    per = t.groupby(["critic_model", "run_id", "iteration"], as_index=False, sort=False).agg(
        score=("score", "mean"), accuracy=("grounded_score", "first")
    )
    out = per.merge(chars, on=["run_id", "iteration"], how="left")
    model = out["critic_model"].astype(str).map(lambda c: simulated_critic(c) is None).astype(bool)
    if "shown" in out.columns:
        out["chars"] = out["chars"].where(~model, out["shown"])
    if "key" in out.columns and "shown_key" in out.columns:
        out["key"] = out["key"].where(~model, out["shown_key"])
    out = out.assign(key=out["key"] if "key" in out.columns else None)
    return out[cols].astype({"score": float, "accuracy": float, "chars": float})


__all__ = [
    "BIAS_COLUMNS",
    "MARGINS",
    "PLANTED",
    "MIN_N",
    "NOUNS",
    "PROBES",
    "REASKED",
    "SPENT_ERROR",
    "UNITS",
    "anchoring_bias",
    "bias_table",
    "bias_verdict",
    "distinct_asks",
    "flip_rate",
    "inflation",
    "length_bias",
    "logged_frame",
    "order_bias",
    "padding_bias",
    "planted",
    "source",
]
