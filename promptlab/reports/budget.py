"""The report's equal-budget finding: which configuration leads at which budget, from `analysis.equal_budget`
(the table behind budget_curve.png) and `analysis.compare` of what the runs would return at each point (the
leader against the runner-up, paired over task x sample, Holm-corrected over every pair at that point).

The budget unit is the one the runs were budgeted in: calls when every run's config sets `budget_calls` and none
`budget_tokens`, else tokens. The configurations are the report's (`config_columns`), without the budget fields
(`budget_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..analysis.budget import Unit, equal_budget
from ..analysis.paired import compare
from ..results.configs import config_columns, config_labels, run_configs

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results

BUDGET_PARAMS = ("budget_calls", "budget_tokens")
"""Params a budget comparison replaces: left out of its configurations."""


@dataclass
class BudgetFindings:
    """What a results directory says about its configurations at equal budget."""

    unit: Unit
    """'tokens' or 'calls'."""
    table: pd.DataFrame
    """`analysis.equal_budget` by configuration and point, with the configuration's label in column `config`."""
    leaders: list[dict[str, Any]] = field(default_factory=list)
    """Per point: the leader by mean test score, its mean and CI, and its paired lead over the runner-up (or, when
    several configurations share the top mean, `tied`: their labels, and no leader)."""


def budget_findings(results: Results) -> BudgetFindings | None:
    """The equal-budget finding of a results directory; None when no run records incumbents with a spend (PES
    and PCEE runs, records made before budgets) or there is no grounded score."""
    traj, runs = results.trajectories, results.runs
    if (
        traj.empty
        or not {"incumbent", "cum_tokens"} <= set(traj.columns)
        or traj["incumbent"].isna().all()
        or traj["grounded_score"].isna().all()
    ):
        return None
    configs = run_configs(results)
    calls_only = bool(configs) and all(
        c.get("budget_calls") is not None and c.get("budget_tokens") is None for c in configs.values()
    )
    unit: Unit = "calls" if calls_only else "tokens"
    cols = budget_columns(runs, traj)
    detail = equal_budget(traj, unit, by=cols, runs=runs, per_run=True)
    table = equal_budget(traj, unit, by=cols, runs=runs)
    table.insert(0, "config", config_labels(table, cols))
    leaders = []
    for point, g in table.groupby("point", sort=True):
        scored = g[g["test_mean"].notna()].sort_values(["test_mean", "config"], ascending=[False, True])
        if scored.empty:
            continue
        top = scored.iloc[0].to_dict()
        tied = [str(c) for c in scored[scored["test_mean"] == top["test_mean"]]["config"]]
        row: dict[str, Any] = {
            "point": point,
            "leader": top["config"],
            "mean": top["test_mean"],
            "low": top["test_ci_low"],
            "high": top["test_ci_high"],
            "n": top["test_n"],
            "runner_up": None,
            "tied": tied if len(tied) > 1 else [],
        }
        if len(scored) > 1 and len(tied) == 1:
            second = scored.iloc[1]["config"]
            pairs = compare(detail[detail["point"] == point], by=cols, metric="test")
            match = pairs[
                ((pairs["a"] == second) & (pairs["b"] == top["config"]))
                | ((pairs["a"] == top["config"]) & (pairs["b"] == second))
            ]
            if len(match) and not _missing(match.iloc[0]["estimate"]):
                m = match.iloc[0]
                flip = m["b"] != top["config"]  # compare gives b - a; the lead is leader - runner-up
                est, lo, hi = (
                    (0.0 - m["estimate"], 0.0 - m["ci_high"], 0.0 - m["ci_low"])
                    if flip
                    else (m["estimate"], m["ci_low"], m["ci_high"])
                )
                row.update(runner_up=second, lead=est, lead_low=lo, lead_high=hi, pairs=m["n"], p_holm=m["p_holm"])
        leaders.append(row)
    return BudgetFindings(unit=unit, table=table, leaders=leaders)


def budget_columns(runs: pd.DataFrame, traj: pd.DataFrame) -> list[str]:
    """The columns naming a configuration at equal budget: the report's, without the budget fields and without
    columns that only differ between loops (a loop's own score source names nothing more than the loop)."""
    cols = [c for c in config_columns(runs) if c not in BUDGET_PARAMS and c in traj.columns]
    if "loop" not in cols:
        return cols
    within = runs.groupby("loop", dropna=False)
    return [c for c in cols if c == "loop" or (within[c].nunique(dropna=False) > 1).any()]


def _missing(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def budget_markdown(found: BudgetFindings | None, verdict: Any, ci: Any, p: Any) -> list[str]:
    """The lines of summary.md's equal-budget section (`verdict`, `ci` and `p` format as the other findings)."""
    lines = ["### 4. Which loop leads at equal budget? (test split, truncating each run at the spend)", ""]
    if found is None:
        return [
            *lines,
            "No run records what it would return at each spend (incumbents), so there is no equal-budget comparison.",
            "",
        ]
    lines += [
        f"Budget in {found.unit} (every call but test-split measurement). At each point, each run returns the "
        "prompt its own rule held then; the leader has the highest mean test accuracy, and its lead over the "
        "runner-up is paired over the same task and sample (Holm-corrected over every pair at that point).",
        "",
        f"| {found.unit} | leader (mean test accuracy, n runs) | lead over the runner-up (n pairs, Holm p) | verdict |",
        "|---|---|---|---|",
    ]
    for r in found.leaders:
        mean = f"{r['leader']}: {ci(r['mean'], r['low'], r['high'], '')}, n={r['n']}"
        if r["tied"]:
            lines.append(
                f"| {r['point']:,.0f} | tie at {ci(r['mean'], None, None, '')}: {', '.join(r['tied'])} | "
                f"(no lead: {len(r['tied'])} configurations share the top mean) | **No leader: a tie** |"
            )
            continue
        if r.get("runner_up") is None or r.get("lead") is None:
            lines.append(f"| {r['point']:,.0f} | {mean} | (no runner-up) | - |")
            continue
        answer = verdict(
            r["lead_low"], r["lead_high"], up=f"{r['leader']} leads", down=f"{r['runner_up']} leads", p_holm=r["p_holm"]
        )
        lines.append(
            f"| {r['point']:,.0f} | {mean} | over {r['runner_up']}: {ci(r['lead'], r['lead_low'], r['lead_high'])}"
            f" ({r['pairs']} pairs, p {p(r['p_holm'])}) | **{answer}** |"
        )
    return [*lines, ""]


__all__ = ["BUDGET_PARAMS", "BudgetFindings", "budget_columns", "budget_findings", "budget_markdown"]
