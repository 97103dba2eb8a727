"""Findings over sweep results: is the critic calibrated, when should a loop stop, which configuration wins.

Pure functions over the tidy frames of `promptlab.results` (no model calls), except `reliability()`, which
re-asks the critics (see `promptlab.reliability`). Every estimate comes with its n and a 95% CI:

- `calibration(trajectories)`: Spearman and Kendall correlation of the critic's score against the grounded
  (dev-split) score, per critic model and criterion, with percentile-bootstrap CIs.
- `counterfactual_stopping(results, thresholds, caps)`: what the loops would have returned under other stopping
  rules, by truncating the logged trajectories.
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
from .stats import BOOTSTRAP_RESAMPLES, SEED, bootstrap_ci, mean_ci

if TYPE_CHECKING:
    import pandas as pd

    from .results import Results

ALL = "(all)"
"""Label of a pooled row (all critics, or the iteration average rather than one criterion)."""
TRUNCATION_EXACT_LOOPS = frozenset({"p3ro", "creator_critic"})
"""Loops whose generation prompts depend on neither the finish threshold nor the iteration cap."""


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


# counterfactual stopping ------------------------------------------------------------------------
def counterfactual_stopping(results: Results | pd.DataFrame, thresholds: Sequence[float],
                            caps: Sequence[int], *, by: str | Sequence[str] = "loop",
                            runs: pd.DataFrame | None = None, per_run: bool = False,
                            dedupe: bool = True) -> pd.DataFrame:
    """What the loops would have returned under each finish threshold x iteration cap (no model calls).

    Each logged run is truncated: it stops at the first iteration whose decision score (`decision_score`,
    else `average`) is >= the threshold, or at the cap. The returned prompt follows the loop's selection
    rule: the best decision score among the kept iterations, ties to the earliest (iterations without a
    decision score are skipped), or the last kept iteration when the run's `final` parameter (a column of
    the runs frame) is "last"; without that column, the loop config's default `final` (`default_final`).
    Its grounded score is that iteration's dev-split `grounded_score`. Tokens and cost are those of the kept
    iterations (setup and final phases, which every rule pays alike, are left out).

    When the result is exact: P³RO's and Creator/Critic's generation prompts depend on neither the threshold
    nor the cap, so the first k iterations of a logged run are what the loop would have done under any rule
    that stops at iteration k. A counterfactual is exact when the loop is one of those
    (`TRUNCATION_EXACT_LOOPS`) and its stopping point lies inside the logged trajectory: the threshold is
    reached at some logged iteration i <= cap, or the cap is <= the number of logged iterations. Where
    the rule would run past the logged stop (a cap above it and no logged iteration reaching the threshold),
    the row uses the logged trajectory as it is and is counted in `n_runs` but NOT in `n_exact`; with
    `per_run=True` each run's `exact` flag is given. Runs of other loops (pes, pcee) are never exact.

    Args:
        results: A `Results`, or a trajectories frame (then pass `runs` for the `final` parameter).
        thresholds: Finish thresholds on the 1-10 decision scale.
        caps: Iteration caps (>= 1).
        by: Columns that group runs into the table's configurations (default the loop).
        runs: The runs frame when `results` is a frame.
        per_run: Return one row per run x threshold x cap instead of the summary.
        dedupe: Within each `by` group keep, per (task_id, sample), only the run with the most logged
            iterations (sweeps over thresholds and caps log the same task several times; counting each once
            avoids double counting, and the longest log keeps the most rules exact).

    Returns:
        One row per `by` x threshold x cap: n_runs, n_exact, grounded_n (runs whose returned prompt has a
        grounded score), grounded_mean, grounded_ci_low, grounded_ci_high (bootstrap), tokens_mean with
        tokens_ci_low/high, cost_usd_mean with cost_usd_ci_low/high (<NA> when some cost is unknown),
        iterations_mean, stopped_early (fraction stopped by the threshold before the cap),
        stopped_early_ci_low, stopped_early_ci_high (Wilson). The n of every mean is n_runs (grounded_n for
        the grounded score).
    """
    import pandas as pd

    from .results import iteration_frame

    traj = results if isinstance(results, pd.DataFrame) else results.trajectories
    run_frame = runs if runs is not None or isinstance(results, pd.DataFrame) else results.runs
    by_cols = [by] if isinstance(by, str) else list(by)
    if any(c < 1 for c in caps):
        raise ValueError(f"caps must be >= 1, got {list(caps)}")
    its = iteration_frame(traj).sort_values(["cell_id", "run_id", "iteration"])
    if dedupe and len(its):
        longest = its.groupby(["cell_id", "run_id"], sort=False).agg(
            n=("iteration", "size"), **{c: (c, "first") for c in [*by_cols, "task_id", "sample"]})
        longest = longest.reset_index().sort_values("n", ascending=False, kind="stable")
        keep = longest.drop_duplicates([*by_cols, "task_id", "sample"])[["cell_id", "run_id"]]
        its = its.merge(keep, on=["cell_id", "run_id"])
    decision = "decision_score" if "decision_score" in its.columns else "average"
    last: dict[tuple[Any, Any], bool] = {}
    if run_frame is not None and "final" in run_frame.columns:
        last = {(c, r): f == "last" for c, r, f in zip(run_frame["cell_id"], run_frame["run_id"],
                                                        run_frame["final"].fillna(""), strict=True)}
    defaults = {loop: default_final(str(loop)) == "last" for loop in its["loop"].dropna().unique()}
    rows: list[dict[str, Any]] = []
    for (cell, run_id), g in its.groupby(["cell_id", "run_id"], sort=False):
        first = g.iloc[0]
        key = {c: first[c] for c in by_cols}
        scores = [None if pd.isna(v) else float(v) for v in g[decision]]
        grounded = g["grounded_score"].tolist() if "grounded_score" in g.columns else [None] * len(g)
        tokens = (g["input_tokens"].fillna(0) + g["output_tokens"].fillna(0)).tolist()
        costs = g["cost_usd"].tolist()
        for t in thresholds:
            for cap in caps:
                stop, early, exact = truncate(scores, t, cap)
                pick = select(scores[:stop], last=last.get((cell, run_id), defaults.get(first["loop"], False)))
                g_val = grounded[pick] if pick is not None else None
                cost = costs[:stop]
                rows.append({**key, "cell_id": cell, "run_id": run_id, "threshold": t, "cap": cap,
                             "stop": stop, "returned_iteration": None if pick is None else pick + 1,
                             "exact": exact and first["loop"] in TRUNCATION_EXACT_LOOPS,
                             "stopped_early": early, "grounded": None if pd.isna(g_val) else float(g_val),
                             "tokens": int(sum(tokens[:stop])),
                             "cost_usd": None if any(pd.isna(c) for c in cost) else float(sum(cost))})
    detail = pd.DataFrame(rows, columns=[*by_cols, "cell_id", "run_id", "threshold", "cap", "stop",
                                         "returned_iteration", "exact", "stopped_early", "grounded", "tokens",
                                         "cost_usd"])
    if per_run:
        return detail
    return _summarise_counterfactual(detail, by_cols)


def default_final(loop: str) -> str:
    """The selection rule a loop uses when its config does not say: its config's `final` default, else "best"."""
    from .loops import LOOPS

    spec = LOOPS.get(loop)
    field = spec.config_cls.model_fields.get("final") if spec is not None else None
    return str(field.default) if field is not None and isinstance(field.default, str) else "best"


