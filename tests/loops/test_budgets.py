"""Budgets on every loop: a run stops with stop reason 'budget' before a step that would pass `budget_calls` or
`budget_tokens`, never passes a budget by more than one step, spends the same on a replay from the cache,
and records its spend per decision (`Iteration.spent`) and in total (`Run.spent`), test-split measurement left
out. The prompt-search loops know each step's calls in advance, so they never pass `budget_calls` at all (GEPA:
each piece of its work, a minibatch, a dev evaluation or a reflection, is checked before it starts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wording import TASK

from promptlab.loops.registry import run_loop
from promptlab.record import Run

SEARCH = ("opro", "ape", "protegi", "resample", "gepa")
PROMPT_LOOPS = (*SEARCH, "p3ro", "creator_critic")
UNBOUNDED = {
    "opro": {},
    "ape": {"proposals_per_set": 20},
    "protegi": {"samples_per_eval": 5},
    "resample": {"max_iterations": 50},
    "gepa": {},
    "p3ro": {"max_iterations": 20, "finish_threshold": 10.0},
    "creator_critic": {"max_iterations": 20},
    "pes": {"max_iterations": 20},
}
"""Configs whose own caps lie far beyond the budgets tried, so that the budget ends every run."""


def decisions(run: Run, unit: str) -> list[int]:
    """The run's spend at each decision, in order."""
    return [getattr(it.spent, unit) for it in run.iterations if it.spent is not None]


def last_step(run: Run, unit: str) -> int:
    """What the run spent after its second-to-last decision (its last step, and anything after it)."""
    spent = decisions(run, unit)
    return getattr(run.spent, unit) - (spent[-2] if len(spent) > 1 else 0)


@pytest.mark.parametrize("loop", [*PROMPT_LOOPS, "pes"])
@pytest.mark.parametrize(
    ("field", "unit", "budget"),
    [
        ("budget_calls", "calls", 50),
        ("budget_calls", "calls", 130),
        ("budget_tokens", "tokens", 1500),
        ("budget_tokens", "tokens", 4000),
    ],
)
def test_a_budget_stops_the_run_and_is_passed_by_one_step_at_most(
    loop: str, field: str, unit: str, budget: int
) -> None:
    if loop == "pes" and unit == "calls":
        budget //= 10  # a planning round makes one call here (fake/auto's plans call no tool it has)
    run = run_loop(loop, TASK, {"model": "fake/auto", **UNBOUNDED[loop], field: budget}, cache=False)
    spent = getattr(run.spent, unit)
    assert run.stop_reason == "budget", (loop, run.stop_reason, spent)
    assert spent - last_step(run, unit) <= budget  # all but the last step fit in the budget
    if loop in SEARCH and unit == "calls":
        assert spent <= budget  # their steps' calls are known before they start
    # the spend per decision only grows, and the test split is never part of it
    assert decisions(run, unit) == sorted(decisions(run, unit)) and decisions(run, unit)[-1] <= spent
    if loop != "pes":  # the totals count the test split's calls, the spend does not
        test_calls = sum(st.phase == "score_test" for st in run.final)
        assert test_calls >= 20 and run.totals.calls == run.spent.calls + test_calls
    if loop in ("p3ro", "creator_critic"):
        assert run.info["budget_stop"].startswith(f"budget: {decisions(run, unit)[-1]} {unit} spent")


@pytest.mark.parametrize("loop", PROMPT_LOOPS)
def test_a_budgeted_run_replays_from_the_cache_with_the_same_spend_and_stop(loop: str, tmp_path: Path) -> None:
    config: dict[str, Any] = {"model": "fake/auto", **UNBOUNDED[loop], "budget_tokens": 3000}
    first = run_loop(loop, TASK, config, cache=tmp_path)
    again = run_loop(loop, TASK, config, cache=tmp_path)
    assert again.totals.cache_hits == again.totals.calls  # nothing was paid again ...
    assert again.spent == first.spent and again.stop_reason == first.stop_reason == "budget"  # ... but it counts
    assert again.comparable() == first.comparable()


@pytest.mark.parametrize("loop", ["p3ro", "creator_critic"])
def test_the_seed_loops_record_their_incumbent_and_keep_their_records_without_a_budget(loop: str) -> None:
    run = run_loop(
        loop,
        TASK,
        {
            "model": "fake/auto",
            "max_iterations": 2,
            "score_source": "grounded",
            **({"final": "best"} if loop == "creator_critic" else {}),
        },
        cache=False,
    )
    assert run.stop_reason in ("max_iterations", "threshold") and "budget_stop" not in run.info
    best = max(
        (it for it in run.iterations if it.decision_score is not None), key=lambda it: (it.decision_score, -it.index)
    )
    assert run.iterations[-1].incumbent == best.index == run.info["final_iteration"]
    assert all(
        it.test is None for it in run.iterations
    )  # test_incumbents is off by default for the design-document loops
    assert run.config["test_incumbents"] is False


def test_creator_critic_with_final_last_holds_its_latest_candidate() -> None:
    run = run_loop("creator_critic", TASK, {"model": "fake/auto", "max_iterations": 2}, cache=False)
    assert [it.incumbent for it in run.iterations] == [it.index for it in run.iterations]


def test_test_incumbents_measures_each_incumbent_once_on_the_test_split() -> None:
    run = run_loop(
        "creator_critic", TASK, {"model": "fake/auto", "max_iterations": 3, "test_incumbents": True}, cache=False
    )
    incumbents = {it.incumbent for it in run.iterations}
    measured = {it.index for it in run.iterations if it.test is not None}
    assert measured == incumbents
    prompts = {run.iterations[i].candidate for i in incumbents} | {run.task.prompt}
    tests = [st for st in run.final if st.phase == "score_test"]
    # the start and the final prompt as before, then each other incumbent's prompt once
    assert len(tests) == 20 * (2 + len(prompts - {run.task.prompt, run.final_output}))
