"""The findings of a results directory, as tables, charts and the "Findings" section of summary.md.

`findings(results)` gathers, from the frames and the runs' logged configs (no model calls): the test-split
gain per configuration (`analysis.delta_table`) and the paired differences between configurations
(`analysis.compare`), the calibration of each critic's OWN scores (`analysis.calibration`), and the
counterfactual stopping table per configuration (`analysis.counterfactual_stopping`, whose grounded score is
the returned prompt's DEV-split score) with its best rule per unit of cost and every exact rule ranked
(`analysis.rank_rules`, thresholds x caps from 0 to the logged cap), the provenance warnings, and each
critic's biases (`analysis.bias`: the logged probes always; the re-asked ones for simulated critics, which
make no call, and, with `bias_budget` > 0, for model critics: MODEL CALLS, cached).

`findings_markdown` answers the questions in one sentence each, with n and the 95% CI: did refinement help,
when to stop, can the critic be trusted, and (runs that record incumbents) which loop leads at which budget
(`promptlab.reports.budget`). An estimate whose CI spans 0 is answered
"Inconclusive: the CI spans 0", and one whose CI excludes 0 while its Holm-corrected p is 0.05 or more
"Inconclusive after Holm's correction" (the CI is the estimate's own; Holm's p answers for the family). A verdict
whose CI ends within one standard error of its line (0, or the best stopping rule's CI low end) is also called
fragile (`promptlab.analysis.fragility`). Results without grounded data (tasks without examples) give empty tables and
a "no grounded data" sentence instead of an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..analysis.bias import bias_table
from ..analysis.bias_asks import probe_frames
from ..analysis.critic import ALL, calibration
from ..analysis.fragility import RULE_NOTE, fragile_note, fragile_rule
from ..analysis.paired import compare, delta_table, standing
from ..analysis.provenance import provenance_warnings
from ..analysis.stopping import best_stopping_rule, counterfactual_stopping, rank_rules
from ..critics.simulated import simulated_critic
from ..results.configs import config_columns, config_labels, run_configs
from ..results.order import canonical_results
from .budget import BudgetFindings, budget_findings, budget_markdown
from .markdown import percent, table_lines

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results

STOPPING_PARAMS = ("finish_threshold", "max_iterations")
"""Params the counterfactual replaces: they are left out of its configurations."""
THRESHOLDS = (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0)
"""Finish thresholds of the report's counterfactual grid (plus every threshold the sweep used); from 2, since a small
model's critic scores 2.5-5 on the shipped tasks (the demo) and thresholds above its scores never stop a run."""
INCONCLUSIVE = "Inconclusive: the CI spans 0"
"""The answer when a 95% CI includes 0."""
NOT_AFTER_HOLM = "Inconclusive after Holm's correction"
"""The answer when an estimate's own CI excludes 0 but its Holm-corrected p is `analysis.paired.ALPHA` or more:
one comparison of a family may not claim what the family does not support."""


@dataclass
class Findings:
    """What a results directory says about refinement, the critic and stopping."""

    deltas: pd.DataFrame
    """`analysis.delta_table` of the runs (test-split gain per configuration); empty without grounded data."""
    calibration: pd.DataFrame
    """`analysis.calibration` of the trajectories (each critic's own scores); empty without grounded scores."""
    counterfactual: pd.DataFrame
    """`analysis.counterfactual_stopping` per configuration (column `config`); empty without grounded scores."""
    best_rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Configuration label -> `analysis.best_stopping_rule` of its counterfactual rows."""
    warnings: list[str] = field(default_factory=list)
    """`analysis.provenance_warnings` of the runs."""
    comparisons: Any = None
    """`analysis.compare` of the gains between configurations (paired over task x sample); None with one."""
    critic_modes: dict[str, str] = field(default_factory=dict)
    """Critic model -> how its scores were produced (sampled, expected, simulated, ...)."""
    budget: BudgetFindings | None = None
    """Which configuration leads at which budget (`promptlab.reports.budget`); None without incumbents."""
    biases: pd.DataFrame | None = None
    """`analysis.bias.bias_table` per critic (None: not computed); its probes' data in `bias_frames`."""
    bias_frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    """The probes' tidy frames (`analysis.bias_asks.probe_frames`), what the bias charts draw."""

    @property
    def grounded(self) -> bool:
        """Whether any grounded number was found."""
        return not (self.deltas.empty and self.calibration.empty and self.counterfactual.empty)


