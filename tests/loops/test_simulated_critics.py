"""Simulated critics (`sim/...`): known formulas, no model call, parameters recorded, refused where they
cannot work, before any call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

import promptlab
from promptlab.critics.simulated import SIM_CRITICS, parse_sim
from promptlab.errors import ConfigError, UnknownModelError
from promptlab.llm.call.preflight import preflight, validate_model_name
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.loops.p3ro.config import P3ROConfig
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.loops.pcee.loop import PCEEConfig
from promptlab.record import Example, Split, Task
from promptlab.sweeps.cells import Cell, preflight_cells

EXAMPLES = [Example(input=f"item {i}", target="yes") for i in range(12)]
TASK = Task(
    id="sim",
    prompt="Q start",
    goal="answer yes",
    examples=EXAMPLES,
    scorer={"kind": "exact"},
    split=Split(seed=0, dev=8),
)
REWRITES = ["A one", "B two", "C three"]
YES_ITEMS = {"Q": 2, "A": 4, "B": 7, "C": 10}
"""Each prompt (by its first letter) answers items 0..n-1 of the 12 right: different dev accuracies."""


def target_reply(messages: list[dict[str, Any]]) -> str:
    text = messages[-1]["content"]
    return "yes" if int(text.rsplit("item ", 1)[1]) < YES_ITEMS[text[0]] else "no"


def models(name: str) -> tuple[Any, Any]:
    creator = promptlab.scripted(f"{name}-creator", respond=lambda m, q=list(REWRITES): q.pop(0))
    return creator, promptlab.scripted(f"{name}-target", respond=target_reply)


def cc_run(name: str, critic: str | list[str], **kw: Any) -> tuple[Any, Any]:
    creator, target = models(name)
    pick = {"critic_models": critic} if isinstance(critic, list) else {"critic_model": critic}
    cfg = CreatorCriticConfig(
        model=creator.name, target_model=target.name, max_iterations=3, final="best", **pick, **kw
    )
    return run_creator_critic(TASK, cfg, cache=False), creator


def test_oracle_scores_one_plus_nine_times_dev_accuracy_without_a_call() -> None:
    run, creator = cc_run("sim-oracle", "sim/oracle")
    assert [it.index for it in run.iterations] == [0, 1, 2, 3]
    for it in run.iterations:
        (score,) = it.scores
        assert score.score == pytest.approx(1 + 9 * it.grounded.score) and score.mode == "simulated"
        assert "1 + 9 a" in score.justification
        (step,) = [s for s in it.steps if s.phase == "critique"]
        assert step.call is None and step.model == "sim/oracle" and step.role == "critic[1]"
    assert len({it.grounded.score for it in run.iterations}) > 2  # the scripted prompts differ in accuracy
    # every call of the run was the creator's or the target's: the critic made none
    assert run.totals.calls == len(creator.requests) + 4 * 8 + 2 * 4
    assert run.info["simulated_critics"] == {"sim/oracle": {"kind": "oracle", "params": {}, "formula": "1 + 9 a"}}
    assert run.final_output == "C three"  # the critic decides, and the oracle prefers the most accurate prompt


def test_noisy_critic_is_seeded_clipped_and_recorded() -> None:
    run, _ = cc_run("sim-noisy", "sim/noisy?sd=2&seed=7")
    again, _ = cc_run("sim-noisy-again", "sim/noisy?sd=2&seed=7")
    other, _ = cc_run("sim-noisy-other", "sim/noisy?sd=2&seed=8")
    scores = [it.average for it in run.iterations]
    assert scores == [it.average for it in again.iterations]  # a pure function of seed, sample and candidate
    assert scores != [it.average for it in other.iterations]
    assert all(1.0 <= s <= 10.0 for s in scores)
    assert any(abs(s - (1 + 9 * it.grounded.score)) > 0.01 for s, it in zip(scores, run.iterations, strict=True))
    assert run.info["simulated_critics"]["sim/noisy?sd=2&seed=7"]["params"] == {"sd": 2.0, "seed": 7}
    zero, _ = cc_run("sim-noisy-0", "sim/noisy?sd=0")
    assert [it.average for it in zero.iterations] == pytest.approx(
        [1 + 9 * it.grounded.score for it in zero.iterations]
    )


def test_formulas_of_every_kind() -> None:
    assert parse_sim("sim/oracle").score(0.5, "x", sample=0, criterion="c") == 5.5
    assert parse_sim("sim/length?per_100=2").score(0.5, "x" * 150, sample=0, criterion="c") == pytest.approx(8.5)
    assert parse_sim("sim/length").score(1.0, "x" * 300, sample=0, criterion="c") == 10.0  # clipped
    assert parse_sim("sim/constant?value=3").score(0.9, "x", sample=0, criterion="c") == 3.0
    draws = [parse_sim("sim/random?seed=1").score(0.5, "x", sample=s, criterion="c") for s in range(200)]
    assert 1 <= min(draws) < 2 and 9 < max(draws) <= 10
    noisy = parse_sim("sim/noisy?sd=1.5")
    errors = [noisy.score(0.5, f"p{i}", sample=0, criterion="c") - 5.5 for i in range(2000)]
    assert abs(sum(errors) / len(errors)) < 0.1 and 1.4 < (sum(e * e for e in errors) / len(errors)) ** 0.5 < 1.6
    assert noisy.score(None, "x", sample=0, criterion="c") is None
    assert set(SIM_CRITICS) == {"oracle", "noisy", "length", "constant", "random", "biased"}


def test_biased_critic_plants_each_bias_at_its_size() -> None:
    critic = parse_sim("sim/biased?per_100=0.5&inflation=0.25&anchor=0.4")
    assert critic.params == {"per_100": 0.5, "inflation": 0.25, "first": 0.0, "anchor": 0.4, "sd": 0.0, "seed": 0}
    plain = critic.score(0.5, "x" * 200, sample=0, criterion="c", iteration=2)
    assert plain == pytest.approx(1 + 4.5 + 1.0 + 0.5)
    shown = critic.score(0.5, "x" * 200, sample=0, criterion="c", iteration=2, anchor=9.0)
    assert shown == pytest.approx(0.6 * plain + 0.4 * 9.0)
    assert parse_sim("sim/biased").score(0.5, "x" * 900, sample=0, criterion="c", iteration=5, anchor=1) == 5.5
    # pairwise: always the first shown at first=1; by the higher score otherwise
    always = parse_sim("sim/biased?first=1")
    assert {always.prefer((0.1, "a"), (0.9, "b"), sample=s, criterion="c") for s in range(20)} == {0}
    fair = parse_sim("sim/biased")
    assert fair.prefer((0.1, "a"), (0.9, "b"), sample=0, criterion="c") == 1
    assert fair.prefer((0.9, "b"), (0.1, "a"), sample=0, criterion="c") == 0
    half = parse_sim("sim/biased?first=0.5")
    firsts = sum(half.prefer((0.1, f"a{s}"), (0.9, "b"), sample=s, criterion="c") == 0 for s in range(2000))
    assert 900 < firsts < 1100
    assert fair.prefer((None, "a"), (0.5, "b"), sample=0, criterion="c") is None


@pytest.mark.parametrize(
    "name, words",
    [
        ("sim/perfect", "known: sim/oracle, sim/noisy"),
        ("sim/noisy?sigma=1", "no parameter sigma (its parameters: sd, seed)"),
        ("sim/noisy?sd=-1", "sd must be a number >= 0, got '-1'"),
        ("sim/noisy?sd=lots", "sd must be a number >= 0, got 'lots'"),
        ("sim/noisy?seed=1.5", "seed must be a whole number >= 0"),
        ("sim/constant?value=11", "value must be a number from 1 to 10"),
        ("sim/oracle?sd=1", "no parameter sd (its parameters: none)"),
        ("sim/biased?first=1.5", "first must be a probability from 0 to 1, got '1.5'"),
        ("sim/biased?anchor=-0.1", "anchor must be a weight from 0 to 1, got '-0.1'"),
        ("sim/biased?inflation=nan", "inflation must be a number, got 'nan'"),
    ],
)
def test_bad_names_say_what_is_wrong(name: str, words: str) -> None:
    with pytest.raises(UnknownModelError, match=words.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        validate_model_name(name)
    with pytest.raises(ConfigError, match="sim/"):
        preflight(["fake/auto", name])
    with pytest.raises(ValidationError, match="critic_model"):
        CreatorCriticConfig(critic_model=name)


def test_preflight_and_sweeps_know_them() -> None:
    preflight(["sim/oracle", "sim/noisy?sd=1&seed=2"])  # no key, no file: nothing to check beyond the name
    creator, target = models("sim-sweep")
    cells = [
        Cell(
            "c1",
            "creator_critic",
            {"critic_model": m},
            {"model": creator.name, "target_model": target.name, "critic_model": m},
        )
        for m in ("sim/oracle", "sim/noisy?sd=1")
    ]
    preflight_cells(cells, [TASK], priced=True)  # a simulated critic has no price to know: never refused
    bare = Task(id="bare", prompt="p", goal="g")
    with pytest.raises(ConfigError, match="simulated critic.*task 'bare' has no examples"):
        preflight_cells(cells, [bare])


def test_refused_on_a_task_without_examples_before_any_call() -> None:
    creator, _ = models("sim-bare")
    bare = Task(id="bare", prompt="p", goal="g")
    with pytest.raises(ConfigError, match="critic_model: sim/oracle is a simulated critic.*no examples"):
        run_creator_critic(bare, CreatorCriticConfig(model=creator.name, critic_model="sim/oracle"))
    with pytest.raises(ConfigError, match="simulated critic"):
        run_p3ro(bare, P3ROConfig(model=creator.name, critic_model="sim/noisy"))
    assert creator.requests == []


def test_only_critic_roles_of_the_prompt_loops() -> None:
    with pytest.raises(ValidationError, match="generator_model: 'sim/oracle' is a simulated critic.*'creator'"):
        CreatorCriticConfig(generator_model="sim/oracle")
    with pytest.raises(ValidationError, match="model: 'sim/oracle'"):
        P3ROConfig(model="sim/oracle", critic_model="fake/auto")
    with pytest.raises(ValidationError, match="this loop takes none"):
        PCEEConfig(critic_model="sim/oracle")
    with pytest.raises(ConfigError, match="target_model"):
        run_creator_critic(TASK, CreatorCriticConfig(model="fake/auto", target_model="sim/oracle"))
    with pytest.raises(ConfigError, match="makes no model call"):
        promptlab.complete("sim/oracle", "hello", cache=False)
    P3ROConfig(role_models={"evaluator": "sim/oracle"})  # the evaluator is P³RO's critic


def test_several_simulated_critics_and_expected_mode() -> None:
    run, _ = cc_run("sim-panel", ["sim/oracle", "sim/constant?value=2"], score_mode="expected")
    for it in run.iterations:
        assert [s.score for s in it.scores] == pytest.approx([1 + 9 * it.grounded.score, 2.0])
        assert it.average == pytest.approx((1 + 9 * it.grounded.score + 2.0) / 2)
    assert set(run.info["simulated_critics"]) == {"sim/oracle", "sim/constant?value=2"}


def test_p3ro_with_a_simulated_evaluator() -> None:
    crit = ["Clear", "Formatted", "Short"]
    gens = iter(json.dumps({"prompt_text": r, "reasoning": "r"}) for r in REWRITES)

    def respond(messages: list[dict[str, Any]]) -> str:
        first = messages[0]["content"]
        if first.startswith("You turn a vague goal"):
            return json.dumps({"criteria": crit})
        if first.startswith("You plan how"):
            return json.dumps({"plan": "1. be clear"})
        if first.startswith("You rewrite prompts"):
            return next(gens)
        return target_reply(messages)

    model = promptlab.scripted("sim-p3", respond=respond)
    run = run_p3ro(
        TASK, P3ROConfig(model=model.name, critic_model="sim/noisy?sd=1&seed=3", max_iterations=3), cache=False
    )
    assert [it.index for it in run.iterations] == [0, 1, 2, 3]
    for it in run.iterations:
        assert [s.criterion for s in it.scores] == crit and all(s.mode == "simulated" for s in it.scores)
    assert any(len({s.score for s in it.scores}) == 3 for it in run.iterations)  # noise drawn per criterion
    assert not any(
        r["messages"][0]["content"].startswith(("You are a strict", "You turn an evaluation")) for r in model.requests
    )  # no evaluator call, and no words for the reflector to read