def truncate(scores: Sequence[float | None], threshold: float, cap: int) -> tuple[int, bool, bool]:
    """(number of iterations kept, stopped by the threshold before the cap, stop inside the logged run)."""
    limit = min(cap, len(scores))
    for i, s in enumerate(scores[:limit], start=1):
        if s is not None and s >= threshold:
            return i, i < cap, True
    return limit, False, cap <= len(scores)


def select(scores: Sequence[float | None], *, last: bool = False) -> int | None:
    """0-based index of the returned iteration: the last one, or the best score with ties to the earliest."""
    if not scores:
        return None
    if last:
        return len(scores) - 1
    present = [(s, -i) for i, s in enumerate(scores) if s is not None]
    return -max(present)[1] if present else len(scores) - 1


def _summarise_counterfactual(detail: pd.DataFrame, by_cols: list[str]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for key, g in detail.groupby([*by_cols, "threshold", "cap"], sort=True, dropna=False):
        gm, gn, glo, ghi = mean_ci(list(g["grounded"]))
        em, _, elo, ehi = mean_ci([float(v) for v in g["stopped_early"]])
        tokens = [float(v) for v in g["tokens"]]
        costs = None if g["cost_usd"].isna().any() else [float(v) for v in g["cost_usd"]]
        cost = [sum(costs) / len(costs), *bootstrap_ci(costs)] if costs else [None, None, None]
        rows.append([*key, len(g), int(g["exact"].sum()), gn, gm, glo, ghi, sum(tokens) / len(tokens),
                     *bootstrap_ci(tokens), *cost, float(g["stop"].mean()), em, elo, ehi])
    cols = [*by_cols, "threshold", "cap", "n_runs", "n_exact", "grounded_n", "grounded_mean", "grounded_ci_low",
            "grounded_ci_high", "tokens_mean", "tokens_ci_low", "tokens_ci_high", "cost_usd_mean",
            "cost_usd_ci_low", "cost_usd_ci_high", "iterations_mean", "stopped_early", "stopped_early_ci_low",
            "stopped_early_ci_high"]
    out = pd.DataFrame(rows, columns=cols)
    for c in cols[len(by_cols) + 2:]:
        out[c] = out[c].astype("Int64" if c in ("n_runs", "n_exact", "grounded_n") else "Float64")
    return out


def best_stopping_rule(table: pd.DataFrame) -> dict[str, Any] | None:
    """The best rule of a `counterfactual_stopping` table and the cheapest rule as good as it.

    Returns:
        None without grounded scores; else {"best": row with the highest grounded_mean, "cheapest": the row
        with the lowest cost (cost_usd_mean when known, else tokens_mean) whose grounded_mean is at least the
        best row's grounded_ci_low, "cost": the column used}. Only rows whose runs are all exact count.
    """
    t = table[table["grounded_mean"].notna() & (table["n_exact"] == table["n_runs"])]
    if t.empty:
        return None
    cost = "cost_usd_mean" if t["cost_usd_mean"].notna().all() and (t["cost_usd_mean"] > 0).any() else "tokens_mean"
    best = t.sort_values(["grounded_mean", cost], ascending=[False, True], kind="stable").iloc[0]
    good = t[t["grounded_mean"] >= best["grounded_ci_low"]]
    cheapest = good.sort_values([cost, "grounded_mean"], ascending=[True, False], kind="stable").iloc[0]
    return {"best": best.to_dict(), "cheapest": cheapest.to_dict(), "cost": cost}


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


__all__ = ["ALL", "PROVENANCE_CHECKS", "TRUNCATION_EXACT_LOOPS", "best_stopping_rule", "calibration", "compare",
           "counterfactual_stopping", "default_final", "delta_table", "provenance_warnings", "select", "sign_flip_p", "truncate"]