def findings(results: Results, *, bias_budget: int = 0, cache: Any = None) -> Findings:
    """The findings of a loaded results directory (see the module docstring). `bias_budget` is the model calls
    per model critic for the bias probes' re-asks (0: none; simulated critics are re-asked without a call). The
    frames are taken in the canonical order (`promptlab.results.order`): the same runs give the same findings."""
    import pandas as pd

    results = canonical_results(results)
    runs, traj = results.runs, results.trajectories
    deltas = delta_table(runs) if len(runs) else pd.DataFrame()
    comparisons = compare(runs) if len(deltas) > 1 else None
    cal = with_findings(calibration(traj))
    counterfactual = pd.DataFrame()
    has_grounded = "grounded_score" in traj.columns and traj["grounded_score"].notna().any()
    if has_grounded:
        cols = [c for c in config_columns(runs) if c not in STOPPING_PARAMS and c in traj.columns]
        labelled = traj.assign(config=config_labels(traj, cols) if cols else "all runs")
        logged = (
            sorted(float(t) for t in runs["finish_threshold"].dropna().unique())
            if "finish_threshold" in runs.columns
            else []
        )
        caps = range(0 if (traj["iteration"] == 0).any() else 1, int(traj["iteration"].max()) + 1)
        counterfactual = counterfactual_stopping(
            labelled, sorted({*THRESHOLDS, *logged}), list(caps), by="config", runs=runs, configs=run_configs(results)
        )
    best = {}
    for label, g in counterfactual.groupby("config", sort=True) if len(counterfactual) else []:
        rule = best_stopping_rule(g)
        if rule is not None:
            zero = g[(g["cap"] == 0) & (g["threshold"] == g["threshold"].max())]
            start = zero.iloc[0].to_dict() if len(zero) else None
            best[str(label)] = {**rule, "start": start, "fragile": fragile_rule(rule, g)}
    frames = probe_frames(results, budget=bias_budget, cache=cache) if has_grounded else {}
    return Findings(
        biases=bias_table(frames) if frames else None,
        bias_frames=frames,
        deltas=deltas,
        calibration=cal,
        counterfactual=counterfactual,
        best_rules=best,
        warnings=provenance_warnings(runs),
        comparisons=comparisons,
        critic_modes=_modes(traj),
        budget=budget_findings(results) if has_grounded else None,
    )


def with_findings(cal: pd.DataFrame) -> pd.DataFrame:
    """The calibration table with its `finding` filled on every row: where there is a correlation, what its CI
    says (the words of `verdict`); where there is none, the analysis' sentence saying why."""
    if cal.empty or "finding" not in cal.columns:
        return cal
    out = cal.copy()
    missing = out["finding"].isna()
    out.loc[missing, "finding"] = [
        calibration_verdict(lo, hi)
        for lo, hi in zip(out.loc[missing, "spearman_ci_low"], out.loc[missing, "spearman_ci_high"], strict=True)
    ]
    return out


def _modes(traj: pd.DataFrame) -> dict[str, str]:
    """Critic model -> its scores' modes (most common first), from the trajectories' `mode` column."""
    if "mode" not in traj.columns or "critic_model" not in traj.columns:
        return {}
    out = {}
    for critic, g in traj[traj["mode"].notna()].groupby("critic_model", sort=True):
        out[str(critic)] = ", ".join(str(m) for m in g["mode"].value_counts().index)
    return out


