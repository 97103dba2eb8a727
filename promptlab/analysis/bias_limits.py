"""What a critic-bias estimate (`promptlab.analysis.bias`) cannot say, row by row of `bias_table`:

- **Saturation.** A critic's scores live on 1-10. A score the critic would have put above 10 is written 10, so
  near the top (or bottom) a bias moves fewer scores than it would in the middle, and every probe that reads
  scores (all but order) understates it: a regression on censored scores is pulled towards 0 by about the share
  of scores at the ends (for normal regressors, the slope times the share left uncensored; Greene 1981,
  "On the asymptotic bias of the ordinary least squares estimator of the Tobit model", Econometrica 49:2).
  `end_shares` gives the share of the probe's scores at each end; above SATURATED (summed), the estimate likely
  understates the bias's size (not a strict bound: noise can still carry one estimate above the truth): the
  verdict never says "No evidence of bias", and says why.
- **Power.** `detectable` is the smallest bias the probe would call "Biased" with 80% power at its n:
  (z_{1 - a/2} + z_{0.80}) x SE, the SE read from the row's interval (its half-width / z_{1 - a/2}, a the
  interval's error, Bonferroni-adjusted). It qualifies only an "Inconclusive" row (a "Biased" row found a bias,
  a "No evidence" row's interval already rules out the margin): there, a detectable size above the margin is
  "underpowered", with about the n that would reach the margin (`needed`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

SCALE = (1.0, 10.0)
"""The critic's score scale (the loops' 1-10)."""
SATURATED = 0.10
"""Share of a probe's scores at the scale's ends (bottom + top) above which its estimate is read as likely to
understate the bias's size. At 10% censored, a regression's slope keeps about 90% of the truth (Greene 1981): within
these probes' own precision; beyond it the understatement grows with the share (half the truth at 50%)."""
POWER = 0.80
"""The power at which `detectable` states the smallest detectable bias."""
SCORES = {
    "length": ("score",),
    "inflation": ("score",),
    "padding": ("plain", "padded"),
    "anchoring": ("plain", "anchored"),
    "order": (),
}
"""The score columns of each probe's frame (order reads verdicts, not scores: no scale to saturate)."""


def end_shares(probe: str, frame: pd.DataFrame) -> tuple[float | None, float | None]:
    """(share of the probe's scores at the bottom of the scale, share at the top); None for a probe without
    scores (order) or without data."""
    import pandas as pd

    cols = [c for c in SCORES[probe] if c in frame.columns]
    scores = pd.concat([frame[c] for c in cols]).dropna().astype(float) if cols else pd.Series(dtype=float)
    if scores.empty:
        return None, None
    return float((scores <= SCALE[0]).mean()), float((scores >= SCALE[1]).mean())


def detectable(low: float | None, high: float | None, confidence: float) -> float | None:
    """The smallest bias detected with POWER at the interval's confidence: (z_{1-a/2} + z_POWER) x SE, the SE
    being the interval's half-width / z_{1-a/2} (None without an interval)."""
    from scipy.stats import norm

    if low is None or high is None:
        return None
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    return (high - low) / 2 / z * (z + float(norm.ppf(POWER)))


def saturation_note(bottom: float | None, top: float | None) -> str | None:
    """The sentence saying a probe's estimate likely understates the bias (its scores' share at the ends above
    SATURATED), or None."""
    if bottom is None or top is None or bottom + top <= SATURATED:
        return None
    ends = " and ".join(f"{share:.0%} at {end:g}" for share, end in ((bottom, SCALE[0]), (top, SCALE[1])) if share > 0)
    return f"saturated ({ends}): the estimate likely understates the bias's size"


def needed(n: int, mde: float, margin: float) -> int:
    """About the n at which the probe would detect `margin` with POWER: n x (mde / margin)^2 (the SE shrinks as
    1 / sqrt(n))."""
    return math.ceil(n * (mde / margin) ** 2)


def rounded_up(value: float) -> str:
    """`value` rounded UP to 2 decimals (3 below 0.1): a detectable size printed never reads smaller than it is,
    so 0.2004 is "0.21", never "0.2" beside a margin of 0.2."""
    digits = 2 if value >= 0.1 else 3
    return f"{math.ceil(value * 10**digits - 1e-9) / 10**digits:.{digits}f}"


def limited_verdict(
    finding: str, margin: float, ends: tuple[float | None, float | None], mde: float | None, n: tuple[int, str]
) -> str:
    """A verdict (`bias.bias_verdict`) with what limits it: under saturation (`ends`: the shares at the bottom
    and top) "No evidence of bias" becomes "Inconclusive" (a censored estimate near 0 does not rule out a bias)
    and the row says the estimate likely understates; an "Inconclusive" row whose detectable size exceeds its
    margin says it is underpowered and about how many observations (`n`: count, noun) would reach the margin."""
    notes = []
    saturated = saturation_note(*ends)
    if saturated is not None:
        if finding.startswith("No evidence of bias"):
            finding = f"Inconclusive: the CI lies within +/-{margin:g}, but the scores are censored"
        notes.append(saturated)
    if finding.startswith("Inconclusive") and mde is not None and mde > margin:
        count, noun = n
        notes.append(
            f"underpowered: it detects {rounded_up(mde)} or more with 80% power, above the margin {margin:g} "
            f"(about {needed(count, mde, margin)} {noun} would reach it)"
        )
    return "; ".join([finding, *notes])


__all__ = [
    "POWER",
    "SATURATED",
    "SCALE",
    "SCORES",
    "detectable",
    "end_shares",
    "limited_verdict",
    "needed",
    "rounded_up",
    "saturation_note",
]
