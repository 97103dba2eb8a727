"""Agreement measures with intervals from a bootstrap over items (clustered: every judgment of a drawn item comes
along, so several people judging one item are not counted as independent).

The interval is scipy's BCa (`scipy.stats.bootstrap`, method="BCa", over item indices, with the draws made here so
that two measures share them) at the level expanded for the number of items (`promptlab.eval.stats.expanded_level`,
Hesterberg's expansion). Measured on simulated people (benchmarks/people_agreement.py, docs/benchmarks.md): the
percentile interval on 60 items covered a planted kappa 92.6-93.8% of the time, and its one-sided 5% bound on the
kappa difference was wrong 8.3% of the time at the verdict's margin; BCa corrects the bootstrap distribution's
median bias and skew, the expansion its narrowness on few items.

Pairs are labelled start / tie / returned (whichever side a person, or the critic, preferred); agreement is the share
of equal labels and Cohen's kappa (statsmodels) corrects it for chance. Ratings use Spearman's rho (scipy) and
Krippendorff's alpha at the ordinal level (krippendorff). Each measure is built from per-item units, so one
function (`cluster_bootstrap`) gives every interval; numpy and scipy are imported inside the functions. More in
docs/people.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

from ..eval.stats import expanded_level

N_BOOT = 2000
"""Bootstrap draws behind every interval."""
LEVEL = 0.95

if TYPE_CHECKING:
    import numpy as np

U = TypeVar("U")


@dataclass(frozen=True)
class Estimate:
    """A measure, its bootstrap interval and what it rests on."""

    value: float | None
    """The estimate on all the data (None when it cannot be computed)."""
    low: float | None
    """Lower end of the interval."""
    high: float | None
    """Upper end of the interval."""
    n_items: int
    """Items (clusters) it rests on."""
    draws: np.ndarray | None = None
    """The bootstrap estimates (NaN where a draw gave none), for a difference taken over the same draws."""
    at: Callable[[float], tuple[float | None, float | None]] | None = field(default=None, compare=False, repr=False)
    """The interval at another level, on the same draws (`bca_interval`); None without one."""


def cluster_bootstrap(
    units: Sequence[U],
    statistic: Callable[[Sequence[U]], float | None],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    level: float = LEVEL,
    draws: np.ndarray | None = None,
) -> Estimate:
    """`statistic` of the units, with the BCa interval (`bca_interval`) of `n_boot` draws of units with replacement.

    Args:
        units: One entry per item (cluster), whatever `statistic` reads.
        statistic: A measure of a list of units (None or NaN when it has none).
        n_boot: Draws.
        seed: Their seed.
        level: The interval's level.
        draws: Unit indices to use instead of fresh draws (`boot_indices`): two measures over the same items get
            the same draws, so their difference has an interval too (`from_draws`).
    """
    import numpy as np

    value = statistic(units)
    if value is None or not math.isfinite(value) or len(units) < 2:
        return Estimate(None if value is None or not math.isfinite(value) else value, None, None, len(units))
    picks = draws if draws is not None else boot_indices(len(units), n_boot, seed)
    found = np.array([_finite(statistic([units[i] for i in row])) for row in picks])
    return from_draws(units, statistic, float(value), found, level)


def from_draws(
    units: Sequence[U],
    statistic: Callable[[Sequence[U]], float | None],
    value: float,
    found: np.ndarray,
    level: float = LEVEL,
) -> Estimate:
    """The estimate `value` of `statistic` with the interval of its bootstrap estimates `found` (e.g. a difference
    of two measures over the same draws, with the difference as `statistic`)."""

    def at(wanted: float) -> tuple[float | None, float | None]:
        return bca_interval(units, statistic, value, found, wanted)

    low, high = at(level)
    return Estimate(value, low, high, len(units), found, at)


def boot_indices(n: int, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """`n_boot` rows of `n` unit indices drawn with replacement."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def bca_interval(
    units: Sequence[U],
    statistic: Callable[[Sequence[U]], float | None],
    value: float,
    found: np.ndarray,
    level: float = LEVEL,
) -> tuple[float | None, float | None]:
    """scipy's BCa interval of `statistic` (value `value`) over the units, from the bootstrap estimates `found`, at
    `expanded_level(len(units), level)`; scipy's jackknife leaves out one unit at a time for the acceleration.

    The draws that gave no estimate are left out; (None, None) when under half of them gave one. Where BCa is
    undefined (every draw equal, or a jackknife estimate undefined) it is the percentile interval at that level.
    """
    import warnings

    import numpy as np
    from scipy.stats import bootstrap

    ok = found[np.isfinite(found)]
    if len(ok) == 0 or len(ok) < len(found) / 2 or len(units) < 2:
        return None, None
    wide = expanded_level(len(units), level)

    def of_indices(picks: np.ndarray) -> float:
        return _finite(statistic([units[int(i)] for i in picks]))

    with warnings.catch_warnings():  # a degenerate distribution gives NaN (handled below), not a warning
        warnings.simplefilter("ignore")
        found_so_far = SimpleNamespace(bootstrap_distribution=ok)
        ends = bootstrap(
            (np.arange(len(units)),),
            of_indices,
            vectorized=False,
            n_resamples=0,
            bootstrap_result=found_so_far,
            method="BCa",
            confidence_level=wide,
        ).confidence_interval
    low, high = float(ends.low), float(ends.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        tail = (1 - wide) / 2 * 100
        low, high = (float(x) for x in np.percentile(ok, [tail, 100 - tail]))
    return low, high


def _finite(value: float | None) -> float:
    return float(value) if value is not None and math.isfinite(value) else math.nan


# pairs: a unit is one item's 3 x 3 table of label pairs --------------------------------------------------------
def label_table(pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """The 3 x 3 counts of (row label, column label) index pairs."""
    import numpy as np

    table = np.zeros((3, 3))
    for a, b in pairs:
        table[int(a), int(b)] += 1
    return table


def kappa(tables: Sequence[np.ndarray]) -> float | None:
    """Cohen's kappa (statsmodels) of the summed tables; None without two labels in use or on a degenerate table."""
    import numpy as np
    from statsmodels.stats.inter_rater import cohens_kappa

    total = np.sum(tables, axis=0) if len(tables) else np.zeros((3, 3))
    if total.sum() == 0:
        return None
    expected = (total.sum(axis=1) @ total.sum(axis=0)) / total.sum() ** 2
    if expected >= 1 - 1e-12:
        return None
    return float(cohens_kappa(total, return_results=False))


def agreement(tables: Sequence[np.ndarray]) -> float | None:
    """The share of label pairs that agree."""
    import numpy as np

    total = np.sum(tables, axis=0) if len(tables) else np.zeros((3, 3))
    return float(np.trace(total) / total.sum()) if total.sum() else None


# ratings: a unit is one item's list of (row value, column value) pairs -----------------------------------------
def spearman(units: Sequence[Sequence[tuple[float, float]]]) -> float | None:
    """Spearman's rho (scipy) over every pair of the units; None under 3 pairs or without variation."""
    import numpy as np
    from scipy.stats import spearmanr

    pairs = [p for unit in units for p in unit]
    if len(pairs) < 3:
        return None
    x, y = np.array(pairs).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y).statistic)


