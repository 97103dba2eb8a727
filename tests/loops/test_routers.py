"""The routers of PES, PCEE and the prompt-search baselines, with numbers alone (P³RO's and Creator/Critic's are
tested in their own files): each returns the decision, why, and the run's stop reason when it stops."""

from __future__ import annotations

import pytest

from promptlab.loops.pcee.config import PCEEConfig
from promptlab.loops.pcee.router import Progress
from promptlab.loops.pcee.router import route as pcee_route
from promptlab.loops.pes.router import route as pes_route
from promptlab.loops.pes.router import run_stop_reason
from promptlab.loops.runtime.search_router import route as search_route


@pytest.mark.parametrize(
    "index, calls, ok, expected, stop, reason_part",
    [
        (1, None, 0, "synthesize", "error", "planning call failed"),
        (1, 0, 0, "synthesize", "no_tool_calls", "calls no tool"),
        (1, 3, 2, "continue", None, "2 of 3 tool calls succeeded"),
        (3, 2, 2, "synthesize", "max_iterations", "reached max_iterations (3)"),
        (3, 0, 0, "synthesize", "no_tool_calls", "calls no tool"),  # no tool call wins over the cap
    ],
)
def test_pes_router(index: int, calls: int | None, ok: int, expected: str, stop: str | None, reason_part: str) -> None:
    d = pes_route(index, calls, ok, max_iterations=3)
    assert (d.action, d.stop_reason) == (expected, stop) and reason_part in d.reason


def test_pes_run_stop_reason_says_planning_error_only_when_an_answer_was_written() -> None:
    assert run_stop_reason("error", answered=True) == "planning_error"
    assert run_stop_reason("error", answered=False) == run_stop_reason("budget", answered=False) == "error"
    assert run_stop_reason("no_tool_calls", answered=True) == "no_tool_calls"


CFG = PCEEConfig(model="fake/auto", max_iterations=6, retry_budget=2)


@pytest.mark.parametrize(
    "progress, expected, stop, reason_part",
    [
        (Progress(executions=0), "next_step", None, "6 execution(s) left"),
        (Progress(executions=6), "stop", "max_iterations", "max_iterations (6) tool executions reached"),
        (Progress(executions=6, budget="budget: 9 calls"), "stop", "max_iterations", "max_iterations (6)"),
        (Progress(executions=2, budget="budget: 9 calls"), "stop", "budget", "budget: 9 calls"),
        (Progress(executions=2, ok=True, reason="looks right"), "next_step", None, "looks right"),
        (Progress(executions=3, ok=True, last_step=True, plan_steps=3), "stop", "plan_complete", "all 3 plan steps"),
        (
            Progress(executions=2, ok=False, step_id=2, reason="404"),
            "correct",
            None,
            "step 2 failed (404); correction 1 of 2",
        ),
        (Progress(executions=2, ok=False, reason="x", budget="budget: 9"), "stop", "budget", "budget: 9"),
        (
            Progress(executions=2, ok=False, step_id=2, reason="x", retries_used=2),
            "stop",
            "failed_step",
            "retry budget (2)",
        ),
        (Progress(executions=5, ok=False, step_id=1, reason="x"), "stop", "failed_step", "x) and 1 execution(s) left"),
        (
            Progress(executions=6, ok=False, reason="x", correction_failed="fix 1 failed"),
            "stop",
            "max_iterations",
            "correction failed (fix 1 failed); max_iterations (6)",
        ),
        (
            Progress(
                executions=3,
                ok=False,
                step_id=1,
                reason="x; correction 1 failed: y",
                retries_used=1,
                correction_failed="y",
            ),
            "correct",
            None,
            "correction 2 of 2",
        ),
    ],
)
def test_pcee_router(progress: Progress, expected: str, stop: str | None, reason_part: str) -> None:
    d = pcee_route(progress, CFG)
    assert (d.action, d.stop_reason) == (expected, stop) and reason_part in d.reason, d


def test_pcee_router_without_caps() -> None:
    free = PCEEConfig(model="fake/auto", max_iterations=None, retry_budget=None)
    assert pcee_route(Progress(executions=500), free).action == "next_step"
    failed = pcee_route(Progress(executions=500, ok=False, step_id=3, reason="x", retries_used=90), free)
    assert failed.action == "correct" and "correction 91 of unlimited" in failed.reason


def test_search_router_stops_for_the_plan_first_then_for_the_budget() -> None:
    assert search_route(0, "budget: spent").stop_reason == "max_iterations"
    assert search_route(2, "budget: spent").stop_reason == "budget" and search_route(2, "budget: spent").stops
    assert search_route(2, "budget: spent").reason == "budget: spent"
    go = search_route(1, None)
    assert go.action == "NEXT" and go.stop_reason is None and not go.stops
