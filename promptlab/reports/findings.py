"""The findings of a results directory, as tables, charts and the "Findings" section of summary.md.

`findings(results)` gathers, from the frames and the runs' logged configs (no model calls): the test-split
delta per configuration (`analysis.delta_table`), the critic's calibration (`analysis.calibration`), the
counterfactual stopping table per configuration (`analysis.counterfactual_stopping`, whose grounded score is
the returned prompt's DEV-split score) with its best rule per unit of cost, and the provenance warnings. Results without grounded data (tasks without examples) give empty tables and a
"no grounded data" sentence instead of an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..analysis.critic import ALL, calibration
from ..analysis.paired import delta_table
from ..analysis.provenance import provenance_warnings
from ..analysis.stopping import best_stopping_rule, counterfactual_stopping
from ..results.configs import config_columns, config_labels
from ..results.store import run_configs

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results

STOPPING_PARAMS = ("finish_threshold", "max_iterations")
"""Params the counterfactual replaces: they are left out of its configurations."""
THRESHOLDS = (5.0, 6.0, 7.0, 8.0, 9.0, 10.0)
"""Finish thresholds of the report's counterfactual grid (plus every threshold the sweep used)."""


@dataclass
class Findings:
    """What a results directory says about refinement, the critic and stopping."""

    deltas: pd.DataFrame
    """`analysis.delta_table` of the runs (test-split gain per configuration); empty without grounded data."""
    calibration: pd.DataFrame
    """`analysis.calibration` of the trajectories; empty without grounded scores."""
    counterfactual: pd.DataFrame
    """`analysis.counterfactual_stopping` per configuration (column `config`); empty without grounded scores."""
    best_rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Configuration label -> `analysis.best_stopping_rule` of its counterfactual rows."""
    warnings: list[str] = field(default_factory=list)
    """`analysis.provenance_warnings` of the runs."""

    @property
    def grounded(self) -> bool:
        """Whether any grounded number was found."""
        return not (self.deltas.empty and self.calibration.empty and self.counterfactual.empty)


def findings(results: Results) -> Findings:
    """The findings of a loaded results directory (see the module docstring)."""
    import pandas as pd

    runs, traj = results.runs, results.trajectories
    deltas = delta_table(runs) if len(runs) else pd.DataFrame()
    cal = calibration(traj)
    counterfactual = pd.DataFrame()
    has_grounded = "grounded_score" in traj.columns and traj["grounded_score"].notna().any()
    if has_grounded:
        cols = [c for c in config_columns(runs) if c not in STOPPING_PARAMS and c in traj.columns]
        labelled = traj.assign(config=config_labels(traj, cols) if cols else "all runs")
        logged = sorted(float(t) for t in runs["finish_threshold"].dropna().unique()) \
            if "finish_threshold" in runs.columns else []
        caps = range(1, int(traj["iteration"].max()) + 1)
        counterfactual = counterfactual_stopping(labelled, sorted({*THRESHOLDS, *logged}), list(caps),
                                                          by="config", runs=runs, configs=run_configs(results))
    best = {}
    for label, g in (counterfactual.groupby("config", sort=True) if len(counterfactual) else []):
        rule = best_stopping_rule(g)
        if rule is not None:
            best[str(label)] = rule
    return Findings(deltas=deltas, calibration=cal, counterfactual=counterfactual, best_rules=best,
                    warnings=provenance_warnings(runs))


def findings_markdown(f: Findings) -> list[str]:
    """The lines of summary.md's "Findings" section (and its provenance warning, when any)."""
    lines = ["## Findings", ""]
    if f.warnings:
        lines += ["**Warning: this results directory mixes provenance.**", ""]
        lines += [f"- {w}" for w in f.warnings] + [""]
    if not f.grounded:
        return [*lines, "No grounded data: the runs' tasks carry no examples, so there is no test-split delta, "
                        "calibration or counterfactual stopping to report.", ""]
    lines += ["### Does refinement beat the original prompt? (test split, final minus baseline)", ""]
    if f.deltas.empty:
        lines += ["No grounded data on the test split (no run has a delta).", ""]
    for r in f.deltas.itertuples():
        lines.append(f"- {r.label}: delta {_ci(r.estimate, r.ci_low, r.ci_high)}, n={r.n} runs, "
                     f"p (sign-flip, Holm)={_p(r.p_holm)}")
    lines += ["", "### Does the critic's score track accuracy? (Spearman r, dev split)", ""]
    pooled = f.calibration[f.calibration["criterion"] == ALL] if len(f.calibration) else f.calibration
    if pooled.empty:
        lines.append("No iteration has both a critic score and a grounded score.")
    for r in pooled.itertuples():
        lines.append(f"- {r.critic_model}: r={_ci(r.spearman, r.spearman_ci_low, r.spearman_ci_high)} "
                     f"(Kendall tau {_ci(r.kendall, r.kendall_ci_low, r.kendall_ci_high)}), n={r.n} iterations")
    lines += ["", "### Which stopping rule? (counterfactual truncation of the logged runs, dev split)", "",
              "The grounded score of a rule is the DEV-split score of the prompt it would have returned (the "
              "split the loops saw while refining), not the test split of the first section.", ""]
    if not f.best_rules:
        lines.append("No stopping rule could be evaluated exactly on the logged trajectories.")
    for label, rule in f.best_rules.items():
        b, c, cost = rule["best"], rule["cheapest"], rule["cost"]
        lines.append(f"- {label}: best threshold {b['threshold']:g}, cap {b['cap']}: grounded "
                     f"{_ci(b['grounded_mean'], b['grounded_ci_low'], b['grounded_ci_high'], '')}, n={b['grounded_n']}, "
                     f"{_cost(b, cost)}; cheapest as good (mean within the best's CI): threshold "
                     f"{c['threshold']:g}, cap {c['cap']}: grounded {c['grounded_mean']:.3f}, {_cost(c, cost)}, "
                     f"{_per_cost(c, cost)}")
    return [*lines, ""]


def _ci(est: Any, lo: Any, hi: Any, sign: str = "+") -> str:
    if _na(est):
        return "NA"
    f = f"{{:{sign}.3f}}".format
    return f"{f(float(est))} [{f(float(lo))}, {f(float(hi))}]" if not _na(lo) else f(float(est))


def _p(p: Any) -> str:
    return "NA" if _na(p) else f"{float(p):.3g}"


def _cost(row: dict[str, Any], cost: str) -> str:
    return f"${row[cost]:.4g} per run" if cost == "cost_usd_mean" else f"{row[cost]:.0f} tokens per run"


def _per_cost(row: dict[str, Any], cost: str) -> str:
    value = row[cost]
    if _na(value) or not value:
        return "cost 0"
    unit, scale = ("$", 1.0) if cost == "cost_usd_mean" else ("1k tokens", 1000.0)
    return f"{row['grounded_mean'] / value * scale:.3g} grounded score per {unit}"


def _na(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


__all__ = ["STOPPING_PARAMS", "THRESHOLDS", "Findings", "findings", "findings_markdown"]