def calibration_verdict(low: Any, high: Any) -> str:
    """The one reading of a critic's calibration (its Spearman CI against the dev accuracy), the same words in
    notebook 01's summary line, notebook 04's table and the report's findings."""
    return verdict(low, high, up="ranks candidates as accuracy does", down="ranks candidates against accuracy")


def verdict(low: Any, high: Any, *, up: str, down: str, p_holm: Any = None) -> str:
    """`up` when the CI lies above 0, `down` when below, else INCONCLUSIVE (or "No CI" when it is missing); a CI
    that excludes 0 with a Holm-corrected p (`p_holm`, when given) of `analysis.paired.ALPHA` or more is
    NOT_AFTER_HOLM (the rule: `promptlab.analysis.paired.standing`)."""
    words = {
        "no_ci": "No CI (too few values)",
        "spans": INCONCLUSIVE,
        "not_after_holm": NOT_AFTER_HOLM,
        "up": up,
        "down": down,
    }
    return words[standing(low, high, p_holm)]


def findings_markdown(f: Findings) -> list[str]:
    """The lines of summary.md's "Findings" section (and its provenance warning, when any)."""
    lines = ["## Findings", ""]
    if f.warnings:
        lines += ["**Warning: this results directory mixes provenance.**", ""]
        lines += [f"- {w}" for w in f.warnings] + [""]
    if not f.grounded:
        return [
            *lines,
            "No grounded data: the runs' tasks carry no examples, so there is no test-split delta, "
            "calibration or counterfactual stopping to report.",
            "",
        ]
    return [*lines, *_refinement(f), *_stopping(f), *_critics(f), *budget_lines(f)]


def budget_lines(f: Findings) -> list[str]:
    """The lines of summary.md's equal-budget section alone (question 4)."""
    return budget_markdown(f.budget, verdict, _ci, _p)


def _refinement(f: Findings) -> list[str]:
    lines = ["### 1. Did refinement help? (test split: the final prompt's accuracy minus the starting prompt's)", ""]
    if f.deltas.empty:
        return [*lines, "No grounded data on the test split (no run has a delta).", ""]
    for r in f.deltas.itertuples():
        answer = verdict(r.ci_low, r.ci_high, up="Yes, refinement helped", down="No, refinement hurt", p_holm=r.p_holm)
        lines.append(
            f"- {r.label}: **{answer}**: mean gain {_ci(r.estimate, r.ci_low, r.ci_high)} over n={r.n} "
            f"runs (sign-flip p, Holm-corrected: {_p(r.p_holm)}).{fragile_note(r.ci_low, r.ci_high)}"
        )
    if f.comparisons is not None and len(f.comparisons):
        lines += ["", "Between configurations (paired over the same task and sample; b minus a):", ""]
        for r in f.comparisons.itertuples():
            answer = verdict(r.ci_low, r.ci_high, up=f"{r.b} gained more", down=f"{r.a} gained more", p_holm=r.p_holm)
            lines.append(
                f"- {r.label}: **{answer}**: {_ci(r.estimate, r.ci_low, r.ci_high)}, n={r.n} pairs "
                f"(Holm p {_p(r.p_holm)}).{fragile_note(r.ci_low, r.ci_high)}"
            )
    return [*lines, ""]


