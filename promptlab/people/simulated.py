"""Simulated people with planted agreement, to check that the statistics recover what was planted.

Pairs: each item has a better side (start or returned, equally likely). The critic names it with probability
`critic_accuracy`; each person names it with probability `person_accuracy`, except that with probability
`position` they pick the text shown first (the order is drawn at random). A person is then right with probability
e = (1 - position) * person_accuracy + position / 2, so the planted values are exact: kappa(critic, person) =
(2 critic_accuracy - 1)(2e - 1), kappa(person, person) = (2e - 1)^2, and the share choosing A = 1/2 + position / 2.

Ratings: each item has a quality z ~ N(0, 1); the critic gives round(5.5 + 2 (z + noise)) clipped to 1-10, with
noise ~ N(0, critic_sd), and each person the same with person_sd. The planted alphas are measured once on a large
sample (`planted_ratings`). Used by the tests and by benchmarks/people_agreement.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from .items import Item, Kind
from .plan import Plan, Slot
from .statistics import ordinal_alpha
from .storage import Judgment


@dataclass(frozen=True)
class Planted:
    """The true values a simulation plants."""

    critic_kappa: float
    people_kappa: float
    share_a: float


def planted_pairs(critic_accuracy: float, person_accuracy: float, position: float = 0.0) -> Planted:
    """The exact kappas and position share of `simulated_pairs` with these settings."""
    e = (1 - position) * person_accuracy + position / 2
    return Planted((2 * critic_accuracy - 1) * (2 * e - 1), (2 * e - 1) ** 2, 0.5 + position / 2)


def boundary_accuracy(person_accuracy: float, position: float, margin: float) -> float:
    """The critic accuracy whose kappa is exactly the people's kappa minus `margin` (non-inferiority's edge)."""
    e = (1 - position) * person_accuracy + position / 2
    return 0.5 + ((2 * e - 1) - margin / (2 * e - 1)) / 2


def _item(k: int, kind: Kind, scores: dict[str, float | None], texts: dict[str, str], pairing: str = "") -> Item:
    return Item(
        id=f"sim{k:05d}@{pairing}" if pairing else f"sim{k:05d}",
        kind=kind,
        what="outputs",
        cell_id="sim",
        run_id=f"run{k}",
        task_id="sim",
        loop="sim",
        critic="sim-critic",
        pairing=pairing or "sim / sim-critic",
        input="simulated",
        texts=texts,
        critic_scores=scores,
        order=list(texts),
    )


def simulated_pairs(
    n_items: int,
    people: int,
    critic_accuracy: float,
    person_accuracy: float,
    *,
    position: float = 0.0,
    repeats: int = 0,
    returned: float = 0.5,
    pairing: str = "sim / sim-critic",
    seed: int = 0,
) -> tuple[Plan, list[Judgment]]:
    """A pairwise plan and every person's judgment of every item (and `repeats` items judged twice by each); the
    returned side is the better one with probability `returned` (the planted kappas assume 1/2)."""
    rng = random.Random(seed)
    items, judgments, slots = [], [], []
    for k in range(n_items):
        truth = "returned" if rng.random() < returned else "start"
        other = "start" if truth == "returned" else "returned"
        seen = truth if rng.random() < critic_accuracy else other
        scores: dict[str, float | None] = {
            "start": 6.0 if seen == "start" else 5.0,
            "returned": 6.0 if seen == "returned" else 5.0,
        }
        items.append(_item(k, "pair", scores, {"start": "s", "returned": "r"}, pairing))
        slots.append(Slot(position=k, item=items[-1].id, shown=["start", "returned"]))
        for p in range(people):
            for _ in range(2 if k < repeats else 1):
                shown = rng.sample(["start", "returned"], 2)
                if rng.random() < position:
                    value = "A"
                else:
                    side = truth if rng.random() < person_accuracy else other
                    value = "A" if shown[0] == side else "B"
                judgments.append(Judgment(item=items[-1].id, person=f"p{p}", value=value, shown=shown, position=k))
    return Plan(kind="pair", seed=seed, items=items, slots=slots), judgments


def _rating(z: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    return np.clip(np.round(5.5 + 2 * (z + rng.normal(0, sd, len(z)))), 1, 10)


def simulated_ratings(
    n_items: int, people: int, critic_sd: float, person_sd: float, *, seed: int = 0
) -> tuple[Plan, list[Judgment]]:
    """A rating plan and every person's rating of every item."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1, n_items)
    critic = _rating(z, critic_sd, rng)
    ratings = [_rating(z, person_sd, rng) for _ in range(people)]
    items = [_item(k, "rating", {"returned": float(critic[k])}, {"returned": "r"}) for k in range(n_items)]
    slots = [Slot(position=k, item=i.id, shown=["returned"]) for k, i in enumerate(items)]
    judgments = [
        Judgment(item=items[k].id, person=f"p{p}", value=int(ratings[p][k]), shown=["returned"], position=k)
        for p in range(people)
        for k in range(n_items)
    ]
    return Plan(kind="rating", seed=seed, items=items, slots=slots), judgments


def planted_ratings(critic_sd: float, person_sd: float, n: int = 20000, seed: int = 12345) -> dict[str, float]:
    """The population values of `simulated_ratings`, measured once on `n` items: 'critic_alpha' (critic and one
    person as two coders), 'people_alpha', 'critic_rho' and 'people_rho'."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1, n)
    critic, a, b = _rating(z, critic_sd, rng), _rating(z, person_sd, rng), _rating(z, person_sd, rng)
    return {
        "critic_alpha": float(ordinal_alpha(np.vstack([critic, a])) or 0.0),
        "people_alpha": float(ordinal_alpha(np.vstack([a, b])) or 0.0),
        "critic_rho": float(spearmanr(critic, a).statistic),
        "people_rho": float(spearmanr(a, b).statistic),
    }


__all__ = [
    "Planted",
    "boundary_accuracy",
    "planted_pairs",
    "planted_ratings",
    "simulated_pairs",
    "simulated_ratings",
]
