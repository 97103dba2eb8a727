"""Counterfactual stopping: what the loops would have returned under other finish thresholds and iteration caps,
read off the logged trajectories by truncation (no model calls). Re-exported by `promptlab.analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..eval.stats import bootstrap_ci, exact_mean, mean_ci
from ..results.order import canonical_rows

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results

TRUNCATION_EXACT_LOOPS = frozenset({"p3ro", "creator_critic"})
"""Loops whose generation prompts depend on neither the finish threshold nor the iteration cap."""

DETAIL_COLUMNS = [
    "cell_id",
    "run_id",
    "threshold",
    "cap",
    "stop",
    "returned_iteration",
    "exact",
    "stopped_early",
    "grounded",
    "tokens",
    "cost_usd",
]
"""Columns of `counterfactual_stopping(..., per_run=True)` after the `by` columns."""


def counterfactual_stopping(
    results: Results | pd.DataFrame,
    thresholds: Sequence[float],
    caps: Sequence[int],
    *,
    by: str | Sequence[str] = "loop",
    runs: pd.DataFrame | None = None,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    per_run: bool = False,
    dedupe: bool = True,
) -> pd.DataFrame:
    """What the loops would have returned under each finish threshold x iteration cap (no model calls).

    Each logged run is truncated: it stops at the first iteration that ends `patience` consecutive
    iterations whose decision score (`decision_score`, else `average`) is >= the threshold, or at the cap.
    The returned prompt follows the loop's selection rule: the best decision score among the kept iterations,
    ties to the earliest (iterations without a decision score are skipped), or the last kept iteration when
    the run's `final` setting is "last". Its grounded score is that iteration's DEV-split `grounded_score`.
    Tokens and cost are those of the kept iterations (setup and final phases, which every rule pays alike,
    are left out).

    A run that scored its starting prompt as candidate 0 (iteration 0, `include_start`) is truncated as the
    loop runs: candidate 0 is always kept and may be returned, it ends the run when it reaches the threshold
    (and counts in Creator/Critic's patience), and the cap counts rewrites only, so cap 0 returns the
    starting prompt (the rule "do not refine"). `stop` and `iterations_mean` count rewrites.

    A run's `final` and `patience` (Creator/Critic's "stop after `patience` iterations in a row at or above
    the threshold"; loops without the setting use 1) come from, in order: its logged config (`configs`; read
    from the cells' runs.jsonl when `results` is a `Results`), a column of the runs frame (a grid parameter),
    and the loop config's default (`default_final`). A patience that is none of these is unknown: the row is
    computed with patience 1 and is exact only where every patience gives the same outcome (the threshold is
    not reached before the cap).

    When the result is exact: P³RO's and Creator/Critic's generation prompts depend on neither the threshold
    nor the cap, so the first k iterations of a logged run are what the loop would have done under any rule
    that stops at iteration k. A counterfactual is exact when the loop is one of those
    (`TRUNCATION_EXACT_LOOPS`), its patience is known (or does not matter, as above), and its stopping point
    lies inside the logged trajectory: the threshold is reached (with the patience) at some logged iteration
    i <= cap, or the cap is <= the number of logged iterations. Where the rule would run past the logged
    stop, the row uses the logged trajectory as it is and is counted in `n_runs` but NOT in `n_exact`; with
    `per_run=True` each run's `exact` flag is given. Runs of other loops (pes, pcee) are never exact.

    Args:
        results: A `Results`, or a trajectories frame (then pass `runs` and/or `configs` for the settings).
        thresholds: Finish thresholds on the 1-10 decision scale.
        caps: Iteration caps (>= 0: rewrites; 0 keeps only candidate 0, where runs scored one).
        by: Columns that group runs into the table's configurations (default the loop).
        runs: The runs frame when `results` is a frame.
        configs: run_id -> the run's logged config (`Run.config`; see `promptlab.results.run_configs`).
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
    by_cols = [by] if isinstance(by, str) else list(by)
    if any(c < 0 for c in caps):
        raise ValueError(f"caps must be >= 0, got {list(caps)}")
    traj, run_frame, logged = _inputs(results, runs, configs)
    detail = _detail(_iterations(traj, by_cols, dedupe), run_frame, logged, by_cols, thresholds, caps)
    return detail if per_run else _summarise(detail, by_cols)


def _inputs(
    results: Results | pd.DataFrame, runs: pd.DataFrame | None, configs: Mapping[str, Mapping[str, Any]] | None
) -> tuple[pd.DataFrame, pd.DataFrame | None, Mapping[str, Mapping[str, Any]]]:
    """(trajectories, runs frame or None, run_id -> logged config) of `counterfactual_stopping`'s arguments, the
    frames in the canonical order (`promptlab.results.order`)."""
    import pandas as pd

    from ..results.configs import run_configs

    traj = results if isinstance(results, pd.DataFrame) else results.trajectories
    run_frame = runs if runs is not None or isinstance(results, pd.DataFrame) else results.runs
    if configs is None and not isinstance(results, pd.DataFrame):
        configs = run_configs(results)
    return canonical_rows(traj), None if run_frame is None else canonical_rows(run_frame), configs or {}


def _detail(
    its: pd.DataFrame,
    run_frame: pd.DataFrame | None,
    configs: Mapping[str, Mapping[str, Any]],
    by_cols: list[str],
    thresholds: Sequence[float],
    caps: Sequence[int],
) -> pd.DataFrame:
    """Each run under each rule (`DETAIL_COLUMNS` after the `by` columns), runs in the order of `its`."""
    import pandas as pd

    decision = "decision_score" if "decision_score" in its.columns else "average"
    settings = _settings(its, run_frame, configs)
    rows: list[dict[str, Any]] = []
    for (cell, run_id), g in its.groupby(["cell_id", "run_id"], sort=False):
        last, patience = settings[(cell, run_id)]
        rows.extend(_truncated_rows(g, decision, by_cols, thresholds, caps, last=last, patience=patience))
    return pd.DataFrame(rows, columns=[*by_cols, *DETAIL_COLUMNS])


def _iterations(traj: pd.DataFrame, by_cols: list[str], dedupe: bool) -> pd.DataFrame:
    """The scored iterations of canonically ordered trajectories, in that order (each run's iterations in turn:
    the order is by cell, task, replicate and iteration, never by run id); with `dedupe`, per `by` group and
    (task_id, sample) only the run with the most logged iterations (of equally long ones, the first)."""
    from ..results.frames import iteration_frame

    its = iteration_frame(traj)
    if dedupe and len(its):
        longest = its.groupby(["cell_id", "run_id"], sort=False).agg(
            n=("iteration", "size"), **{c: (c, "first") for c in [*by_cols, "task_id", "sample"]}
        )
        longest = longest.reset_index().sort_values("n", ascending=False, kind="stable")
        keep = longest.drop_duplicates([*by_cols, "task_id", "sample"])[["cell_id", "run_id"]]
        its = its.merge(keep, on=["cell_id", "run_id"])
    return its


def _truncated_rows(
    g: pd.DataFrame,
    decision: str,
    by_cols: list[str],
    thresholds: Sequence[float],
    caps: Sequence[int],
    *,
    last: bool,
    patience: int | None,
) -> list[dict[str, Any]]:
    """One run's rows (`DETAIL_COLUMNS`): what it would have returned under each threshold x cap."""
    import pandas as pd

    first = g.iloc[0]
    key = {c: first[c] for c in by_cols}
    scores = [None if pd.isna(v) else float(v) for v in g[decision]]
    start = int(g["iteration"].iloc[0]) == 0  # candidate 0, the starting prompt, was scored
    grounded = g["grounded_score"].tolist() if "grounded_score" in g.columns else [None] * len(g)
    tokens = (g["input_tokens"].fillna(0) + g["output_tokens"].fillna(0)).tolist()
    costs = g["cost_usd"].tolist()
    rows: list[dict[str, Any]] = []
    for t in thresholds:
        for cap in caps:
            stop, early, exact = truncate(scores, t, cap, patience or 1, start=start)
            if patience is None:  # unknown: exact only when no patience would change the outcome
                exact = exact and (stop, early, exact) == truncate(scores, float("inf"), cap, start=start)
            pick = select(scores[:stop], last=last)
            g_val = grounded[pick] if pick is not None else None
            cost = costs[:stop]
            rows.append(
                {
                    **key,
                    "cell_id": first["cell_id"],
                    "run_id": first["run_id"],
                    "threshold": t,
                    "cap": cap,
                    "stop": stop - start,
                    "returned_iteration": None if pick is None else pick + 1 - start,
                    "exact": exact and first["loop"] in TRUNCATION_EXACT_LOOPS,
                    "stopped_early": early,
                    "grounded": None if pd.isna(g_val) else float(g_val),
                    "tokens": int(sum(tokens[:stop])),
                    "cost_usd": None if any(pd.isna(c) for c in cost) else float(sum(cost)),
                }
            )
    return rows


def _settings(
    its: pd.DataFrame, run_frame: pd.DataFrame | None, configs: Mapping[str, Mapping[str, Any]]
) -> dict[tuple[Any, Any], tuple[bool, int | None]]:
    """(cell_id, run_id) -> (returns the last kept iteration, patience or None when unknown)."""
    import pandas as pd

    columns: dict[tuple[Any, Any], dict[str, Any]] = {}
    if run_frame is not None:
        present = [c for c in ("final", "patience") if c in run_frame.columns]
        for rec in run_frame[["cell_id", "run_id", *present]].to_dict("records"):
            columns[(rec["cell_id"], rec["run_id"])] = {c: rec[c] for c in present if not pd.isna(rec[c])}
    out = {}
    loops = its.groupby(["cell_id", "run_id"], sort=False)["loop"].first()
    for (cell, run_id), loop in zip(loops.index, loops, strict=True):
        logged = {**columns.get((cell, run_id), {}), **configs.get(str(run_id), {})}
        final = logged.get("final") or default_final(str(loop))
        patience = logged.get("patience")
        if patience is None and (str(run_id) in configs or not _has_setting(str(loop), "patience")):
            patience = 1  # a logged config without the setting, or a loop without it: one iteration suffices
        out[(cell, run_id)] = (final == "last", None if patience is None else int(patience))
    return out


def default_final(loop: str) -> str:
    """The selection rule a loop uses when its config does not say: its config's `final` default, else "best".

    Looks the loop up through `promptlab.loops.get_loop`, which registers the built-in loops first (so the
    answer does not depend on which loop modules happen to be imported); an unknown loop gives "best"."""
    field = _field(loop, "final")
    return str(field.default) if field is not None and isinstance(field.default, str) else "best"


def _has_setting(loop: str, name: str) -> bool:
    """Whether the loop's config class has the field `name` (False for an unknown loop)."""
    return _field(loop, name) is not None


def _field(loop: str, name: str) -> Any:
    """The pydantic FieldInfo of the loop config's field `name`, or None (also for an unknown loop)."""
    from ..errors import ConfigError
    from ..loops.registry import get_loop

    try:
        spec = get_loop(loop)
    except ConfigError:
        return None
    return spec.config_cls.model_fields.get(name)


def truncate(
    scores: Sequence[float | None], threshold: float, cap: int, patience: int = 1, *, start: bool = False
) -> tuple[int, bool, bool]:
    """(number of logged scores kept, stopped by the threshold before the cap, stop inside the logged run).

    With `start`, scores[0] is the starting prompt's (candidate 0): it can end the run and counts in the
    streak, but the cap counts rewrites only (cap 0 keeps the start alone). The stop is the first score
    within the cap that ends `patience` consecutive scores >= `threshold` (a missing score breaks the
    streak, as in Creator/Critic's router), else the cap."""
    limit = min(cap + start, len(scores))
    streak = 0
    for i, s in enumerate(scores[:limit], start=1):
        streak = streak + 1 if s is not None and s >= threshold else 0
        if streak >= patience:
            return i, i - start < cap, True
    return limit, False, cap + start <= len(scores)


def select(scores: Sequence[float | None], *, last: bool = False) -> int | None:
    """0-based index of the returned iteration: the last one, or the best score with ties to the earliest."""
    if not scores:
        return None
    if last:
        return len(scores) - 1
    present = [(s, -i) for i, s in enumerate(scores) if s is not None]
    return -max(present)[1] if present else len(scores) - 1


def _summarise(detail: pd.DataFrame, by_cols: list[str]) -> pd.DataFrame:
    """The per-run rows summarised per `by` x threshold x cap (see `counterfactual_stopping`)."""
    import pandas as pd

    rows = []
    for key, g in detail.groupby([*by_cols, "threshold", "cap"], sort=True, dropna=False):
        gm, gn, glo, ghi = mean_ci(list(g["grounded"]))
        em, _, elo, ehi = mean_ci([float(v) for v in g["stopped_early"]])
        tokens = [float(v) for v in g["tokens"]]
        costs = None if g["cost_usd"].isna().any() else [float(v) for v in g["cost_usd"]]
        cost = [exact_mean(costs), *bootstrap_ci(costs)] if costs else [None, None, None]
        rows.append(
            [
                *key,
                len(g),
                int(g["exact"].sum()),
                gn,
                gm,
                glo,
                ghi,
                exact_mean(tokens),
                *bootstrap_ci(tokens),
                *cost,
                float(g["stop"].mean()),
                em,
                elo,
                ehi,
            ]
        )
    cols = [
        *by_cols,
        "threshold",
        "cap",
        "n_runs",
        "n_exact",
        "grounded_n",
        "grounded_mean",
        "grounded_ci_low",
        "grounded_ci_high",
        "tokens_mean",
        "tokens_ci_low",
        "tokens_ci_high",
        "cost_usd_mean",
        "cost_usd_ci_low",
        "cost_usd_ci_high",
        "iterations_mean",
        "stopped_early",
        "stopped_early_ci_low",
        "stopped_early_ci_high",
    ]
    out = pd.DataFrame(rows, columns=cols)
    for c in cols[len(by_cols) + 2 :]:
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


def rank_rules(table: pd.DataFrame) -> pd.DataFrame:
    """The exact rules of one configuration's `counterfactual_stopping` rows, best first: by grounded_mean
    (descending), then tokens_mean and cap (ascending). Thresholds that give a cap the same outcome on every run
    (same mean, CI, rewrites and tokens) are one row, their thresholds listed in `thresholds`; cap 0 is one row.

    Returns:
        Columns rank, cap, thresholds (sorted floats), grounded_n, grounded_mean, grounded_ci_low,
        grounded_ci_high, iterations_mean, tokens_mean, stopped_early; empty without exact grounded rows.
    """
    import pandas as pd

    t = table[table["grounded_mean"].notna() & (table["n_exact"] == table["n_runs"])]
    same = ["cap", "grounded_n", "grounded_mean", "grounded_ci_low", "grounded_ci_high", "iterations_mean"]
    same += ["tokens_mean", "stopped_early"]
    cols = ["rank", "cap", "thresholds", *same[1:]]
    if t.empty:
        return pd.DataFrame(columns=cols)
    rows = [
        {**dict(zip(same, key, strict=True)), "thresholds": sorted(float(v) for v in g["threshold"])}
        for key, g in t.groupby(same, sort=False, dropna=False)
    ]
    out = pd.DataFrame(rows).sort_values(["grounded_mean", "tokens_mean", "cap"], ascending=[False, True, True])
    out.insert(0, "rank", range(1, len(out) + 1))
    return out[cols].reset_index(drop=True)


__all__ = [
    "DETAIL_COLUMNS",
    "TRUNCATION_EXACT_LOOPS",
    "best_stopping_rule",
    "counterfactual_stopping",
    "default_final",
    "rank_rules",
    "select",
    "truncate",
]
