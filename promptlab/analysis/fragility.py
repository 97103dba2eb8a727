"""Fragile verdicts: a finding whose 95% CI nearly touches the line that decides it.

A verdict read off a CI ("the critic ranks candidates as accuracy does": the CI lies above 0; "do not refine": cap
0's mean lies inside the best rule's CI) says which side of a line the estimate fell on. When an end of the CI lies
within one standard error of that line, a shift smaller than the estimate's own uncertainty (another machine's
near-ties at greedy decoding, a few more runs, another seed) could put it on the other side: the report says the
verdict is **fragile**, not only which side it fell on.

The rule (`fragile`): with a 95% CI [low, high], its standard error is taken as (high - low) / (2 x 1.96) (the
normal approximation; `standard_error`), and the verdict about a line `null` is fragile when min(|low - null|,
|high - null|) is less than that, or 0 (an end on the line). It applies to every verdict, whichever it is: "yes",
"no" or "inconclusive" (a CI that spans 0 with an end just across it nearly excluded it).

For the stopping rule (`fragile_rule`): the rule chosen is the cheapest whose mean reaches the best rule's CI low
end; it is fragile when its mean, or the mean of a cheaper rule that missed, lies within one standard error (of the
best rule's CI) of that low end: a small shift would choose another rule.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


def _number(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def standard_error(low: Any, high: Any) -> float | None:
    """The standard error a 95% CI implies: its width / (2 x 1.96); None when an end is missing."""
    lo, hi = _number(low), _number(high)
    return None if lo is None or hi is None else (hi - lo) / (2 * Z95)


def fragile(low: Any, high: Any, null: float = 0.0) -> bool:
    """Whether the verdict a 95% CI gives about `null` is fragile: an end lies within one standard error of it
    (or on it). False when an end is missing, or for a zero-width CI on `null` (every value was `null`)."""
    se = standard_error(low, high)
    if se is None:
        return False
    near = min(abs(float(low) - null), abs(float(high) - null))
    if se == 0.0 and near == 0.0:  # a zero-width CI on the line: "no variation" (`standing`), not fragile
        return False
    return near == 0.0 or near < se


def fragile_rule(rule: dict[str, Any], table: pd.DataFrame) -> bool:
    """Whether a chosen stopping rule (`analysis.best_stopping_rule` of `table`) is fragile: the chosen (cheapest)
    rule's mean, or the mean of a cheaper exact rule below the line, lies within one standard error of the best
    rule's CI low end (the line it is chosen by)."""
    best, chosen, cost = rule["best"], rule["cheapest"], rule["cost"]
    se = standard_error(best["grounded_ci_low"], best["grounded_ci_high"])
    line = _number(best["grounded_ci_low"])
    if se is None or line is None:
        return False
    exact = table[table["grounded_mean"].notna() & (table["n_exact"] == table["n_runs"])]
    cheaper = exact[exact[cost] < chosen[cost]]
    means = [float(chosen["grounded_mean"]), *(float(m) for m in cheaper["grounded_mean"])]
    return any(abs(m - line) < se for m in means)


def fragile_note(low: Any, high: Any, null: float = 0.0) -> str:
    """The sentence a finding adds when its verdict is fragile (else '')."""
    if not fragile(low, high, null):
        return ""
    return (
        f" **Fragile**: an end of its CI lies within one standard error of {null:g}, so a small shift (another "
        "machine's near-ties, a few more runs) could change this verdict (docs/analysis.md, Fragile findings)."
    )


RULE_NOTE = (
    " **Fragile**: this rule's mean, or a cheaper rule's, lies within one standard error of the best rule's CI "
    "low end, so a small shift could choose another rule (docs/analysis.md, Fragile findings)."
)
"""The sentence a stopping finding adds when its chosen rule is fragile."""


__all__ = ["RULE_NOTE", "Z95", "fragile", "fragile_note", "fragile_rule", "standard_error"]
