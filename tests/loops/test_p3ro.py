"""P³RO: the router as a pure function, and whole runs against a scripted model (plus one local run)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import promptlab
from promptlab.errors import ConfigError
from promptlab.events import EventList
from promptlab.llm.call.settings import Settings
from promptlab.loops.p3ro.config import P3ROConfig
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.loops.p3ro.router import route
from promptlab.loops.p3ro.schemas import EvaluationResult, match_scores
from promptlab.loops.registry import get_loop, run_loop
from promptlab.record import Run, Task

CRITERIA = ["Clarity of the task", "Names the target audience", "Specifies the output format"]
TASK = Task(id="poem", prompt="Write a poem about the sea.", goal="Make it vivid and specific.")
MARKERS = {
    "decomposer": "You turn a vague goal",
    "strategist": "You plan how to improve",
    "generator": "You rewrite prompts",
    "evaluator": "You are a strict reviewer",
    "reflector": "You turn an evaluation",
    "reflector-override": "OVERRIDE reflect",
}


def criteria(*names: str) -> str:
    return json.dumps({"criteria": list(names or CRITERIA)})


def plan(text: str) -> str:
    return json.dumps({"plan": text})


def gen(text: str) -> str:
    return json.dumps({"prompt_text": text, "reasoning": f"because {text}"})


def ev(*scores: int | None, names: list[str] | None = None) -> str:
    names = names or CRITERIA
    items = [
        {"criterion": n, "score": s, "justification": f"{n} looks {s}"}
        for n, s in zip(names, scores, strict=False)
        if s is not None
    ]
    return json.dumps({"scores": items, "qualitative_feedback": "fix the weakest criterion"})


def refl(text: str) -> str:
    return json.dumps({"summary": text})


Reply = str | Callable[[list[dict[str, Any]]], str]


class Script:
    """A scripted model that answers each P³RO role from its own queue (the last reply repeats) and
    records which role asked, in order."""

    def __init__(self, name: str, **queues: list[Reply]) -> None:
        self.queues: dict[str, list[Reply]] = {
            "decomposer": [criteria()],
            "strategist": [plan("plan A")],
            "reflector": [refl("lesson")],
            **queues,
        }
        self.roles: list[str] = []
        self.model = promptlab.scripted(name, respond=self)
        self.name = self.model.name

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        first = messages[0]["content"]
        role = next(r for r, marker in MARKERS.items() if first.startswith(marker))
        self.roles.append(role)
        queue = self.queues[role.split("-")[0]]
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        return item(messages) if callable(item) else item

    def prompts_of(self, role: str) -> list[str]:
        """The role prompts (first user message) of every request made by `role`, re-asks included."""
        return [
            r["messages"][0]["content"]
            for r in self.model.requests
            if r["messages"][0]["content"].startswith(MARKERS[role])
        ]


def config(script: Script, **kw: Any) -> P3ROConfig:
    return P3ROConfig(model=script.name, **kw)


# The router ---------------------------------------------------------------------------------------
CFG = P3ROConfig(model="fake/auto", finish_threshold=8.5, max_iterations=5)


@pytest.mark.parametrize(
    "averages, expected, reason_part",
    [
        ([8.5], "FINISH", "average 8.5 >= threshold 8.5"),
        ([8.49], "CONTINUE_PROBING", "first iteration"),
        ([3.0], "CONTINUE_PROBING", "first iteration"),
        ([6.0, 6.0], "REVISE_STRATEGY", "did not increase over 6"),
        ([7.0, 6.0], "REVISE_STRATEGY", "did not increase over 7"),
        ([6.0, 7.0], "CONTINUE_PROBING", "increased over 6"),
        ([5.0, 6.0, 7.0, 8.0, 8.4], "FINISH", "reached max_iterations 5"),
        ([5.0, 6.0, 7.0, 8.0, 9.0], "FINISH", "average 9 >= threshold 8.5"),
        ([7.0, 6.0, 5.0, 4.0, 3.0], "FINISH", "reached max_iterations 5"),
    ],
)
def test_router_rules(averages: list[float | None], expected: str, reason_part: str) -> None:
    d = route(averages, CFG)
    decision, reason = d.action, d.reason
    assert decision == expected
    assert route(averages, CFG).action == expected
    assert reason_part in reason


@pytest.mark.parametrize(
    "averages, expected, reason_part",
    [
        ([None], "CONTINUE_PROBING", "no score"),
        ([6.0, None], "REVISE_STRATEGY", "missing"),
        ([None, 7.0], "CONTINUE_PROBING", "no earlier average"),
        ([6.0, None, 5.0], "REVISE_STRATEGY", "did not increase over 6 (iteration 1; iteration 2 had no score)"),
        ([6.0, None, 7.0], "CONTINUE_PROBING", "increased over 6 (iteration 1; iteration 2 had no score)"),
        ([None, None, None, None, None], "FINISH", "reached max_iterations 5"),
    ],
)
def test_router_missing_averages(averages: list[float | None], expected: str, reason_part: str) -> None:
    d = route(averages, CFG)
    decision, reason = d.action, d.reason
    assert (decision, reason_part in reason) == (expected, True), reason


def test_router_missing_average_never_finishes_by_threshold() -> None:
    low = P3ROConfig(model="fake/auto", finish_threshold=1.0, max_iterations=5)
    assert route([None], low).action == "CONTINUE_PROBING"
    assert route([1.0], low).action == "FINISH"


def test_router_names_the_stop_reason_of_a_finish_and_none_otherwise() -> None:
    assert route([9.0], CFG).stop_reason == "threshold" and route([9.0], CFG).stops
    assert route([5.0, 6.0, 7.0, 8.0, 8.4], CFG).stop_reason == "max_iterations"
    assert route([6.0, 6.0], CFG).stop_reason is None and not route([6.0, 7.0], CFG).stops
    # candidate 0 finishes by the threshold alone: the cap counts rewrites, a lone score is never compared
    one = P3ROConfig(model="fake/auto", max_iterations=1)
    assert (
        route([3.0], one, start=True).action == "CONTINUE_PROBING" and route([3.0], one).stop_reason == "max_iterations"
    )
    assert route([9.0], one, start=True).stop_reason == "threshold"
    assert "candidate 0" in route([None], CFG, start=True).reason


def test_router_cap_beats_revise_and_needs_averages() -> None:
    two = P3ROConfig(model="fake/auto", max_iterations=2)
    assert route([6.0, 5.0], two).action == "FINISH"
    with pytest.raises(ValueError, match="at least one iteration"):
        route([], CFG)


# Matching the evaluator's criteria ----------------------------------------------------------------------
def test_match_scores_by_text_number_and_containment() -> None:
    result = EvaluationResult.model_validate(
        {
            "qualitative_feedback": "",
            "scores": [
                {"criterion": "1. CLARITY OF THE TASK.", "score": 7, "justification": "a"},
                {"criterion": "criterion 3", "score": 4, "justification": "c"},
                {"criterion": "Clarity of the task", "score": 9, "justification": "repeat"},
                {"criterion": "Uses rhyme", "score": 2, "justification": "unknown"},
            ],
        }
    )
    scores, unmatched, by_position = match_scores(CRITERIA, result, judge="fake/j")
    assert [(s.criterion, s.score) for s in scores] == [(CRITERIA[0], 7.0), (CRITERIA[1], None), (CRITERIA[2], 4.0)]
    assert all(s.judge == "fake/j" for s in scores)
    assert [u["criterion"] for u in unmatched] == ["Clarity of the task", "Uses rhyme"] and by_position == 0

    loose = EvaluationResult.model_validate(
        {
            "qualitative_feedback": "",
            "scores": [{"criterion": "target audience", "score": 6, "justification": "contained in criterion 2"}],
        }
    )
    scores, unmatched, _ = match_scores(CRITERIA, loose, judge="j")
    assert [s.score for s in scores] == [None, 6.0, None] and unmatched == []


# Whole runs -----------------------------------------------------------------------------------------
def test_full_run_revises_strategy_and_finishes_at_threshold() -> None:
    s = Script(
        "p3-full",
        strategist=[plan("plan A"), plan("plan B")],
        generator=[gen("P1"), gen("P2"), gen("P3")],
        evaluator=[ev(6, 6, 6), ev(7, 6, 5), ev(9, 9, 8)],
        reflector=[refl("lesson one"), refl("lesson two"), refl("lesson three")],
    )
    events = EventList(tokens=True)
    run = run_p3ro(TASK, config(s), on_event=events)

    assert s.roles == [
        "decomposer",
        "strategist",
        "generator",
        "evaluator",
        "reflector",
        "generator",
        "evaluator",
        "reflector",
        "strategist",
        "generator",
        "evaluator",
        "reflector",
    ]
    assert [it.decision for it in run.iterations] == ["CONTINUE_PROBING", "REVISE_STRATEGY", "FINISH"]
    assert run.iterations[2].reason == f"average {26 / 3:g} >= threshold 8.5"
    assert [it.average for it in run.iterations] == pytest.approx([6.0, 6.0, 26 / 3])
    assert [it.candidate for it in run.iterations] == ["P1", "P2", "P3"]
    assert [it.reflection for it in run.iterations] == ["lesson one", "lesson two", "lesson three"]
    assert [it.metrics["plan_version"] for it in run.iterations] == [1, 1, 2]
    assert [sc.criterion for sc in run.iterations[0].scores] == CRITERIA
    assert [sc.score for sc in run.iterations[1].scores] == [7.0, 6.0, 5.0]
    assert run.stop_reason == "threshold" and run.final_output == "P3"
    assert run.best_iteration == 3 and run.best_score == pytest.approx(26 / 3)
    assert run.info["criteria"] == CRITERIA and run.info["strategy_revisions"] == 1
    assert [p["plan"] for p in run.info["plans"]] == ["plan A", "plan B"]

    # the revising strategist saw the history: attempts, their full evaluations and the lessons
    revising = s.prompts_of("strategist")[1]
    for part in (
        "Attempt 1 (average 6):\nP1",
        "Attempt 2 (average 6):\nP2",
        "Lesson: lesson one",
        "Lesson: lesson two",
        "- Names the target audience: 6/10. Names the target audience looks 6",
        "Overall feedback: fix the weakest criterion",
    ):
        assert part in revising, part
    assert "no attempts yet" in s.prompts_of("strategist")[0]
    # the generator saw the initial prompt first, then the latest attempt and the current lesson
    first, second, third = s.prompts_of("generator")
    assert "(the initial prompt)" in first and TASK.prompt in first and "(none yet)" in first
    assert "(attempt 1, the latest)" in second and "lesson one" in second and "Plan: plan A" in second
    assert "Plan: plan B" in third and "lesson two" in third
    # journey summary ties the chosen prompt to the criteria
    assert "Chosen prompt: attempt 3" in (run.summary or "")
    assert "Clarity of the task: 9/10" in (run.summary or "") and f"6 -> 6 -> {26 / 3:g}" in (run.summary or "")
    assert "Strategy revised 1 time(s), before attempt(s) 3" in (run.summary or "")
    kinds = events.kinds()
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("decision") == 3 and kinds.count("score") == 3 and kinds.count("model_call") == 12
    assert {e.data["token_type"] for e in events if e.kind == "token"} == set(P3ROConfig.ROLES)
    assert Run.model_validate_json(run.model_dump_json()) == run


def test_polish_picks_best_prompt_ties_to_earliest() -> None:
    s = Script(
        "p3-polish", generator=[gen("P1"), gen("P2"), gen("P3")], evaluator=[ev(7, 7, 7), ev(8, 8, 8), ev(8, 8, 8)]
    )
    run = run_p3ro(TASK, config(s, max_iterations=3))
    assert [it.decision for it in run.iterations] == ["CONTINUE_PROBING", "CONTINUE_PROBING", "FINISH"]
    assert run.stop_reason == "max_iterations"
    assert run.final_output == "P2" and run.best_iteration == 2 and run.best_score == 8.0


def test_polish_keeps_an_earlier_better_prompt() -> None:
    s = Script("p3-drop", generator=[gen("P1"), gen("P2")], evaluator=[ev(8, 8, 8), ev(3, 4, 5)])
    run = run_p3ro(TASK, config(s, max_iterations=2))
    assert run.final_output == "P1" and run.stop_reason == "max_iterations"
    assert "8 -> 4" in (run.summary or "")


def test_malformed_evaluator_gives_missing_scores_and_goes_on() -> None:
    s = Script("p3-badeval", generator=[gen("P1"), gen("P2")], evaluator=["this is not json", ev(7, 7, 7)])
    run = run_p3ro(TASK, config(s, max_iterations=2), settings=Settings(parse_attempts=1))
    first, second = run.iterations
    assert first.candidate == "P1" and first.average is None
    assert [sc.score for sc in first.scores] == [None, None, None]
    assert [sc.criterion for sc in first.scores] == CRITERIA
    assert first.reflection is None and first.decision == "CONTINUE_PROBING"
    assert s.roles.count("reflector") == 1  # nothing to reflect on without an evaluation
    (err,) = run.errors
    assert (err.role, err.kind, err.iteration, err.raw) == ("evaluator", "ParseError", 1, "this is not json")
    assert first.steps[-1].error == err
    assert second.average == 7.0 and run.final_output == "P2" and run.best_iteration == 2
    assert run.totals.failed_calls == 1


def test_evaluator_reasked_then_failing_records_all_attempts() -> None:
    s = Script("p3-reask", generator=[gen("P1")], evaluator=["bad 1", "bad 2", "bad 3"])
    run = run_p3ro(TASK, config(s, max_iterations=1))
    assert s.roles.count("evaluator") == 3
    step = run.iterations[0].steps[-1]
    assert step.role == "evaluator" and step.call is not None and step.call.attempts == 3
    assert run.iterations[0].average is None and run.final_output is None and run.best_iteration is None
    assert "No attempt could be scored" in (run.summary or "")


def test_unknown_criterion_is_recorded_and_missing_ones_are_none() -> None:
    reply = ev(8, 3, names=[CRITERIA[0], "Rhymes every line"])
    s = Script("p3-unknown", generator=[gen("P1")], evaluator=[reply])
    run = run_p3ro(TASK, config(s, max_iterations=1))
    it = run.iterations[0]
    assert [sc.score for sc in it.scores] == [8.0, None, None]
    assert it.average is None  # no average on partial evidence (the seed averages every criterion)
    partial = run_p3ro(TASK, config(s, max_iterations=1, missing_criteria="mean_present"), cache=False)
    assert partial.iterations[0].average == 8.0
    assert it.metrics["criteria_missing"] == 2 and it.metrics["unmatched_scores"] == 1
    assert run.info["unmatched_scores"] == [
        {"iteration": 1, "criterion": "Rhymes every line", "score": 3, "justification": "Rhymes every line looks 3"}
    ]


def test_generator_failure_leaves_iteration_without_candidate() -> None:
    s = Script("p3-badgen", generator=["{}", gen("P2")], evaluator=[ev(6, 6, 6)])
    run = run_p3ro(TASK, config(s, max_iterations=2), settings=Settings(parse_attempts=1))
    first = run.iterations[0]
    assert first.candidate is None and first.average is None
    assert all(sc.score is None and "generator failed" in sc.justification for sc in first.scores)
    assert s.roles[:4] == ["decomposer", "strategist", "generator", "generator"]  # no evaluator for it1
    assert run.errors[0].role == "generator"
    assert run.iterations[1].candidate == "P2" and run.final_output == "P2"
    # the second generator call still starts from the initial prompt, as a fresh draw
    assert "(the initial prompt)" in s.prompts_of("generator")[1]
    seeds = [
        r["params"]["seed"] for r in s.model.requests if r["messages"][0]["content"].startswith(MARKERS["generator"])
    ]
    assert seeds == [0, 1]


def test_decomposer_failure_stops_with_error() -> None:
    s = Script("p3-baddec", decomposer=["no criteria here"], generator=[gen("P1")], evaluator=[ev(9, 9, 9)])
    run = run_p3ro(TASK, config(s), settings=Settings(parse_attempts=1))
    assert run.stop_reason == "error" and run.iterations == [] and run.final_output is None
    assert run.errors[0].role == "decomposer" and run.info["criteria"] == []
    assert s.roles == ["decomposer"]


def test_decomposer_reasked_when_criteria_count_is_out_of_bounds() -> None:
    s = Script(
        "p3-count",
        decomposer=[criteria("Only one", "And two"), criteria()],
        generator=[gen("P1")],
        evaluator=[ev(9, 9, 9)],
    )
    run = run_p3ro(TASK, config(s, max_iterations=1, strict_criteria=True))
    assert s.roles[:2] == ["decomposer", "decomposer"]
    assert "Your reply could not be used" in s.model.requests[1]["messages"][-1]["content"]
    assert run.info["criteria"] == CRITERIA and run.stop_reason == "threshold"


def test_duplicates_that_leave_too_few_criteria_are_asked_again() -> None:
    s = Script(
        "p3-dupes",
        decomposer=[criteria(CRITERIA[0], CRITERIA[1], CRITERIA[0].upper()), criteria()],
        generator=[gen("P1")],
        evaluator=[ev(9, 9, 9)],
    )
    run = run_p3ro(TASK, config(s, max_iterations=1, strict_criteria=True))
    assert s.roles[:2] == ["decomposer", "decomposer"]  # 2 distinct of min_criteria 3: re-asked
    assert run.info["criteria"] == CRITERIA and len(run.info["criteria"]) >= 3


def test_prompt_override_is_used() -> None:
    s = Script("p3-override", generator=[gen("P1")], evaluator=[ev(5, 5, 5)])
    cfg = config(s, max_iterations=1, prompts={"reflector": "OVERRIDE reflect on {goal}\n{evaluation}"})
    run = run_p3ro(TASK, cfg)
    assert "reflector-override" in s.roles and "reflector" not in s.roles
    (asked,) = [p for p in s.model.prompts if p.startswith("OVERRIDE reflect")]
    assert TASK.goal in asked and "Clarity of the task: 5/10" in asked
    assert run.iterations[0].reflection == "lesson"


def test_prompt_override_with_unknown_field_names_the_role() -> None:
    s = Script("p3-override-bad", generator=[gen("P1")], evaluator=[ev(5, 5, 5)])
    with pytest.raises(ConfigError, match=r"prompts\.reflector.*nope"):
        run_p3ro(TASK, config(s, max_iterations=1, prompts={"reflector": "{nope}"}))


@pytest.mark.parametrize(
    "fields, name",
    [
        ({"finish_threshold": 11}, "finish_threshold"),
        ({"finish_threshold": 0.5}, "finish_threshold"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"min_criteria": 5, "max_criteria": 3}, "min_criteria"),
        ({"max_criteria": 9}, "max_criteria"),
        ({"model": "nonexistent-model-xyz"}, "nonexistent-model-xyz"),
        ({"critic_model": "nonexistent-model-xyz"}, "nonexistent-model-xyz"),
        ({"prompts": {"judge": "x"}}, "judge"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, Any], name: str) -> None:
    base = {"model": "fake/auto"}
    with pytest.raises(ValidationError, match=name):
        P3ROConfig(**{**base, **fields})
    with pytest.raises(ValueError, match=name):
        run_p3ro(TASK, {**base, **fields})


def test_roles_and_models() -> None:
    cfg = P3ROConfig(model="fake/auto", generator_model="fake/auto", critic_model="local/smollm2")
    assert cfg.model_for("evaluator") == "local/smollm2"
    assert {cfg.model_for(r) for r in ("decomposer", "strategist", "generator", "reflector")} == {"fake/auto"}
    assert get_loop("p3ro").config_cls is P3ROConfig


def test_replay_from_cache_makes_no_new_requests(tmp_path: Path) -> None:
    s = Script("p3-replay", generator=[gen("P1"), gen("P2")], evaluator=[ev(6, 7, 8), ev(5, 5, 5)])
    cfg = config(s, max_iterations=3)
    run1 = run_loop("p3ro", TASK, cfg, cache=tmp_path / "c")
    asked = len(s.model.requests)
    run2 = run_loop("p3ro", TASK, cfg, cache=tmp_path / "c")
    assert len(s.model.requests) == asked
    assert run2.totals.cache_hits == run2.totals.calls == run1.totals.calls
    assert run1.comparable() == run2.comparable()
    assert run1.run_id != run2.run_id  # every run has its own id; the cache key never holds it


def test_fake_auto_dry_run_scores_against_the_criteria() -> None:
    run = run_p3ro("Summarise this article.", {"model": "fake/auto", "max_iterations": 2}, cache=False)
    assert run.stop_reason in ("threshold", "max_iterations") and run.iterations
    assert any(sc.score is not None for it in run.iterations for sc in it.scores)
    assert all(sc.criterion in run.info["criteria"] for it in run.iterations for sc in it.scores)
    assert run.info["goal"].startswith("Make the prompt clearer")


@pytest.mark.local_model
def test_local_model_short_run(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    cfg = P3ROConfig(model="local/smollm2", max_iterations=1, max_tokens=300, min_criteria=3, max_criteria=3)
    # one attempt per call: a reply cut off by max_tokens is recorded as an error instead of re-asked
    run = run_p3ro(TASK, cfg, cache=tmp_path / "local", settings=Settings(parse_attempts=2))
    elapsed = time.perf_counter() - t0
    print(f"p3ro local run: {elapsed:.1f}s, {run.totals.output_tokens} output tokens, errors {len(run.errors)}")
    assert Run.model_validate_json(run.model_dump_json()) == run
    # fails when every model call fails: the goal must be decomposed and one candidate written
    assert run.stop_reason in ("threshold", "max_iterations")
    assert len(run.iterations) == 1 and len(run.info["criteria"]) == 3
    assert run.iterations[0].candidate and run.totals.calls > run.totals.failed_calls


# Issue 9: the design document's rules ------------------------------------------------------------------
def test_one_criterion_scored_never_finishes_by_threshold() -> None:
    s = Script("p3-partial", generator=[gen("P1"), gen("P2")], evaluator=[ev(10)])
    run = run_p3ro(TASK, config(s, max_iterations=2))
    first = run.iterations[0]
    assert [sc.score for sc in first.scores] == [10.0, None, None] and first.average is None
    assert first.decision == "CONTINUE_PROBING" and run.stop_reason == "max_iterations"
    assert run.final_output is None  # nothing was scored on every criterion


def test_long_evaluator_reply_is_accepted() -> None:
    items = [{"criterion": c, "score": 7, "justification": "j" * 200} for c in CRITERIA]
    items += [{"criterion": f"extra {k}", "score": 5, "justification": "x"} for k in range(4)]  # 7 entries
    reply = json.dumps({"scores": items, "qualitative_feedback": "f" * 400})
    s = Script("p3-long", generator=[gen("P1")], evaluator=[reply])
    run = run_p3ro(TASK, config(s, max_iterations=1), settings=Settings(parse_attempts=1))
    it = run.iterations[0]
    assert [sc.score for sc in it.scores] == [7.0, 7.0, 7.0] and it.average == 7.0
    assert run.final_output == "P1" and run.errors == [] and it.metrics["unmatched_scores"] == 4


def test_threshold_uses_the_true_mean() -> None:
    s = Script("p3-round", generator=[gen("P1"), gen("P2")], evaluator=[ev(7, 7, 6), ev(9, 9, 9)])
    run = run_p3ro(TASK, config(s, max_iterations=2, finish_threshold=6.66667))
    assert run.iterations[0].average == pytest.approx(20 / 3) and run.iterations[0].average < 6.66667
    assert run.iterations[0].decision == "CONTINUE_PROBING"
    assert [P3ROConfig(model="fake/auto").finish_threshold] == [8.5]


def test_strategist_sees_the_full_history_with_reasoning() -> None:
    long = "L" * 900
    s = Script(
        "p3-history",
        generator=[gen("P1"), gen(long), gen("P3"), gen("P4"), gen("P5")],
        evaluator=[ev(5, 5, 5), ev(6, 6, 6), ev(7, 7, 7), ev(6, 6, 6), ev(6, 6, 6)],
    )
    run = run_p3ro(TASK, config(s, max_iterations=5))
    assert [it.decision for it in run.iterations][3] == "REVISE_STRATEGY"
    revising = s.prompts_of("strategist")[1]
    for k in (1, 2, 3, 4):
        assert f"Attempt {k} (" in revising  # all four, not the last three
    assert long in revising and "Reasoning: because P1" in revising  # not cut, reasoning fed back
    assert "Reasoning: because P3" in s.prompts_of("generator")[3]
    assert run.info["reasoning"]["1"] == "because P1"
    windowed = Script(
        "p3-window",
        generator=[gen("P1"), gen(long), gen("P3"), gen("P4"), gen("P5")],
        evaluator=[ev(5, 5, 5), ev(6, 6, 6), ev(7, 7, 7), ev(6, 6, 6), ev(6, 6, 6)],
    )
    run_p3ro(TASK, config(windowed, max_iterations=5, history_window=3, history_chars=600), cache=False)
    old = windowed.prompts_of("strategist")[1]
    assert "Attempt 1 (" not in old and long not in old


def test_parse_failure_score_restores_the_seeds_fallback() -> None:
    s = Script("p3-fallback", generator=[gen("P1")], evaluator=["not json"])
    run = run_p3ro(TASK, config(s, max_iterations=1, parse_failure_score=5), settings=Settings(parse_attempts=1))
    it = run.iterations[0]
    assert [sc.score for sc in it.scores] == [5.0] * 3 and {sc.mode for sc in it.scores} == {"fallback"}
    assert it.average == 5.0 and run.errors[0].role == "evaluator"
    missing = run_p3ro(TASK, config(s, max_iterations=1), settings=Settings(parse_attempts=1))
    assert missing.iterations[0].average is None and missing.final_output is None


def test_rescore_asks_the_evaluator_again(tmp_path: Path) -> None:
    s = Script("p3-rescore", generator=[gen("P1")], evaluator=[ev(5, 5, 5), ev(8, 8, 8)])
    run = run_p3ro(TASK, config(s, max_iterations=1), cache=tmp_path)
    spec = get_loop("p3ro")
    assert spec.rescore is not None
    scores = promptlab.aio.run_sync(spec.rescore(run, 1, sample=1, cache=tmp_path))
    assert [sc.score for sc in scores] == [8.0, 8.0, 8.0] and [sc.criterion for sc in scores] == CRITERIA
    asked = s.prompts_of("evaluator")
    assert asked[-1] == asked[0] and len(asked) == 2


def test_rescore_of_a_replicate_is_a_new_draw_not_its_logged_call(tmp_path: Path) -> None:
    s = Script("p3-rescore-r1", generator=[gen("P1")], evaluator=[ev(5, 5, 5), ev(8, 8, 8), ev(3, 3, 3)])
    run = run_p3ro(TASK, config(s, max_iterations=1), sample=1, cache=tmp_path)
    spec = get_loop("p3ro")
    assert spec.rescore is not None
    for k, expected in ((1, 8.0), (2, 3.0)):  # re-score 1 of sample 1 is not the logged call at sample 1
        scores = promptlab.aio.run_sync(spec.rescore(run, 1, sample=k, cache=tmp_path))
        assert [sc.score for sc in scores] == [expected] * 3
    assert len(s.prompts_of("evaluator")) == 3
    with pytest.raises(ConfigError, match="re-score index"):
        promptlab.aio.run_sync(spec.rescore(run, 1, sample=0, cache=tmp_path))


def test_expected_score_mode_weighs_the_evaluators_log_probabilities() -> None:
    import math
    import re

    from promptlab.llm.providers.scripted import ScriptedReply

    text = ev(6, 4, 8)
    tokens: list[Any] = []
    pos = 0
    for m in re.finditer(r'"score": (\d+)', text):
        tokens.append((text[pos : m.start(1)], 0.0))
        d = m.group(1)
        tokens.append((d, math.log(0.5), {d: math.log(0.5), str(int(d) + 2): math.log(0.5)}))
        pos = m.end(1)
    tokens.append((text[pos:], 0.0))
    s = Script("p3-expected", generator=[gen("P1")], evaluator=[ScriptedReply(text, logprobs=tokens)])
    run = run_p3ro(TASK, config(s, max_iterations=1, score_mode="expected"), cache=False)
    it = run.iterations[0]
    assert [sc.score for sc in it.scores] == pytest.approx([7.0, 5.0, 9.0])
    assert {sc.mode for sc in it.scores} == {"expected"} and it.average == pytest.approx(7.0)
    sampled = run_p3ro(TASK, config(s, max_iterations=1), cache=False)
    assert [sc.score for sc in sampled.iterations[0].scores] == [6.0, 4.0, 8.0]
    assert {sc.mode for sc in sampled.iterations[0].scores} == {"sampled"}


def test_an_invalid_evaluator_entry_leaves_only_its_criterion_missing() -> None:
    long_name = f"{CRITERIA[2]}: " + "the reply names the format explicitly " * 6
    assert len(long_name) > 200
    items = [
        {"criterion": CRITERIA[0], "score": 0, "justification": "zero is outside 1-10"},
        {"criterion": CRITERIA[1], "score": 9, "justification": None},
        {"criterion": long_name, "score": 8, "justification": "ok"},
    ]
    reply = json.dumps({"scores": items, "qualitative_feedback": "fine"})
    s = Script("p3-bad-entry", generator=[gen("P1")], evaluator=[reply])
    run = run_p3ro(TASK, config(s, max_iterations=1), settings=Settings(parse_attempts=1))
    it = run.iterations[0]
    assert [sc.score for sc in it.scores] == [None, None, 8.0]
    # the two scores it could not read are one error of the run, naming both (missing scores are errors)
    (error,) = run.errors
    assert error.kind == "ScoreMissing" and error.message.startswith("evaluator fake/p3-bad-entry: 2 of 3 score(s)")
    assert CRITERIA[0] in error.message and CRITERIA[1] in error.message
    assert it.average is None and it.decision == "FINISH" and "max_iterations" in (it.reason or "")
    for sc in it.scores[:2]:
        assert sc.justification.startswith("missing: the evaluator's entry was invalid")
    assert "score" in it.scores[0].justification and "justification" in it.scores[1].justification
    invalid = run.info["invalid_scores"]
    assert [(e["iteration"], e["position"], e["entry"]) for e in invalid] == [(1, 0, items[0]), (1, 1, items[1])]
    assert it.metrics["invalid_scores"] == 2 and it.metrics["criteria_missing"] == 2
    present = run_p3ro(TASK, config(s, max_iterations=1, missing_criteria="mean_present"), cache=False)
    assert present.iterations[0].average == 8.0 and present.final_output == "P1"


def test_an_evaluator_reply_without_any_valid_entry_is_asked_again() -> None:
    bad = json.dumps(
        {"scores": [{"criterion": c, "score": 11, "justification": "x"} for c in CRITERIA], "qualitative_feedback": "f"}
    )
    s = Script("p3-all-bad", generator=[gen("P1")], evaluator=[bad, ev(7, 6, 5)])
    run = run_p3ro(TASK, config(s, max_iterations=1))
    assert s.roles.count("evaluator") == 2 and [sc.score for sc in run.iterations[0].scores] == [7.0, 6.0, 5.0]
    assert "invalid_scores" not in run.info and run.final_output == "P1"


# Issue 18: the design document's rules, round 2 ----------------------------------------------------------
def test_any_non_empty_list_of_criteria_is_taken_as_the_seeds_list() -> None:
    """The seed's `criteria: List[str]` takes any list: two criteria (or seven) are used, not asked again; the
    3-5 asked for are a generation hint. Placeholders with no word are asked for again."""
    s = Script(
        "p3-two",
        decomposer=[criteria("Only one", "And two")],
        generator=[gen("P1")],
        evaluator=[ev(9, 9, names=["Only one", "And two"])],
    )
    run = run_p3ro(TASK, config(s, max_iterations=1))
    assert s.roles.count("decomposer") == 1 and run.info["criteria"] == ["Only one", "And two"]
    assert run.stop_reason == "threshold" and run.iterations[0].average == 9.0
    seven = [f"Criterion number {k}" for k in range(1, 8)]
    many = Script("p3-seven", decomposer=[criteria(*seven)], generator=[gen("P1")], evaluator=[ev(7)])
    assert run_p3ro(TASK, config(many, max_iterations=1)).info["criteria"] == seven
    dots = Script(
        "p3-dots",
        decomposer=[criteria("...", "...", "..."), criteria()],
        generator=[gen("P1")],
        evaluator=[ev(9, 9, 9)],
    )
    assert run_p3ro(TASK, config(dots, max_iterations=1)).info["criteria"] == CRITERIA
    assert dots.roles[:2] == ["decomposer", "decomposer"]
    from promptlab.loops.p3ro.schemas import decomposed_schema

    items = decomposed_schema(3, 5).model_json_schema()["properties"]["criteria"]
    assert (items["minItems"], items["maxItems"]) == (3, 5)  # what the grammar of a local model asks for


def test_the_history_holds_each_attempts_full_evaluation_uncut() -> None:
    """The seed's strategist and generator see the evaluations: justifications and the qualitative feedback,
    with whole criterion names."""
    long_name = "Names the intended audience of the poem explicitly, with their age and their reading level"
    crit = [long_name, CRITERIA[1], CRITERIA[2]]
    reply = json.dumps(
        {
            "scores": [
                {"criterion": c, "score": 6, "justification": f"because {k} " + "j" * 300} for k, c in enumerate(crit)
            ],
            "qualitative_feedback": "F" * 700,
        }
    )
    s = Script(
        "p3-fullhist", decomposer=[criteria(*crit)], generator=[gen("P1"), gen("P2"), gen("P3")], evaluator=[reply]
    )
    run = run_p3ro(TASK, config(s, max_iterations=3))
    assert [it.decision for it in run.iterations][:2] == ["CONTINUE_PROBING", "REVISE_STRATEGY"]
    for asked in (s.prompts_of("strategist")[1], s.prompts_of("generator")[1]):
        assert f"- {long_name}: 6/10. because 0 " + "j" * 300 in asked
        assert "Overall feedback: " + "F" * 700 in asked and "Reasoning: because P1" in asked
    assert run.info["feedback"]["1"] == "F" * 700
    cut_run = Script("p3-cuthist", decomposer=[criteria(*crit)], generator=[gen("P1"), gen("P2")], evaluator=[reply])
    run_p3ro(TASK, config(cut_run, max_iterations=2, history_chars=100), cache=False)
    assert "F" * 700 not in cut_run.prompts_of("generator")[1]


def test_paraphrased_criterion_names_are_scored_and_averaged() -> None:
    """The seed averages the scores it gets: three 9s under paraphrased names reach FINISH."""
    said = ["Task is clear", "Audience is named", "Format is specified"]
    s = Script("p3-paraphrase", generator=[gen("P1")], evaluator=[ev(9, 9, 9, names=said)])
    run = run_p3ro(TASK, config(s))
    it = run.iterations[0]
    assert [sc.score for sc in it.scores] == [9.0, 9.0, 9.0] and it.metrics["matched_by_position"] == 3
    assert run.stop_reason == "threshold" and it.average == 9.0 and "unmatched_scores" not in run.info


def test_mean_reply_averages_every_score_of_the_reply_as_the_seed() -> None:
    extra = ev(9, 9, 9, 3, names=[*CRITERIA, "Rhymes"])  # four entries for three criteria
    short = ev(8, 6)  # two entries for three criteria
    for reply, default, seed in ((extra, 9.0, 7.5), (short, None, 7.0)):
        s = Script(f"p3-reply-{seed}", generator=[gen("P1")], evaluator=[reply])
        assert run_p3ro(TASK, config(s, max_iterations=1)).iterations[0].average == default
        both = run_p3ro(TASK, config(s, max_iterations=1, missing_criteria="mean_reply"), cache=False)
        assert both.iterations[0].average == seed


def test_score_type_int_is_the_seeds_score_int() -> None:
    """Default: any number 1-10 (8.5 is kept, 0 and 11 leave the criterion missing); score_type 'int' is the
    seed's `score: int`: any integer (0 and 11 too), a fraction leaves the criterion missing."""
    reply = json.dumps(
        {
            "scores": [
                {"criterion": c, "score": v, "justification": "j"} for c, v in zip(CRITERIA, [8.5, 0, 11], strict=True)
            ],
            "qualitative_feedback": "f",
        }
    )
    s = Script("p3-scoretype", generator=[gen("P1")], evaluator=[reply])
    default = run_p3ro(TASK, config(s, max_iterations=1, missing_criteria="mean_present"))
    assert [sc.score for sc in default.iterations[0].scores] == [8.5, None, None]
    seed = run_p3ro(TASK, config(s, max_iterations=1, missing_criteria="mean_present", score_type="int"), cache=False)
    assert [sc.score for sc in seed.iterations[0].scores] == [None, 0.0, 11.0]
    assert "Input should be a valid integer" in seed.info["invalid_scores"][0]["error"]