def _stopping(f: Findings) -> list[str]:
    lines = [
        "### 2. When to stop? (counterfactual truncation of the logged runs; dev split)",
        "",
        "A rule's score is the DEV-split accuracy of the prompt it would have returned (the split the loops "
        "saw while refining, so it flatters refinement), not the test split of question 1.",
        "",
    ]
    if not f.best_rules:
        lines.append("No stopping rule could be evaluated exactly on the logged trajectories.")
    for label, rule in f.best_rules.items():
        b, c, cost, zero = rule["best"], rule["cheapest"], rule["cost"], rule.get("start")
        same = (b["threshold"], b["cap"]) == (c["threshold"], c["cap"])
        why = "the best rule, and the cheapest" if same else "the cheapest rule whose mean is within the best rule's CI"
        best = (
            ""
            if same
            else (
                f" The best rule ({_rule(b)}) reaches "
                f"{_ci(b['grounded_mean'], b['grounded_ci_low'], b['grounded_ci_high'], '')}, "
                f"{_cost(b, cost)}."
            )
        )
        stay = (
            f" Not refining at all (cap 0: the starting prompt) gives "
            f"{_ci(zero['grounded_mean'], zero['grounded_ci_low'], zero['grounded_ci_high'], '')}."
            if zero is not None and c["cap"] != 0
            else ""
        )
        lines.append(
            f"- {label}: **{_rule(c)}** ({why}): mean dev accuracy "
            f"{_ci(c['grounded_mean'], c['grounded_ci_low'], c['grounded_ci_high'], '')}, n={c['grounded_n']} "
            f"runs, {_cost(c, cost)}.{best}{stay}{RULE_NOTE if rule.get('fragile') else ''}"
        )
    for label in f.best_rules:
        lines += ["", *_ranking(label, f.counterfactual[f.counterfactual["config"] == label])]
    return [*lines, ""]


