"""What Creator/Critic's creator is shown: the latest version's wrong answers on dev (`show_errors`), and
whether it sees the critique (`show_critique`); a real run under any threshold and cap equals the truncation
of a longer logged run (what counterfactual stopping relies on)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from yes_task import critique as yes_critique
from yes_task import run_cc, target_reply, yes_task

import promptlab
from promptlab.analysis.stopping import counterfactual_stopping
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.results.frames import tidy

TASK = yes_task("BAD start", id="fb")


def critique(score: float) -> str:
    return yes_critique(score, "too vague")


def cc(name: str, rewrites: list[str], scores: list[float], **kw: Any) -> tuple[Any, Any]:
    """A run whose creator writes `rewrites` in turn (and records its prompts) and whose critic gives `scores`."""
    return run_cc(name, rewrites, scores, TASK, weakness="too vague", **kw)


def shown_items(prompt: str) -> list[int]:
    """The dev items whose wrong answers a creator prompt shows."""
    return [int(i) for i in re.findall(r"Input: item (\d+)\nExpected output: yes\nThe model's answer: no", prompt)]


def test_show_errors_shows_the_latest_versions_wrong_answers() -> None:
    """The first rewrite sees the start's wrong answers, the second those of the HALF rewrite (odd items only),
    the third is told the GOOD rewrite made none; the critique is still shown (show_critique's default)."""
    run, creator = cc("fb-errors", ["HALF v1", "GOOD v2", "GOOD v3"], [3, 4, 5, 6], max_iterations=3, show_errors=2)
    first, second, third = creator.prompts
    dev_items = [int(s.output["example"]) for s in run.iterations[0].steps if s.phase == "score_dev"]
    assert len(dev_items) == 6
    assert len(shown_items(first)) == 2 and "Latest version:\nBAD start" in first
    odd = [i for i in shown_items(second)]
    assert len(odd) == 2 and all(i % 2 == 1 for i in odd) and "Latest version:\nHALF v1" in second
    assert "answered every example it was tried on correctly" in third and not shown_items(third)
    assert "weakness: too vague" in second and "critic[1]: score 4/10" in second


def test_show_errors_draws_differ_by_sample_and_stay_within_the_wrong_answers() -> None:
    """Which wrong answers are shown is drawn by the run's sample: over samples, more than one set is shown,
    each of the asked size (the start gets all 6 dev items wrong)."""
    seen = set()
    for sample in range(6):
        creator = promptlab.scripted(f"fb-draw-{sample}-creator", respond="HALF v1")
        critic = promptlab.scripted(f"fb-draw-{sample}-critic", respond=critique(5))
        target = promptlab.scripted(f"fb-draw-{sample}-target", respond=target_reply)
        cfg = CreatorCriticConfig(
            model=creator.name, critic_model=critic.name, target_model=target.name, max_iterations=1, show_errors=3
        )
        run_creator_critic(TASK, cfg, cache=False, sample=sample)
        items = shown_items(creator.prompts[0])
        assert len(items) == 3 and items == sorted(items)
        seen.add(tuple(items))
    assert len(seen) > 1


def test_show_critique_false_makes_the_rewrites_independent_of_the_critic() -> None:
    """Without the critique, two critics that score differently get the same creator prompts; by default the
    creator prompt holds the critique, and with neither field set the design-document template is used."""
    _, low = cc("fb-blind-low", ["HALF v1", "HALF v2"], [2, 2, 2], max_iterations=2, show_errors=3, show_critique=False)
    _, high = cc(
        "fb-blind-high", ["HALF v1", "HALF v2"], [9, 8, 7], max_iterations=2, show_errors=3, show_critique=False
    )
    assert low.prompts == high.prompts and "too vague" not in low.prompts[1] and "score" not in low.prompts[1]
    _, seen = cc("fb-seen", ["HALF v1", "HALF v2"], [2, 2, 2], max_iterations=2, show_errors=3)
    assert "too vague" in seen.prompts[1]
    _, plain = cc("fb-plain", ["HALF v1", "HALF v2"], [2, 2, 2], max_iterations=2)
    assert "Critique of the latest version:\ncritic[1]: score 2/10" in plain.prompts[1]
    assert "answered these examples wrongly" not in plain.prompts[1]


@pytest.mark.parametrize(("threshold", "cap"), [(10.0, 1), (10.0, 2), (5.0, 3), (4.0, 2)])
def test_a_real_run_equals_the_truncation_of_a_longer_logged_run(threshold: float, cap: int) -> None:
    """With the creator shown its errors (and the critique), a run under threshold t and cap k returns what
    counterfactual stopping reads off a logged run of cap 3 and a threshold never reached: same stop, same
    returned prompt's dev score (its rewrites depend on neither t nor k)."""
    rewrites, scores = ["HALF v1", "BAD v2", "GOOD v3"], [3.0, 5.0, 4.0, 6.0]
    kw = {"show_errors": 2, "final": "best", "score_source": "critic"}
    logged, _ = cc(f"fb-log-{threshold}-{cap}", rewrites, scores, max_iterations=3, finish_threshold=10.0, **kw)
    real, _ = cc(f"fb-real-{threshold}-{cap}", rewrites, scores, max_iterations=cap, finish_threshold=threshold, **kw)
    traj = tidy([logged], {}, "cell")[0]
    row = counterfactual_stopping(traj, [threshold], [cap], per_run=True, configs={logged.run_id: logged.config})
    assert bool(row["exact"].iloc[0])
    assert int(row["stop"].iloc[0]) == len(real.iterations) - 1  # rewrites kept
    chosen = real.iterations[real.info["final_iteration"]]
    assert row["grounded"].iloc[0] == pytest.approx(chosen.grounded.score)
    assert int(row["returned_iteration"].iloc[0]) == real.info["final_iteration"]