def test_each_role_sees_the_seeds_inputs() -> None:
    """Evaluator: prompt + criteria; reflector: the evaluation; generator: plan + history + reflection;
    strategist: initial prompt + criteria + history; decomposer: the goal."""
    task = Task(id="marked", prompt="Write a poem about the sea.", goal="GOAL-MARKER vivid and specific")
    s = Script("p3-inputs", generator=[gen("P1"), gen("P2")], evaluator=[ev(5, 5, 5), ev(6, 6, 6)])
    run_p3ro(task, config(s, max_iterations=2))
    assert "GOAL-MARKER" in s.prompts_of("decomposer")[0] and task.prompt not in s.prompts_of("decomposer")[0]
    for role in ("strategist", "generator", "evaluator", "reflector"):
        assert all("GOAL-MARKER" not in p for p in s.prompts_of(role)), role
    assert CRITERIA[1] in s.prompts_of("evaluator")[0] and "P1" in s.prompts_of("evaluator")[0]
    reflect = s.prompts_of("reflector")[0]
    assert "- Clarity of the task: 5/10" in reflect and "Criteria:" not in reflect
    second = s.prompts_of("generator")[1]
    assert "Plan: plan A" in second and "Lesson from the last evaluation (focus on this): lesson" in second
    assert "Attempt 1 (average 5)" in second and "Criteria it will be scored on" not in second
    strategist = s.prompts_of("strategist")[0]
    assert task.prompt in strategist and CRITERIA[2] in strategist


