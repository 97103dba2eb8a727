"""Simulated critics: model names `sim/<kind>?<param>=<value>&...` that stand for a critic with KNOWN properties.

They are instruments for methodology research (how much does a better critic buy?) and for checking the
analysis against a known truth (does `analysis.calibration` recover the correlation a critic was built with?).
A simulated critic makes no model call: it scores a candidate prompt from the candidate's dev-split accuracy
`a` (in [0, 1]), which a grounded P³RO or Creator/Critic loop computes for every candidate anyway. It can play
any critic role (`critic_model`, `critic_models`, `role_models.evaluator`, pairings, grids) of those loops on
a grounded task, and no other role or loop; `complete("sim/...")` refuses it.

| name | score (1-10) |
|---|---|
| `sim/oracle` | `1 + 9 a` |
| `sim/noisy?sd=S&seed=K` | `clip(1 + 9 a + e, 1, 10)`, `e ~ Normal(0, S)` (S default 1, K default 0) |
| `sim/length?per_100=B&sd=S&seed=K` | `clip(1 + 9 a + B x chars / 100 + e, 1, 10)`: rewards longer prompts by B points per 100 characters (B default 1, S default 0) |
| `sim/constant?value=V` | `V` whatever the candidate (default 1): a critic that carries no information |
| `sim/random?seed=K` | `Uniform(1, 10)`, independent of accuracy |

The noise `e` (and `sim/random`'s draw) is a pure function of the seed K, the call's sample index, the
candidate's text and the criterion, so a simulated critic behaves like a cached model call: the same
candidate asked again at the same sample gets the same score, a re-score at another sample (or another
criterion, or another of several critics) a fresh draw. A candidate without a dev score gets a missing score.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ..errors import UnknownModelError

PREFIX = "sim/"
"""What every simulated critic's name starts with."""


@dataclass(frozen=True)
class SimKind:
    """One kind of simulated critic: its parameters (name -> (type, default, check, what it must be)) and score."""

    params: Mapping[str, tuple[type, float | int, Callable[[Any], bool], str]]
    formula: str
    score: Callable[[float, str, Mapping[str, Any], Any], float]
    """(accuracy, candidate, params, numpy Generator) -> the score before clipping to 1-10."""


def _nonneg(v: Any) -> bool:
    return v >= 0


def _anything(v: Any) -> bool:
    return True


def _on_scale(v: Any) -> bool:
    return 1 <= v <= 10


_SD = (float, 1.0, _nonneg, "a number >= 0")
_SEED = (int, 0, _nonneg, "a whole number >= 0")

SIM_CRITICS: dict[str, SimKind] = {
    "oracle": SimKind({}, "1 + 9 a", lambda a, _c, _p, _rng: 1 + 9 * a),
    "noisy": SimKind(
        {"sd": _SD, "seed": _SEED},
        "clip(1 + 9 a + Normal(0, sd), 1, 10)",
        lambda a, _c, p, rng: 1 + 9 * a + rng.normal(0.0, p["sd"]),
    ),
    "length": SimKind(
        {"per_100": (float, 1.0, _anything, "a number"), "sd": (float, 0.0, _nonneg, "a number >= 0"), "seed": _SEED},
        "clip(1 + 9 a + per_100 x characters / 100 + Normal(0, sd), 1, 10)",
        lambda a, c, p, rng: 1 + 9 * a + p["per_100"] * len(c) / 100 + rng.normal(0.0, p["sd"]),
    ),
    "constant": SimKind(
        {"value": (float, 1.0, _on_scale, "a number from 1 to 10")}, "value", lambda _a, _c, p, _rng: p["value"]
    ),
    "random": SimKind({"seed": _SEED}, "Uniform(1, 10)", lambda _a, _c, _p, rng: rng.uniform(1.0, 10.0)),
}
"""The kinds of simulated critic, by name (`sim/<kind>`)."""


@dataclass(frozen=True)
class SimCritic:
    """A parsed simulated critic: its kind and every parameter (defaults filled in)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The canonical name (parameters in order, defaults included)."""
        return PREFIX + self.kind + (f"?{urlencode(self.params)}" if self.params else "")

    @property
    def formula(self) -> str:
        """The score formula, with `a` the candidate's dev accuracy."""
        return SIM_CRITICS[self.kind].formula

    def record(self) -> dict[str, Any]:
        """What a Run records about it (`Run.info['simulated_critics']`)."""
        return {"kind": self.kind, "params": dict(self.params), "formula": self.formula}

    def score(self, accuracy: float | None, candidate: str, *, sample: int, criterion: str) -> float | None:
        """The critic's score of a candidate with dev accuracy `accuracy` (None: missing)."""
        import numpy as np

        if accuracy is None:
            return None
        digest = hashlib.sha256(f"{candidate}\x00{criterion}".encode()).digest()
        rng = np.random.default_rng([int(self.params.get("seed", 0)), sample, int.from_bytes(digest[:8], "big")])
        value = SIM_CRITICS[self.kind].score(float(accuracy), candidate, self.params, rng)
        return float(min(10.0, max(1.0, value)))


def is_simulated(model: str | None) -> bool:
    """Whether `model` names a simulated critic (`sim/...`)."""
    return isinstance(model, str) and model.startswith(PREFIX)


def parse_sim(model: str) -> SimCritic:
    """The simulated critic a `sim/...` name stands for.

    Raises:
        UnknownModelError: an unknown kind (the known ones are listed), an unknown parameter, or a value of
            the wrong type or range (the parameter is named).
    """
    kind, _, query = model[len(PREFIX) :].partition("?")
    spec = SIM_CRITICS.get(kind)
    if spec is None:
        raise UnknownModelError(
            model, f"no simulated critic {kind!r}; known: {', '.join(PREFIX + k for k in SIM_CRITICS)}"
        )
    try:
        given = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError as e:
        raise UnknownModelError(model, f"cannot read the parameters {query!r} (write sim/{kind}?name=value&...)") from e
    unknown = sorted(set(given) - set(spec.params))
    if unknown:
        known = ", ".join(spec.params) or "none"
        raise UnknownModelError(model, f"sim/{kind} has no parameter {', '.join(unknown)} (its parameters: {known})")
    params: dict[str, Any] = {}
    for name, (kind_type, default, ok, must) in spec.params.items():
        text = given.get(name)
        try:
            value = kind_type(default) if text is None else kind_type(text)
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)) or not ok(value):
            raise UnknownModelError(model, f"sim/{kind}: {name} must be {must}, got {text!r}")
        params[name] = value
    return SimCritic(kind, params)


__all__ = ["PREFIX", "SIM_CRITICS", "SimCritic", "SimKind", "is_simulated", "parse_sim"]
