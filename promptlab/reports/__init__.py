"""Reports over sweep results: charts (`plots`, and the findings' `charts`), the findings as tables and text
(`findings`), and `report`, which writes them all with summary.csv / summary.md."""

from __future__ import annotations

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
from .plots import (
    plot_final_by,
    plot_pairing_heatmap,
    plot_score_vs_cost,
    plot_stop_reasons,
    plot_trajectories,
)
from .summary import report, summary_table

__all__ = [
    "Findings",
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
    "plot_stop_reasons",
    "plot_trajectories",
    "report",
    "say_why",
    "summary_table",
]