def test_the_fallback_score_is_one_evaluator_call_and_is_reflected_on() -> None:
    """With parse_failure_score the design documents' fallback: one call (not re-asked), and the reflector reflects on
    the fallback evaluation."""
    s = Script("p3-fallback-once", generator=[gen("P1")], evaluator=["not json"])
    run = run_p3ro(TASK, config(s, max_iterations=1, parse_failure_score=5))  # default settings: 3 attempts
    assert s.roles == ["decomposer", "strategist", "generator", "evaluator", "reflector"]
    assert "Overall feedback: Evaluator returned invalid JSON" in s.prompts_of("reflector")[0]
    assert run.iterations[0].reflection == "lesson" and run.iterations[0].average == 5.0
    missing = Script("p3-fallback-none", generator=[gen("P1")], evaluator=["not json"])
    run_p3ro(TASK, config(missing, max_iterations=1))
    assert missing.roles.count("evaluator") == 3 and "reflector" not in missing.roles


@pytest.mark.local_model
def test_the_explorers_default_p3ro_run_on_the_shipped_email_task_does_not_end_in_error(tmp_path: Path) -> None:
    """Issue 18: on the local model the decomposer's reply was refused three times (too few distinct criteria)
    and the explorer's default run ended in `error` after 3.6 s."""
    from promptlab.eval.tasks import read_tasks
    from promptlab.ui.explorer import Explorer

    tasks = read_tasks(Path(__file__).parents[2] / "data" / "prompt_tasks.jsonl")
    explorer = Explorer(tasks, task_id="email", max_iterations=1)  # the explorer's defaults, one iteration
    run = run_p3ro(
        explorer.tasks["email"], explorer.config(), cache=tmp_path / "cache", settings=Settings(parse_attempts=2)
    )
    assert explorer.loop_w.value == "p3ro" and explorer.config()["generator_model"] == "local/smollm2"
    assert run.stop_reason in ("threshold", "max_iterations"), run.errors
    assert run.info["criteria"] and run.iterations[0].candidate
