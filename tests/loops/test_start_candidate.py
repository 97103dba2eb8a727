"""The starting prompt as candidate 0 in grounded P³RO and Creator/Critic (include_start)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from yes_task import run_cc, target_reply, yes_task

import promptlab
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.router import route
from promptlab.loops.p3ro.config import P3ROConfig
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.record import Task
from promptlab.results.frames import tidy

task = yes_task


def cc(name: str, rewrites: list[str], critic_scores: list[float], **kw: Any) -> tuple[Any, Any]:
    """A Creator/Critic run whose creator writes `rewrites` in turn and whose critic gives `critic_scores`."""
    return run_cc(name, rewrites, critic_scores, kw.pop("task", None) or task(), **kw)


def test_creator_critic_returns_the_start_when_no_rewrite_beats_it() -> None:
    """The issue's scripted check: the start scores 1.0 on dev, the rewrites 0.0-0.5, and the loop used to
    return a rewrite (test accuracy fell). Now the start is candidate 0 and is returned."""
    run, _ = cc(
        "st-cc", ["BAD v1", "HALF v2", "BAD v3"], [9, 2, 8, 3], score_source="grounded", final="best", max_iterations=3
    )
    assert [it.index for it in run.iterations] == [0, 1, 2, 3]
    zero = run.iterations[0]
    assert zero.candidate == "GOOD start" and zero.grounded.score == 1.0 and zero.average == 9.0
    assert zero.decision_score == 10.0 and zero.decision == "CONTINUE"
    assert [it.grounded.score for it in run.iterations[1:]] == [0.0, 0.5, 0.0]
    assert run.final_output == "GOOD start" and run.info["final_iteration"] == 0 and run.best_iteration == 0
    assert run.info["include_start"] is True and run.delta.value == 0.0
    assert run.stop_reason == "max_iterations"  # no threshold: the cap counts the three rewrites
    seed, _ = cc(
        "st-cc-seed",
        ["BAD v1", "HALF v2", "BAD v3"],
        [2, 8, 3],
        score_source="grounded",
        final="best",
        max_iterations=3,
        include_start=False,
    )
    assert [it.index for it in seed.iterations] == [1, 2, 3] and seed.final_output == "HALF v2"
    assert seed.info["include_start"] is False and seed.delta.value < 0  # the design document's behaviour


def test_candidate_0_changes_no_rewrite() -> None:
    """Generation is unchanged: the creator is asked exactly the same prompts with or without candidate 0."""
    _, with_start = cc("st-gen-a", ["HALF v1", "BAD v2"], [4, 5, 6], max_iterations=2)
    _, without = cc("st-gen-b", ["HALF v1", "BAD v2"], [5, 6], max_iterations=2, include_start=False)
    assert with_start.prompts == without.prompts and len(without.prompts) == 2


def test_a_start_at_the_threshold_ends_the_run_at_iteration_0() -> None:
    run, creator = cc("st-stop", ["BAD v1"], [3], score_source="grounded", finish_threshold=9.0)
    assert [it.index for it in run.iterations] == [0] and run.stop_reason == "threshold"
    assert run.iterations[0].decision == "FINISH" and creator.requests == []
    assert run.final_output == "GOOD start" and run.final_test.score == run.baseline_test.score == 1.0


def test_patience_counts_candidate_0_and_the_cap_counts_rewrites() -> None:
    cfg = CreatorCriticConfig(finish_threshold=8, patience=2, max_iterations=2)
    assert route([9.0], cfg, start=True).action == "CONTINUE"
    assert route([9.0, 8.5], cfg, start=True).action == "FINISH"  # two in a row, the start included
    assert route([1.0, 2.0], cfg, start=True).action == "CONTINUE"  # one rewrite of two
    assert route([1.0, 2.0, 3.0], cfg, start=True).action == "FINISH"
    assert route([1.0, 2.0], cfg).action == "FINISH"  # without a start both are rewrites


def test_a_task_without_examples_has_no_candidate_0_unless_asked() -> None:
    bare = Task(id="bare", prompt="p", goal="g")
    run, _ = cc("st-bare", ["v1"], [4], task=bare, max_iterations=1)
    assert [it.index for it in run.iterations] == [1] and run.info["include_start"] is False
    asked, _ = cc("st-bare-asked", ["v1"], [7, 4], task=bare, max_iterations=1, include_start=True, final="best")
    assert [it.index for it in asked.iterations] == [0, 1] and asked.final_output == "p"  # the critic preferred it


def p3ro_model(name: str, rewrites: list[str], score: float = 4) -> Any:
    crit = ["Clear", "Formatted", "Short"]
    gens = iter(rewrites)

    def respond(messages: list[dict[str, Any]]) -> str:
        first = messages[0]["content"]
        if first.startswith("You turn a vague goal"):
            return json.dumps({"criteria": crit})
        if first.startswith("You plan how"):
            return json.dumps({"plan": "1. be clear"})
        if first.startswith("You rewrite prompts"):
            return json.dumps({"prompt_text": next(gens), "reasoning": "r"})
        if first.startswith("You are a strict reviewer"):
            return json.dumps(
                {
                    "scores": [{"criterion": c, "score": score, "justification": "j"} for c in crit],
                    "qualitative_feedback": "f",
                }
            )
        if first.startswith("You turn an evaluation"):
            return json.dumps({"summary": "lesson"})
        return target_reply(messages)

    return promptlab.scripted(name, respond=respond)


def test_p3ro_scores_the_start_as_candidate_0_and_can_return_it() -> None:
    model = p3ro_model("st-p3", ["BAD v1", "HALF v2", "BAD v3"])
    run = run_p3ro(
        task("HALF start"), P3ROConfig(model=model.name, score_source="grounded", max_iterations=3), cache=False
    )
    assert [it.index for it in run.iterations] == [0, 1, 2, 3]
    zero = run.iterations[0]
    assert zero.candidate == "HALF start" and zero.average == 4.0 and zero.grounded.score == 0.5
    assert zero.decision == "CONTINUE_PROBING" and "candidate 0" in (zero.reason or "")
    # the router sees the rewrites only: iteration 1 has nothing to compare with, as without candidate 0
    assert run.iterations[1].decision == "CONTINUE_PROBING"
    assert run.final_output == "HALF start" and run.info["final_iteration"] == 0  # HALF v2 ties: the earliest
    assert "Chosen prompt: the starting prompt (candidate 0)" in (run.summary or "")
    frames = tidy([run], {}, "cell")
    traj, runs = frames
    assert sorted(traj["iteration"].unique().tolist()) == [0, 1, 2, 3]
    assert runs["iterations_used"].iloc[0] == 3 and runs["final_iteration"].iloc[0] == 0


def test_p3ro_stops_at_candidate_0_without_planning() -> None:
    model = p3ro_model("st-p3-stop", ["BAD v1"])
    run = run_p3ro(task(), P3ROConfig(model=model.name, score_source="grounded", finish_threshold=9.5), cache=False)
    assert [it.index for it in run.iterations] == [0] and run.stop_reason == "threshold"
    assert not any(
        p["messages"][0]["content"].startswith(("You plan how", "You rewrite prompts")) for p in model.requests
    )
    assert run.info["plans"] == [] and run.final_output == "GOOD start"


@pytest.mark.parametrize("seed", range(6))
def test_grounded_best_never_returns_a_prompt_worse_than_the_start_on_dev(seed: int) -> None:
    """Under score_source=grounded and final=best the returned prompt's dev score is at least the start's,
    whatever the start and the rewrites score."""
    import random

    rng = random.Random(seed)
    kinds = ["GOOD", "HALF", "BAD"]
    start = f"{rng.choice(kinds)} start"
    rewrites = [f"{rng.choice(kinds)} v{i}" for i in range(1, 4)]
    run, _ = cc(
        f"st-prop-{seed}",
        rewrites,
        [5, 5, 5, 5],
        task=task(start),
        score_source="grounded",
        final="best",
        max_iterations=3,
    )
    chosen = next(it for it in run.iterations if it.index == run.info["final_iteration"])
    assert chosen.grounded.score >= run.iterations[0].grounded.score
    model = p3ro_model(f"st-prop-p3-{seed}", rewrites)
    p3 = run_p3ro(task(start), P3ROConfig(model=model.name, score_source="grounded", max_iterations=3), cache=False)
    chosen = next(it for it in p3.iterations if it.index == p3.info["final_iteration"])
    assert chosen.grounded.score >= p3.iterations[0].grounded.score