def _ranking(label: str, table: pd.DataFrame) -> list[str]:
    """Every exact rule of one configuration, best first, as a markdown table (thresholds that give a cap the
    same outcome on every run share a row)."""
    ranked = rank_rules(table)
    lines = [
        f"Every rule for {label}, best first (mean dev accuracy of the returned prompt, 95% CI):",
        "",
        "| rank | rule | dev accuracy [95% CI] | n | rewrites | tokens | stopped early |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for r in ranked.to_dict("records"):
        ts = ", ".join(f"{t:g}" for t in r["thresholds"])
        rule = "cap 0 (do not refine)" if r["cap"] == 0 else f"cap {r['cap']}, threshold {ts}"
        lines.append(
            f"| {r['rank']} | {rule} | {_ci(r['grounded_mean'], r['grounded_ci_low'], r['grounded_ci_high'], '')} | "
            f"{r['grounded_n']} | {r['iterations_mean']:.2f} | {r['tokens_mean']:.0f} | {r['stopped_early']:.0%} |"
        )
    return lines


def _critics(f: Findings) -> list[str]:
    lines = ["### 3. Can the critic be trusted? (its own score against the dev accuracy of the same candidate)", ""]
    own = f.calibration[f.calibration["criterion"] == ALL] if len(f.calibration) else f.calibration
    if own.empty:
        lines.append("No candidate has both a critic score and a grounded score.")
    for r in own.itertuples():
        mode = f.critic_modes.get(str(r.critic_model))
        name = f"{r.critic_model}" + (f" ({mode} scores)" if mode else "")
        simulated = simulated_critic(str(r.critic_model)) is not None
        sim = " It is simulated: its score is computed from the dev accuracy by a known formula, so this checks "
        sim = sim + "the analysis, not a model." if simulated else ""
        if _na(r.spearman):
            lines.append(f"- {name}: **No: {r.finding}.**{sim}")
            continue
        answer = calibration_verdict(r.spearman_ci_low, r.spearman_ci_high)
        lines.append(
            f"- {name}: **{answer}**: Spearman r={_ci(r.spearman, r.spearman_ci_low, r.spearman_ci_high)} "
            f"(Kendall tau {_ci(r.kendall, r.kendall_ci_low, r.kendall_ci_high)}), n={r.n} candidates; "
            f"its scores range {r.critic_min:.3g}-{r.critic_max:.3g} (sd {r.critic_sd:.2g})."
            f"{fragile_note(r.spearman_ci_low, r.spearman_ci_high)}{sim}"
        )
    return [*lines, "", *bias_markdown(f.biases)]


def bias_markdown(biases: pd.DataFrame | None) -> list[str]:
    """The bias table of each critic (`analysis.bias`), under "Can the critic be trusted?"."""
    if biases is None or biases.empty:
        return []
    lines = [
        "Is the critic biased? Each probe's estimate with its CI; a critic's intervals hold together (each at 1 - "
        "0.03 / the probes measured, Bonferroni: with the re-asks failed, two, so narrower logged intervals), so an "
        'unbiased critic is called biased on any probe at most 5% of the time. "No evidence of bias" only where the '
        'CI lies inside the stated size; "Not enough data" below a probe\'s minimum or from data that do not vary '
        "(docs/analysis.md, Critic biases). *From*: the logs or re-asks of the critic. *Detectable*: the smallest "
        "bias the probe finds with 80% power at its n (an inconclusive row above the stated size is underpowered); "
        "*scores at 1 / 10*: the share at the scale's ends (above 10% together the estimate likely understates):",
        "",
    ]
    for critic, g in biases.groupby("critic_model", sort=True):
        level = g["ci_level"].dropna()
        head = f"{percent(level.iloc[0])} CI" if len(level) and level.nunique() == 1 else "CI"
        sim = "planted" in g.columns and bool(g["planted"].notna().any())
        cols = ["probe", f"estimate [{head}]", "from", *(["planted (in the CI?)"] if sim else []), "n", "unit"]
        cols += ["detectable (80% power)", "scores at 1 / 10", "finding"]
        rows = [
            [r.probe, _ci(r.estimate, r.ci_low, r.ci_high), r.source]
            + [*([_planted(r.planted, r.ci_low, r.ci_high)] if sim else []), r.n, r.unit]
            + [_p(r.detectable), _ends(r), r.finding]
            for r in g.itertuples()
        ]
        lines += [f"**{critic}**", "", *table_lines(cols, rows), ""]
    if "planted" in biases.columns and biases["planted"].notna().any():
        lines.append(
            "A simulated critic's planted size is the bias it was built with (0: none; before the clip to 1-10); "
            "a probe's CI covers it with the CI's confidence (about 994 times in 1,000 at 99.4%)."
        )
        lines.append("")
    return lines


def _ends(row: Any) -> str:
    """A row's shares of scores at 1 and at 10 ("NA" for a probe that reads no scores)."""
    if _na(row.at_bottom) or _na(row.at_top):
        return "NA"
    return f"{float(row.at_bottom):.0%} / {float(row.at_top):.0%}"


def _planted(truth: Any, lo: Any, hi: Any) -> str:
    """A simulated critic's planted size, and whether the probe's CI covers it."""
    if _na(truth):
        return "NA"
    inside = "" if _na(lo) else (" (yes)" if float(lo) <= float(truth) <= float(hi) else " (**no**)")
    return f"{float(truth):+g}{inside}"


def _rule(row: dict[str, Any]) -> str:
    """A stopping rule in words: cap 0 returns the starting prompt whatever the threshold."""
    if row["cap"] == 0:
        return "do not refine (cap 0: return the starting prompt)"
    return f"stop at threshold {row['threshold']:g}, cap {row['cap']}"


def _ci(est: Any, lo: Any, hi: Any, sign: str = "+") -> str:
    if _na(est):
        return "NA"
    f = f"{{:{sign}.3f}}".format
    return f"{f(float(est))} [{f(float(lo))}, {f(float(hi))}]" if not _na(lo) else f(float(est))


def _p(p: Any) -> str:
    return "NA" if _na(p) else f"{float(p):.3g}"


def _cost(row: dict[str, Any], cost: str) -> str:
    return f"${row[cost]:.4g} per run" if cost == "cost_usd_mean" else f"{row[cost]:,.0f} tokens per run"


def _na(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


__all__ = [
    "calibration_verdict",
    "INCONCLUSIVE",
    "NOT_AFTER_HOLM",
    "STOPPING_PARAMS",
    "THRESHOLDS",
    "Findings",
    "bias_markdown",
    "budget_lines",
    "findings",
    "findings_markdown",
    "verdict",
]
