"""P³RO's decomposer read as the design document's `List[str]` when `criteria_as_written` says so (issue #29
item 10; scripted models)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

import promptlab as pl
from promptlab.llm.call.settings import Settings
from promptlab.loops.p3ro.config import P3ROConfig
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.record import Run

TASK = {"id": "poem", "prompt": "Write a poem about the sea.", "goal": "Make it vivid."}


def run_with(name: str, criteria: list[str], prompt: str = "Write a vivid poem about the sea.", **kw: Any) -> Run:
    replies = {
        "decomposer": {"criteria": criteria},
        "strategist": {"plan": "be vivid"},
        "generator": {"prompt_text": prompt, "reasoning": "vivid"},
        "evaluator": {
            "scores": [{"criterion": c, "score": 7, "justification": "ok"} for c in criteria or ["Vivid"]],
            "qualitative_feedback": "fine",
        },
        "reflector": {"summary": "more colour"},
    }
    roles = {r: pl.scripted(f"{name}-{r}", respond=lambda m, v=v: json.dumps(v)).name for r, v in replies.items()}
    return run_p3ro(TASK, {"role_models": roles, "max_iterations": 1, **kw}, settings=Settings(parse_attempts=1))


def test_criteria_as_written_keeps_repeats_as_the_seeds_list() -> None:
    written = ["Uses colour words", "uses colour words", "Names the sea's sounds"]
    assert run_with("p3-dedupe", written).info["criteria"] == ["Uses colour words", "Names the sea's sounds"]
    kept = run_with("p3-written", written, criteria_as_written=True)
    assert kept.info["criteria"] == written
    # the evaluator scored the repeated criterion once: the copy it left unscored is a missing score, an error
    assert [(e.kind, "1 of 3 score(s)" in e.message) for e in kept.errors] == [("ScoreMissing", True)]
    assert len(kept.iterations[0].scores) == 3


def test_criteria_as_written_takes_an_empty_list_and_mean_reply_averages_the_reply() -> None:
    """Default: an empty list is asked for again (here one attempt: the run ends in error). As written: the
    run goes on with no criteria, and the design document's average of the evaluator's scores comes from mean_reply."""
    refused = run_with("p3-empty-refused", [])
    assert refused.stop_reason == "error" and refused.errors
    taken = run_with("p3-empty-taken", [], criteria_as_written=True, missing_criteria="mean_reply")
    assert taken.info["criteria"] == [] and taken.iterations[0].average == 7.0
    with pytest.raises(ValidationError, match="exclude each other"):
        P3ROConfig(strict_criteria=True, criteria_as_written=True)


def test_an_empty_generated_prompt_is_no_candidate_with_the_error_recorded() -> None:
    """promptlab's own check on the design document's `prompt_text: str`: an empty prompt cannot be evaluated, so it is
    asked for again and then the iteration has no candidate (disclosed in docs/loops.md)."""
    run = run_with("p3-emptyprompt", ["Vivid"], prompt="  ")
    assert run.iterations[0].candidate is None and run.errors and run.errors[0].role == "generator"
