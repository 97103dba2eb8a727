"""Reports over sweep results: charts (`plots`, the findings' `charts`, and `by_critic`, the rule that keeps a
critic's own score within that critic), the findings as tables and text
(`findings`), and `report`, which writes them all with summary.csv / summary.md."""

from __future__ import annotations

from .by_critic import (
    critics_differ,
    pairing_value,
    pairing_why_not,
    plot_critic_trajectories,
    run_measure,
    stop_reasons_why_not,
    trajectory_charts,
)
from .charts import (
    plot_budget_curve,
    plot_calibration,
    plot_counterfactual_grid,
    plot_counterfactual_heatmap,
    plot_forest,
    plot_grounded_trajectories,
    say_why,
)
from .findings import Findings, findings, findings_markdown
from .plots import plot_final_by, plot_pairing_heatmap, plot_score_vs_cost, plot_stop_reasons, plot_trajectories
from .readable import readable_table, rounded
from .search_tree import plot_search_tree
from .summary import report, summary_table

__all__ = [
    "Findings",
    "critics_differ",
    "pairing_value",
    "pairing_why_not",
    "plot_critic_trajectories",
    "run_measure",
    "stop_reasons_why_not",
    "trajectory_charts",
    "findings",
    "findings_markdown",
    "plot_budget_curve",
    "plot_calibration",
    "plot_counterfactual_grid",
    "plot_counterfactual_heatmap",
    "plot_final_by",
    "plot_forest",
    "plot_grounded_trajectories",
    "plot_pairing_heatmap",
    "plot_score_vs_cost",
    "plot_search_tree",
    "readable_table",
    "rounded",
    "plot_stop_reasons",
    "plot_trajectories",
    "report",
    "say_why",
    "summary_table",
]
