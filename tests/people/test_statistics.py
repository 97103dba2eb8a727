"""The statistics recover what simulated people plant (a few replications here; the coverage over 200 is
benchmarks/people_agreement.py's), agree with the libraries they stand on, and give the verdicts the numbers say."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from promptlab.people.agreement import critic_agreement
from promptlab.people.judged import judged_frame
from promptlab.people.simulated import planted_pairs, planted_ratings, simulated_pairs, simulated_ratings
from promptlab.people.statistics import agreement, kappa, label_table
from promptlab.people.verdicts import (
    AS_OFTEN,
    LESS,
    NO_CEILING,
    NOT_ENOUGH,
    position_table,
    refinement_table,
    verdict,
)


def test_kappa_and_agreement_are_statsmodels_on_the_summed_tables() -> None:
    a, b = label_table([(0, 0), (2, 2), (2, 0)]), label_table([(2, 2), (0, 2), (1, 1)])
    total = a + b
    assert kappa([a, b]) == pytest.approx(cohens_kappa(total, return_results=False))
    assert agreement([a, b]) == pytest.approx(4 / 6)
    assert kappa([label_table([(2, 2), (2, 2)])]) is None  # one label in use: kappa is undefined, not 0 or 1


def test_pairs_recover_the_planted_kappas_and_position_preference() -> None:
    truth = planted_pairs(0.8, 0.85, 0.2)
    critic, people, share, selves, covered = [], [], [], [], 0
    for seed in range(4):
        plan, judgments = simulated_pairs(150, 3, 0.8, 0.85, position=0.2, repeats=150, seed=seed)
        frame = judged_frame(plan, judgments)
        ca = critic_agreement("sim-critic", frame, "pair", n_boot=300, seed=seed)
        c, p = ca.measures["critic vs people", "corrected"], ca.measures["people vs people", "corrected"]
        critic.append(c.value)
        people.append(p.value)
        covered += (c.low <= truth.critic_kappa <= c.high) + (p.low <= truth.people_kappa <= p.high)
        share.append(position_table(frame, n_boot=200).iloc[0]["share_a"])
        selves.append(ca.measures["people vs themselves", "corrected"].value)  # 450 repeat pairs each
    assert np.mean(critic) == pytest.approx(truth.critic_kappa, abs=0.04)
    assert np.mean(people) == pytest.approx(truth.people_kappa, abs=0.04)
    assert np.mean(share) == pytest.approx(truth.share_a, abs=0.03)
    assert np.mean(selves) == pytest.approx(truth.people_kappa, abs=0.08)  # a repeat is planted as another person
    assert covered >= 7  # of 8 intervals


def test_ratings_recover_the_planted_alpha_and_spearman() -> None:
    truth = planted_ratings(0.7, 0.5, n=8000)
    found: dict[str, list[float]] = {"critic": [], "people": [], "rho": []}
    for seed in range(3):
        plan, judgments = simulated_ratings(150, 3, 0.7, 0.5, seed=seed)
        ca = critic_agreement("sim-critic", judged_frame(plan, judgments), "rating", n_boot=100, seed=seed)
        found["critic"].append(ca.measures["critic vs people", "corrected"].value)
        found["people"].append(ca.measures["people vs people", "corrected"].value)
        found["rho"].append(ca.measures["critic vs people", "agreement"].value)
    assert np.mean(found["critic"]) == pytest.approx(truth["critic_alpha"], abs=0.04)
    assert np.mean(found["people"]) == pytest.approx(truth["people_alpha"], abs=0.04)
    assert np.mean(found["rho"]) == pytest.approx(truth["critic_rho"], abs=0.04)
    assert truth["people_alpha"] > truth["critic_alpha"]  # the people were planted less noisy


def _verdict(n_items: int, critic_accuracy: float, seed: int = 0, person_accuracy: float = 0.85) -> object:
    plan, judgments = simulated_pairs(n_items, 3, critic_accuracy, person_accuracy, seed=seed)
    return verdict(critic_agreement("c", judged_frame(plan, judgments), "pair", n_boot=400, seed=seed))


def test_the_verdict_says_what_the_numbers_say() -> None:
    good = _verdict(300, 0.95)
    assert good.verdict == AS_OFTEN and good.low > -0.1  # type: ignore[attr-defined]
    worse = _verdict(300, 0.6)
    assert worse.verdict == LESS and worse.high < 0  # type: ignore[attr-defined]
    few = _verdict(8, 0.95)
    assert few.verdict == NOT_ENOUGH and few.more_items == 2  # type: ignore[attr-defined]
    edge = _verdict(40, 0.82)  # between: the interval straddles both bounds
    assert edge.verdict == NOT_ENOUGH and edge.more_items is not None and edge.more_items > 0  # type: ignore[attr-defined]


def test_no_verdict_against_people_who_agree_only_by_chance() -> None:
    # people planted at chance (accuracy 0.5: kappa 0): a critic at chance differs from them by ~0, which would
    # pass "as often as people"; with no ceiling above chance the verdict says so instead
    for seed in range(3):
        chance = _verdict(300, 0.5, seed=seed, person_accuracy=0.5)
        assert chance.verdict == NO_CEILING, chance  # type: ignore[attr-defined]
    assert _verdict(300, 0.95, person_accuracy=0.85).verdict == AS_OFTEN  # type: ignore[attr-defined]


def test_refinement_by_people_per_pairing_with_holm() -> None:
    frames = [
        judged_frame(*simulated_pairs(80, 3, 0.8, 0.9, returned=r, pairing=p, seed=s))
        for r, p, s in ((0.85, "g / helped", 1), (0.5, "g / same", 2))
    ]
    table = refinement_table(pd.concat(frames), n_boot=300).set_index("pairing")
    planted = 0.85 * 0.9 + 0.15 * 0.1
    assert table.loc["g / helped", "returned_share"] == pytest.approx(planted, abs=0.06)
    assert table.loc["g / helped", "p_holm"] < 0.01 and table.loc["g / helped", "rank"] == 1
    assert table.loc["g / same", "low"] < 0.5 < table.loc["g / same", "high"]
    assert table.loc["g / same", "p_holm"] >= table.loc["g / same", "p"]
