"""Fragile verdicts: the rule (an end of the 95% CI within one standard error of the line that decides), on the
demo's own figures from two machines (issue #36), and the findings' sentences that say so."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from promptlab.analysis.critic import ALL
from promptlab.analysis.fragility import fragile, fragile_note, fragile_rule, standard_error
from promptlab.analysis.stopping import best_stopping_rule
from promptlab.reports.findings import Findings, findings_markdown


def test_the_standard_error_is_the_ci_width_over_two_z() -> None:
    assert standard_error(-1.96, 1.96) == pytest.approx(1.0, abs=1e-4)
    assert standard_error(None, 0.3) is None and standard_error(0.1, math.nan) is None


@pytest.mark.parametrize(
    ("low", "high", "is_fragile"),
    [
        (0.025, 0.413, True),  # "yes, the critic can be trusted" on the AVX2 machine: 0.025 < se 0.099
        (-0.14, 0.30, False),  # "no evidence" on the AVX-512 machine: both ends far from 0
        (-0.181, -0.036, True),  # refinement hurt (noisy critic): 0.036 < se 0.037
        (-0.232, -0.062, False),  # refinement hurt (SmolLM2 critic): 0.062 > se 0.043
        (-0.007, 0.0, True),  # an end on the line
        (0.0, 0.0, False),  # every value 0: "no variation" (issue 53), not fragile
        (0.0, 0.001, True),
        (None, 0.2, False),
    ],
)
def test_a_verdict_is_fragile_when_a_ci_end_is_within_one_standard_error_of_its_line(
    low: float | None, high: float, is_fragile: bool
) -> None:
    assert fragile(low, high) is is_fragile
    assert ("**Fragile**" in fragile_note(low, high)) is is_fragile


def rules(cap0: float, cap1: float) -> pd.DataFrame:
    """A counterfactual table: cap 0 (cheapest), cap 1 and the best rule, cap 2, at 0.317 [0.288, 0.350]."""
    rows = [(0, cap0, cap0 - 0.02, cap0 + 0.02, 100.0), (1, cap1, cap1 - 0.03, cap1 + 0.03, 200.0)]
    rows.append((2, 0.317, 0.288, 0.350, 300.0))
    return pd.DataFrame(
        [
            {
                "cap": cap,
                "threshold": 5.0,
                "grounded_mean": mean,
                "grounded_ci_low": lo,
                "grounded_ci_high": hi,
                "tokens_mean": tokens,
                "cost_usd_mean": 0.0,
                "n_exact": 21,
                "n_runs": 21,
                "grounded_n": 21,
                "iterations_mean": float(cap),
                "stopped_early": 0.0,
            }
            for cap, mean, lo, hi, tokens in rows
        ]
    )


@pytest.mark.parametrize(
    ("cap0", "cap1", "chosen_cap", "is_fragile"),
    [
        (0.300, 0.25, 0, True),  # the README's "do not refine": 0.300 is 0.012 above the line, se 0.0158
        (0.310, 0.25, 0, False),  # 0.022 above the line
        (0.250, 0.300, 1, True),  # the chosen rule is 0.012 above the line
        (0.275, 0.316, 1, True),  # chosen well inside, but cap 0 missed the line by 0.013 only
        (0.250, 0.316, 1, False),  # cap 0 missed it by 0.038
    ],
)
def test_a_stopping_rule_is_fragile_when_it_or_a_cheaper_rule_is_near_the_best_rules_ci_low_end(
    cap0: float, cap1: float, chosen_cap: int, is_fragile: bool
) -> None:
    table = rules(cap0, cap1)
    rule = best_stopping_rule(table)
    assert rule is not None and rule["cheapest"]["cap"] == chosen_cap and rule["best"]["cap"] == 2
    assert fragile_rule(rule, table) is is_fragile


def test_the_findings_call_a_fragile_verdict_fragile() -> None:
    deltas = pd.DataFrame(
        [
            {"label": "noisy", "estimate": -0.105, "ci_low": -0.181, "ci_high": -0.036, "n": 21, "p_holm": 0.011},
            {"label": "smollm2", "estimate": -0.139, "ci_low": -0.232, "ci_high": -0.062, "n": 21, "p_holm": 0.011},
        ]
    )
    cal = pd.DataFrame(
        [
            {
                "criterion": ALL,
                "critic_model": "local/smollm2",
                "spearman": 0.229,
                "spearman_ci_low": 0.025,
                "spearman_ci_high": 0.413,
                "kendall": 0.16,
                "kendall_ci_low": 0.01,
                "kendall_ci_high": 0.3,
                "n": 84,
                "critic_min": 2.5,
                "critic_max": 5.0,
                "critic_sd": 0.5,
                "finding": None,
            }
        ]
    )
    table = rules(0.300, 0.25).assign(config="oracle")
    rule = best_stopping_rule(table)
    assert rule is not None
    start = table.iloc[0].to_dict()
    f = Findings(
        deltas=deltas,
        calibration=cal,
        counterfactual=table,
        best_rules={"oracle": {**rule, "start": start, "fragile": fragile_rule(rule, table)}},
    )
    text = "\n".join(findings_markdown(f))
    lines = {line.split(":")[0]: line for line in text.splitlines() if line.startswith("- ")}
    assert "**Fragile**" in lines["- noisy"] and "**Fragile**" not in lines["- smollm2"]
    critic = next(line for line in text.splitlines() if line.startswith("- local/smollm2"))
    assert "**ranks candidates as accuracy does**" in critic and "**Fragile**: an end of its CI" in critic
    stop = next(line for line in text.splitlines() if line.startswith("- oracle"))
    assert "do not refine" in stop and "**Fragile**: this rule's mean, or a cheaper rule's" in stop
