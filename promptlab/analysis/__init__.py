"""Findings over sweep results, pure functions over the frames of `promptlab.results` (except `reliability`,
which re-asks the critics): `calibration`, counterfactual `stopping` (and its `check_counterfactual` against a real grid), `equal_budget` comparisons, paired `compare`-isons, critic
`bias_table` and its probes (`length_bias`, `order_bias`, `padding_bias`, `anchoring_bias`, `inflation`,
`flip_rate`; their data: `probe_frames`, which re-asks the critics), `reliability` and `provenance` checks. Every estimate comes with its n and a 95% CI."""

from __future__ import annotations

from .bias import (
    PROBES,
    Estimate,
    anchoring_bias,
    bias_table,
    bias_verdict,
    flip_rate,
    inflation,
    length_bias,
    order_bias,
    padding_bias,
    planted,
)
from .bias_asks import aprobe_frames, probe_frames
from .budget import compare_at_budget, equal_budget
from .consistency import agreement, reliability
from .critic import ALL, calibration
from .grid_check import agreement_table, check_counterfactual
from .paired import compare, delta_table, holm, sign_flip_p
from .provenance import PROVENANCE_CHECKS, mixed_fingerprints, provenance_warnings
from .stopping import (
    TRUNCATION_EXACT_LOOPS,
    best_stopping_rule,
    counterfactual_stopping,
    default_final,
    rank_rules,
    select,
    truncate,
)

__all__ = [
    "ALL",
    "PROBES",
    "Estimate",
    "anchoring_bias",
    "aprobe_frames",
    "bias_verdict",
    "flip_rate",
    "inflation",
    "length_bias",
    "order_bias",
    "padding_bias",
    "planted",
    "PROVENANCE_CHECKS",
    "TRUNCATION_EXACT_LOOPS",
    "agreement",
    "agreement_table",
    "best_stopping_rule",
    "bias_table",
    "calibration",
    "check_counterfactual",
    "compare",
    "compare_at_budget",
    "counterfactual_stopping",
    "default_final",
    "delta_table",
    "equal_budget",
    "holm",
    "mixed_fingerprints",
    "probe_frames",
    "provenance_warnings",
    "rank_rules",
    "reliability",
    "select",
    "sign_flip_p",
    "truncate",
]
