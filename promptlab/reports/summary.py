"""The summary table of a sweep and the report: PNG charts plus summary.csv / summary.md in one call."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.bias_asks import BUDGET
from ..errors import ConfigError
from ..results.atomic import atomic_write
from ..results.configs import By, by_columns, config_columns, config_groups, fmt_value
from ..results.order import canonical_results, canonical_rows
from .bias_charts import plot_biases
from .by_critic import (
    ACCURACY,
    critics_differ,
    pairing_value,
    pairing_why_not,
    plot_critic_trajectories,
    run_measure,
    stop_reasons_why_not,
)
from .charts import (
    plot_budget_curve,
    plot_calibration,
    plot_counterfactual_grid,
    plot_forest,
    plot_grounded_trajectories,
)
from .findings import Findings, findings, findings_markdown
from .fingerprints import fingerprint_markdown
from .markdown import table_lines
from .people import people_section
from .plots import plot_final_by, plot_pairing_heatmap, plot_score_vs_cost, plot_stop_reasons, plot_trajectories
from .readable import number_text
from .recorded_errors import errors_markdown

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results


def summary_table(results: Results | pd.DataFrame, by: By = None) -> pd.DataFrame:
    """One row per configuration: runs, final and best score, iterations, stop reasons, tokens, cost, errors.

    Args:
        results: A `Results` or a runs frame.
        by: Columns of a configuration (default: loop + params, see `config_columns`).

    Returns:
        A frame with the `by` columns then: runs, final_score_n (runs with a final score),
        final_score_mean, final_score_sd, best_score_mean, iterations_mean, stop_reasons ("reason: count"),
        tokens_mean, tokens_total, cost_usd_total (<NA> when some run's cost is unknown), n_errors,
        runs_with_errors; where runs were measured on a test split, test_accuracy_mean (the final prompt's) and
        gain_mean (final minus starting prompt) after `runs`. The critic-score columns (final_score_*,
        best_score_mean) are left out when the runs have more than one critic: critics' scales differ, so a
        column of them would compare what is not comparable (`promptlab.reports.by_critic`).
    """
    import pandas as pd

    runs = canonical_rows(results if isinstance(results, pd.DataFrame) else results.runs)  # sums in one order
    cols = by_columns(runs, by)
    out_cols = [
        *cols,
        "runs",
        "final_score_n",
        "final_score_mean",
        "final_score_sd",
        "best_score_mean",
        "iterations_mean",
        "stop_reasons",
        "tokens_mean",
        "tokens_total",
        "cost_usd_total",
        "n_errors",
        "runs_with_errors",
    ]
    rows = []
    for key, g in runs.groupby(cols, dropna=False, sort=True) if cols and len(runs) else []:
        key = key if isinstance(key, tuple) else (key,)
        reasons = g["stop_reason"].fillna("").replace("", "(none)").value_counts()
        rows.append(
            [
                *key,
                len(g),
                int(g["final_score"].notna().sum()),
                g["final_score"].mean(),
                g["final_score"].std(),
                g["best_score"].mean(),
                g["iterations_used"].mean(),
                ", ".join(f"{r}: {n}" for r, n in reasons.items()),
                g["tokens"].mean(),
                g["tokens"].sum(),
                pd.NA if g["cost_usd"].isna().any() else g["cost_usd"].sum(),
                g["n_errors"].sum(),
                int((g["n_errors"] > 0).sum()),
            ]
        )
    table = pd.DataFrame(rows, columns=out_cols)
    floats = ["final_score_mean", "final_score_sd", "best_score_mean", "iterations_mean", "tokens_mean"]
    for c in [*floats, "cost_usd_total"]:
        table[c] = table[c].astype("Float64")
    for c in ("runs", "final_score_n", "tokens_total", "n_errors", "runs_with_errors"):
        table[c] = table[c].astype("Int64")
    return by_the_rule(table, runs, cols)


def by_the_rule(table: pd.DataFrame, runs: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """The summary table with the grounded measures beside the run count, and without the critics' own scores
    when more than one critic made the runs."""
    if ACCURACY in runs.columns and runs[ACCURACY].notna().any() and len(table):
        grouped = runs.groupby(cols, dropna=False, sort=True)
        at = list(table.columns).index("runs") + 1
        table.insert(at, "test_accuracy_mean", grouped[ACCURACY].mean().astype("Float64").to_numpy())
        if "delta" in runs.columns:
            table.insert(at + 1, "gain_mean", grouped["delta"].mean().astype("Float64").to_numpy())
    if critics_differ(runs):
        table = table.drop(columns=["final_score_n", "final_score_mean", "final_score_sd", "best_score_mean"])
    return table


class Report(dict[str, Path]):
    """The files `report()` wrote, by file name; `.skipped` says which charts were not drawn and why; and the
    frames it wrote them from: `.table` (summary.csv, `summary_table`), `.findings` (summary.md's Findings) and
    `.biases` (its bias tables, `analysis.bias_table`; None when not computed)."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, str] = {}
        self.table: pd.DataFrame | None = None
        """The per-configuration table written to summary.csv and summary.md."""
        self.findings: Findings | None = None
        """The findings written to summary.md (and drawn in the findings charts)."""

    @property
    def biases(self) -> pd.DataFrame | None:
        """The bias table of every critic (`analysis.bias_table`) that summary.md shows; None when not computed."""
        return self.findings.biases if self.findings is not None else None


def report(
    results_dir: str | os.PathLike[str] | Results,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    bias_budget: int = BUDGET,
) -> Report:
    """Load a results directory and write its charts, summary.csv and summary.md, from its frames in the canonical
    order (`promptlab.results.order`): the same runs give the same numbers whatever order they finished in.

    Charts: trajectories.png, pairings.png, score_vs_cost.png, stop_reasons.png, final_by_threshold.png, and
    the findings charts calibration.png, grounded_trajectories.png, counterfactual.png (one panel per
    configuration), budget_curve.png (dev and test accuracy against spend at equal budget), deltas.png and
    biases.png (score against length at equal accuracy, score change against accuracy change, per critic), people.png
    (`promptlab.reports.people`); one with nothing to draw is skipped, the reason in `Report.skipped` and summary.md.
    summary.md has a "Findings" section (`promptlab.reports.findings`), warning when the directory mixes role prompts,
    data, experiment files or fingerprints, "People and the critic" when people judged (or pairings on open-ended
    runs cannot be compared), and "Inference fingerprints" (`promptlab.reports.fingerprints`).

    Args:
        results_dir: The sweep's results directory, or its loaded `Results`.
        out_dir: Where to write (default `<results_dir>/report`).
        bias_budget: Model calls per model critic for the bias probes' re-asks (MODEL CALLS, cached: a second
            report makes none; 0 for none). Simulated critics are re-asked without a call.

    Returns:
        A `Report`: file name -> path of every file written, with the frames written (`.table`, `.findings`,
        `.biases`) and the charts skipped (`.skipped`).
    """
    from ..results.store import Results, load

    res = canonical_results(results_dir if isinstance(results_dir, Results) else load(results_dir))  # read
    out = Path(out_dir) if out_dir is not None else res.path / "report"
    if out_dir is None and out.is_symlink():  # as a cell directory linked out: never written through
        raise ConfigError(f"{out} is a symbolic link to {os.readlink(out)}; refused, nothing written through it")
    out.mkdir(parents=True, exist_ok=True)
    written = Report()
    chart = _ChartWriter(out, written)
    table = summary_table(res)  # compute, then draw
    _trajectories_chart(res, chart)
    _run_charts(res, table, chart)
    found = findings(res, bias_budget=bias_budget)
    _findings_charts(res, found, chart)
    _bias_chart(found, chart)
    atomic_write(out / "summary.csv", lambda tmp: table.to_csv(tmp, index=False))
    written["summary.csv"] = out / "summary.csv"
    written.table, written.findings = table, found
    people = people_section(res, chart)  # draws people.png before summary.md lists the charts
    atomic_write(
        out / "summary.md", _summary_md(res, table, written, found, people).encode()
    )  # whole: a link is replaced
    written["summary.md"] = out / "summary.md"
    return written


class _ChartWriter:
    """Draws a chart into `out` and records it in `written`, or records why it was skipped."""

    def __init__(self, out: Path, written: Report) -> None:
        self.out, self.written = out, written

    def __call__(self, name: str, why_not: str | None, draw: Any, size: tuple[float, float]) -> None:
        from matplotlib.figure import Figure

        if why_not:
            self.written.skipped[name] = why_not
            return
        fig = Figure(figsize=size)
        draw(fig)
        atomic_write(self.out / name, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
        self.written[name] = self.out / name


def _trajectories_chart(res: Results, chart: _ChartWriter) -> None:
    """trajectories.png: one line per configuration, a panel per critic when critics differ, or a panel per
    parameter when there are too many configurations."""
    runs, traj = res.runs, res.trajectories
    n_configs = len(config_groups(traj))
    facets = [c for c in config_columns(traj) if traj[c].nunique(dropna=False) > 1] if n_configs > 8 else []

    def trajectories(fig: Any) -> None:
        if critics_differ(traj):  # a critic's own score within that critic only: a panel per critic
            plot_critic_trajectories(traj, fig)
            return
        if len(facets) < 2:  # one line per configuration
            plot_trajectories(traj, ax=fig.add_subplot())
            return
        for ax, col in zip(
            fig.subplots(len(facets), 1, squeeze=False, gridspec_kw={"hspace": 0.55})[:, 0], facets, strict=True
        ):
            plot_trajectories(traj, by=[col], ax=ax)  # too many configurations: one panel per parameter
            ax.set_title(f"Score by iteration, by {col} (pooled over the other parameters)")

    n_critics = runs["critic_model"].nunique() if "critic_model" in runs.columns else 1
    chart(
        "trajectories.png",
        "no scored iterations" if traj.empty or traj["average"].isna().all() else None,
        trajectories,
        (4.5 * n_critics, 4.2) if critics_differ(traj) else (9, 5 if len(facets) < 2 else 3.2 * len(facets)),
    )


def _run_charts(res: Results, table: pd.DataFrame, chart: _ChartWriter) -> None:
    """pairings.png, score_vs_cost.png, stop_reasons.png and final_by_threshold.png, from the runs frame."""
    runs = res.runs
    no_runs = "no runs in ok cells" if runs.empty else None
    n_critics = runs["critic_model"].nunique() if "critic_model" in runs.columns else 1
    chart(
        "pairings.png",
        no_runs or pairing_why_not(runs),
        # grounded runs: the test-split gain (critics' own final scores are on scales that differ by critic)
        lambda fig: plot_pairing_heatmap(runs, ax=fig.add_subplot(), value=pairing_value(runs)),
        (2 * n_critics + 4, runs["generator_model"].nunique() + 3),
    )
    cost_x = next((c for c in ("cost_usd", "tokens") if (runs[c].fillna(0) > 0).any()), None)
    measure, no_measure = run_measure(runs)
    chart(
        "score_vs_cost.png",
        no_runs or ("no run has a cost or token count" if cost_x is None else None) or no_measure or None,
        lambda fig: plot_score_vs_cost(runs, x=cost_x or "tokens", y=measure or "final_score", ax=fig.add_subplot()),
        (9, 5),
    )
    chart(
        "stop_reasons.png",
        no_runs or stop_reasons_why_not(runs),
        lambda fig: plot_stop_reasons(runs, ax=fig.add_subplot()),
        (9, 0.5 * len(table) + 3),
    )
    hue = "max_iterations" if "max_iterations" in runs.columns and runs["max_iterations"].nunique() > 1 else None
    threshold_why = (
        "the sweep has no finish_threshold column"
        if "finish_threshold" not in runs.columns
        else "one finish_threshold and one max_iterations value: nothing to compare"
        if runs["finish_threshold"].nunique() < 2 and hue is None
        else None
    )
    chart(
        "final_by_threshold.png",
        no_runs or threshold_why or no_measure or None,
        lambda fig: plot_final_by(
            runs, x="finish_threshold", hue=hue, y=measure or "final_score", ax=fig.add_subplot()
        ),
        (9, 5),
    )


def _bias_chart(found: Findings, chart: _ChartWriter) -> None:
    """biases.png: score against length at equal accuracy, and score change against accuracy change."""
    logged = found.bias_frames.get("length")
    chart(
        "biases.png",
        "no grounded data"
        if logged is None
        else ("no candidate has both a critic score and a dev score" if logged.empty else None),
        lambda fig: plot_biases(found.bias_frames, found.biases, fig),
        (11, 3.8 * (logged["critic_model"].nunique() if logged is not None and len(logged) else 1) + 0.5),
    )


def _findings_charts(res: Results, found: Findings, chart: Any) -> None:
    """Draw calibration.png, grounded_trajectories.png, counterfactual.png and deltas.png through `chart`."""
    traj = res.trajectories
    no_grounded = (
        None if "grounded_score" in traj.columns and traj["grounded_score"].notna().any() else "no grounded data"
    )
    pooled = found.calibration[found.calibration["critic_model"] != "(all)"] if len(found.calibration) else None
    chart(
        "calibration.png",
        no_grounded
        or ("no iteration has both a critic and a grounded score" if pooled is None or pooled.empty else None),
        lambda fig: plot_calibration(traj, ax=fig.add_subplot()),
        (8, 5),
    )
    chart(
        "grounded_trajectories.png",
        no_grounded,
        lambda fig: plot_grounded_trajectories(traj, ax=fig.add_subplot()),
        (9, 5),
    )
    groups = found.counterfactual["config"].nunique() if len(found.counterfactual) else 0
    chart(
        "counterfactual.png",
        no_grounded or (None if groups else "no counterfactual table"),
        lambda fig: plot_counterfactual_grid(found.counterfactual, fig),
        (5 + 2 * (found.counterfactual["cap"].nunique() if groups else 1), 3.2 * max(groups, 1) + 1.6),
    )
    budget = found.budget
    chart(
        "budget_curve.png",
        no_grounded or ("no run records what it would return at each spend (incumbents)" if budget is None else None),
        lambda fig: _budget_panels(fig, budget),
        (9, 9),
    )
    chart(
        "deltas.png",
        (no_grounded or "no run has a test-split delta") if found.deltas.empty else None,
        lambda fig: plot_forest(
            found.deltas,
            ax=fig.add_subplot(),
            title=DELTAS_TITLE,
            xlabel="test accuracy of the final prompt minus the starting prompt (95% CI)",
        ),
        (9, 0.5 * len(found.deltas) + 2),
    )


def _budget_panels(fig: Any, budget: Any) -> None:
    """budget_curve.png: the dev and the test accuracy at equal budget, one above the other (as wide as a
    notebook's output, so the legend stays readable)."""
    fig.set_layout_engine("constrained")
    dev, test = fig.subplots(2, 1)
    plot_budget_curve(budget.table, "dev", ax=dev, budget=budget.unit)
    plot_budget_curve(budget.table, "test", ax=test, budget=budget.unit)


DELTAS_TITLE = "Did refinement help? Test-split gain of the final prompt over the starting prompt, per configuration"
"""Title of deltas.png: what its estimates are (mean over runs of final minus starting test accuracy)."""


def _summary_md(res: Results, table: pd.DataFrame, written: Report, found: Findings, people: list[str]) -> str:
    counts = res.cells["status"].value_counts().to_dict()
    lines = [
        f"# Sweep report: {res.path}",
        "",
        f"Cells: {len(res.cells)} ({', '.join(f'{n} {s}' for s, n in counts.items()) or 'none'}). "
        f"Runs in ok cells: {len(res.runs)}.",
        "",
        "## Per configuration",
        "",
        _markdown(table),
        "",
    ]
    bad = res.cells[res.cells["status"] != "ok"]
    if len(bad):
        lines += ["## Cells not included", ""]
        lines += [
            f"- `{r.cell_id}` ({r.status}): {fmt_value(r.error_kind)}: {fmt_value(r.error)}" for r in bad.itertuples()
        ]
        lines.append("")
    lines += errors_markdown(res)
    lines += findings_markdown(found) + people
    lines += fingerprint_markdown(res.runs)
    lines += ["## Charts", ""] + [f"- [{n}]({n})" for n in written if n.endswith(".png")]
    lines += [f"- {n} not drawn: {why}" for n, why in written.skipped.items()]
    return "\n".join(lines) + "\n"


def _markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "(no runs)"

    def cell(v: Any) -> str:
        return fmt_value(v) if not isinstance(v, float) or math.isnan(v) else number_text(v)

    return "\n".join(
        table_lines(list(table.columns), ([cell(v) for v in row] for row in table.itertuples(index=False)))
    )