def pair_alpha(units: Sequence[Sequence[tuple[float, float]]]) -> float | None:
    """Krippendorff's alpha (ordinal) of two coders over every pair of the units (each pair a unit of coding)."""
    import numpy as np

    pairs = [p for unit in units for p in unit]
    return ordinal_alpha(np.array(pairs, dtype=float).T) if len(pairs) >= 2 else None


def matrix_alpha(units: Sequence[dict[str, float]]) -> float | None:
    """Krippendorff's alpha (ordinal) with the people as coders and the items as units (missing where unjudged)."""
    import numpy as np

    people = sorted({p for unit in units for p in unit})
    if len(people) < 2:
        return None
    data = np.array([[unit.get(p, np.nan) for unit in units] for p in people], dtype=float)
    return ordinal_alpha(data)


def ordinal_alpha(data: np.ndarray) -> float | None:
    """krippendorff.alpha at the ordinal level; None when the data hold fewer than two values or no pairable unit."""
    import krippendorff
    import numpy as np

    values = data[np.isfinite(data)]
    if len(np.unique(values)) < 2 or not (np.isfinite(data).sum(axis=0) >= 2).any():
        return None
    value: Any = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    return float(value) if math.isfinite(value) else None


__all__ = [
    "LEVEL",
    "N_BOOT",
    "Estimate",
    "agreement",
    "bca_interval",
    "boot_indices",
    "cluster_bootstrap",
    "from_draws",
    "kappa",
    "label_table",
    "matrix_alpha",
    "ordinal_alpha",
    "pair_alpha",
    "spearman",
]
