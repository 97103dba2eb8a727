"""Counterfactual stopping checked against a real grid: each run of a threshold x cap sweep next to what
`counterfactual_stopping` reads off the logged run with the same critic, task and sample (no model calls).

Where the counterfactual is exact (`TRUNCATION_EXACT_LOOPS`, stop inside the logged trajectory), the real run
must have kept the same rewrites and returned the same iteration, whose dev score is then the same; a run that
does not agree is a bug in the loop, the truncation rule or their shared settings. Re-exported by
`promptlab.analysis`; `scripts/compare_stopping` prints it for results/demo and results/stopping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .stopping import counterfactual_stopping

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results

KEYS = ["critic_model", "task_id", "sample"]
"""What pairs a grid run with a logged run: the same critic, task and replicate."""
RULE = ["threshold", "cap"]
"""A stopping rule: the grid's `finish_threshold` and `max_iterations`."""


def grid_runs(grid: Results) -> pd.DataFrame:
    """One row per run of a threshold x cap grid: KEYS, threshold, cap, the rewrites it kept (`stop`), the
    iteration it returned, that iteration's dev score (`grounded`) and the run's test score (`test`)."""
    import pandas as pd

    runs = grid.runs
    missing = [c for c in ("finish_threshold", "max_iterations") if c not in runs.columns]
    if missing:
        raise ValueError(f"{grid.path}: not a threshold x cap grid: its runs have no {', '.join(missing)} column")
    its = grid.iterations()
    dev = {(r["run_id"], int(r["iteration"])): r["grounded_score"] for r in its.to_dict("records")}
    rows = []
    for r in runs.to_dict("records"):
        kept = its[its["run_id"] == r["run_id"]]["iteration"]
        pick = None if pd.isna(r["final_iteration"]) else int(r["final_iteration"])
        rows.append(
            {
                **{k: r[k] for k in KEYS},
                "threshold": float(r["finish_threshold"]),
                "cap": int(r["max_iterations"]),
                "stop": int(kept.max()) if len(kept) else 0,
                "returned_iteration": pick,
                "grounded": dev.get((r["run_id"], pick)) if pick is not None else None,
                "test": r["final_test_score"],
            }
        )
    return pd.DataFrame(rows)


def check_counterfactual(logged: Results, grid: Results) -> pd.DataFrame:
    """Every grid run beside the counterfactual of its logged twin under the same rule.

    Returns:
        One row per grid run that has a logged twin: KEYS, threshold, cap, then `stop`, `returned_iteration`
        and `grounded` of the real run, the same three of the counterfactual suffixed `_cf`, `exact` (the
        counterfactual's flag) and `agree` (same stop, same returned iteration, same dev score).
    """
    real = grid_runs(grid)
    if real.empty:
        return real
    cf = counterfactual_stopping(
        logged, sorted(real["threshold"].unique()), sorted(real["cap"].unique()), by=KEYS, per_run=True
    )
    cf = cf[[*KEYS, *RULE, "stop", "returned_iteration", "grounded", "exact"]]
    both = real.merge(cf, on=[*KEYS, *RULE], suffixes=("", "_cf"))
    both["agree"] = [
        a["stop"] == a["stop_cf"]
        and _same(a["returned_iteration"], a["returned_iteration_cf"])
        and _same(a["grounded"], a["grounded_cf"])
        for a in both.to_dict("records")
    ]
    return both


def agreement_table(check: pd.DataFrame) -> pd.DataFrame:
    """Per critic x threshold x cap: n runs, n exact, n agreeing (of the exact), the mean dev score the real
    runs returned and the counterfactual's, and the real runs' mean test score."""
    g = check.groupby(["critic_model", *RULE], sort=True)
    out = g.agg(
        n=("agree", "size"),
        n_exact=("exact", "sum"),
        grid_dev=("grounded", "mean"),
        counterfactual_dev=("grounded_cf", "mean"),
        grid_test=("test", "mean"),
    )
    out.insert(2, "n_agree", check[check["exact"].astype(bool)].groupby(["critic_model", *RULE])["agree"].sum())
    out["n_agree"] = out["n_agree"].fillna(0).astype(int)
    return out.reset_index()


def _same(a: Any, b: Any) -> bool:
    """Two numbers are the same (both missing counts as the same)."""
    import pandas as pd

    if pd.isna(a) or pd.isna(b):
        return bool(pd.isna(a) and pd.isna(b))
    return abs(float(a) - float(b)) < 1e-9


__all__ = ["KEYS", "RULE", "agreement_table", "check_counterfactual", "grid_runs"]
