"""Simulated critics: model names `sim/<kind>?<param>=<value>&...` that stand for a critic with KNOWN properties.

More in docs/analysis.md, section "promptlab.critics.simulated".
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ..errors import UnknownModelError
from ..llm.providers.registry import ModelProvider, register_model_provider
from ..llm.providers.resolved import resolve_model

PREFIX = "sim/"
"""What every simulated critic's name starts with (its provider's prefix, `sim`, and a slash)."""


@dataclass(frozen=True)
class Seen:
    """What a simulated critic is shown of a candidate."""

    accuracy: float
    """The candidate's dev accuracy `a`."""
    candidate: str
    """The candidate's text (its length is what a length-biased critic rewards)."""
    iteration: int = 0
    """The loop iteration that produced it (what an inflating critic rises with)."""
    anchor: float | None = None
    """A previous score shown in the critic's context (None: none shown)."""


@dataclass(frozen=True)
class SimKind:
    """One kind of simulated critic: its parameters (name -> (type, default, check, what it must be)) and score."""

    params: Mapping[str, tuple[type, float | int, Callable[[Any], bool], str]]
    formula: str
    score: Callable[[Seen, Mapping[str, Any], Any], float]
    """(what it is shown, params, numpy Generator) -> the score before clipping to 1-10."""


def _nonneg(v: Any) -> bool:
    return v >= 0


def _anything(v: Any) -> bool:
    return True


def _on_scale(v: Any) -> bool:
    return 1 <= v <= 10


def _probability(v: Any) -> bool:
    return 0 <= v <= 1


def _biased(seen: Seen, p: Mapping[str, Any], rng: Any) -> float:
    """sim/biased's score: the oracle plus a length slope, an inflation per step and noise, pulled towards
    a shown previous score by the anchoring weight."""
    own = 1 + 9 * seen.accuracy + p["per_100"] * len(seen.candidate) / 100 + p["inflation"] * seen.iteration
    own += rng.normal(0.0, p["sd"])
    return own if seen.anchor is None else (1 - p["anchor"]) * own + p["anchor"] * seen.anchor


_SD = (float, 1.0, _nonneg, "a number >= 0")
_SEED = (int, 0, _nonneg, "a whole number >= 0")

TIE = -1
"""What `SimCritic.prefer` returns when it scores both candidates alike (neither position)."""

SIM_CRITICS: dict[str, SimKind] = {
    "oracle": SimKind({}, "1 + 9 a", lambda s, _p, _rng: 1 + 9 * s.accuracy),
    "noisy": SimKind(
        {"sd": _SD, "seed": _SEED},
        "clip(1 + 9 a + Normal(0, sd), 1, 10)",
        lambda s, p, rng: 1 + 9 * s.accuracy + rng.normal(0.0, p["sd"]),
    ),
    "length": SimKind(
        {"per_100": (float, 1.0, _anything, "a number"), "sd": (float, 0.0, _nonneg, "a number >= 0"), "seed": _SEED},
        "clip(1 + 9 a + per_100 x characters / 100 + Normal(0, sd), 1, 10)",
        lambda s, p, rng: 1 + 9 * s.accuracy + p["per_100"] * len(s.candidate) / 100 + rng.normal(0.0, p["sd"]),
    ),
    "constant": SimKind(
        {"value": (float, 1.0, _on_scale, "a number from 1 to 10")}, "value", lambda _s, p, _rng: p["value"]
    ),
    "random": SimKind({"seed": _SEED}, "Uniform(1, 10)", lambda _s, _p, rng: rng.uniform(1.0, 10.0)),
    "biased": SimKind(
        {
            "per_100": (float, 0.0, _anything, "a number"),
            "inflation": (float, 0.0, _anything, "a number"),
            "first": (float, 0.0, _probability, "a probability from 0 to 1"),
            "anchor": (float, 0.0, _probability, "a weight from 0 to 1"),
            "sd": (float, 0.0, _nonneg, "a number >= 0"),
            "seed": _SEED,
        },
        "clip((1 - anchor') (1 + 9 a + per_100 x characters / 100 + inflation x iteration + Normal(0, sd))"
        " + anchor' x shown score, 1, 10)",
        _biased,
    ),
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

    def score(
        self,
        accuracy: float | None,
        candidate: str,
        *,
        sample: int,
        criterion: str,
        iteration: int = 0,
        anchor: float | None = None,
    ) -> float | None:
        """The critic's score of a candidate with dev accuracy `accuracy` (None: missing), produced at
        `iteration`, with `anchor` a previous score shown to it (None: none shown)."""
        if accuracy is None:
            return None
        seen = Seen(float(accuracy), candidate, iteration, anchor)
        value = SIM_CRITICS[self.kind].score(seen, self.params, self._rng(sample, candidate, criterion))
        return float(min(10.0, max(1.0, value)))

    def prefer(
        self, first: tuple[float | None, str], second: tuple[float | None, str], *, sample: int, criterion: str
    ) -> int | None:
        """A pairwise judgement: 0 when it prefers the candidate shown first, 1 the second (None: an accuracy is
        missing; `TIE` when it scores both alike). Each candidate is given as (dev accuracy, text). With
        probability `first` (sim/biased) it names the first outright; else the one it scores higher at this
        judgement (its formula, with noise drawn for this pair in this order); equal scores are a tie, not a coin
        (a coin would read as a position preference). A swapped pair is an independent judgement."""
        (acc_a, text_a), (acc_b, text_b) = first, second
        if acc_a is None or acc_b is None:
            return None
        spec, rng = SIM_CRITICS[self.kind], self._rng(sample, f"{text_a}\x00{text_b}", f"pair\x00{criterion}")
        if rng.uniform() < float(self.params.get("first", 0.0)):
            return 0
        a, b = (
            min(10.0, max(1.0, spec.score(seen, self.params, rng)))
            for seen in (Seen(acc_a, text_a), Seen(acc_b, text_b))
        )
        return TIE if a == b else (0 if a > b else 1)

    def _rng(self, sample: int, candidate: str, criterion: str) -> Any:
        """The draws of one call: a pure function of the seed, the sample, the candidate and the criterion."""
        import numpy as np

        digest = hashlib.sha256(f"{candidate}\x00{criterion}".encode()).digest()
        return np.random.default_rng([int(self.params.get("seed", 0)), sample, int.from_bytes(digest[:8], "big")])


class SimulatedCritics(ModelProvider):
    """The model provider of `sim/...` names: instruments that make no call, each standing for a `SimCritic`."""

    prefix = PREFIX.rstrip("/")
    in_process = True
    makes_calls = False
    runs_a_model = False
    call_refusal = (
        "is a simulated critic (promptlab.critics.simulated): it makes no model call and can only play a "
        "critic role of a grounded P³RO or Creator/Critic run"
    )

    def validate(self, target: str) -> None:
        parse_sim(target)

    def instrument(self, target: str) -> SimCritic:
        return parse_sim(target)


def simulated_critic(model: str | None) -> SimCritic | None:
    """The simulated critic `model` resolves to (None for a model that is called, or None).

    Raises:
        UnknownModelError: a simulated critic's name with an unknown kind or a bad parameter.
    """
    if not isinstance(model, str):
        return None
    found = resolve_model(model).instrument
    return found if isinstance(found, SimCritic) else None


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


register_model_provider(SimulatedCritics())

__all__ = [
    "PREFIX",
    "SIM_CRITICS",
    "TIE",
    "Seen",
    "SimCritic",
    "SimKind",
    "SimulatedCritics",
    "parse_sim",
    "simulated_critic",
]
