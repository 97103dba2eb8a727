"""Each prompt-search loop once on the embedded local model, on a small budget: the model writes every proposal,
gradient, edit and paraphrase through its grammar (replies that parse or a recorded error, never an invented
candidate), every candidate is measured on the dev split, the budget stops the run, and the start, the
returned prompt and every incumbent are measured on the test split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptlab.loops.registry import run_loop
from promptlab.record import Example, Split, Task

ROOT = Path(__file__).resolve().parents[2]
CONFIGS: dict[str, dict[str, Any]] = {
    "opro": {"candidates_per_step": 2},
    "ape": {"demo_sets": 2, "demos": 3, "proposals_per_set": 2},
    "protegi": {
        "n_gradients": 1,
        "mc_samples_per_step": 1,
        "max_expansion_factor": 2,
        "eval_rounds": 2,
        "eval_prompts_per_round": 2,
        "samples_per_eval": 2,
    },
    "resample": {},
}


def dates_task() -> Task:
    """The first 10 examples of data/grounded/dates.jsonl, 5 dev + 5 test, with the shipped prompt and scorer."""
    rows = [json.loads(line) for line in (ROOT / "data/grounded/dates.jsonl").read_text().splitlines()][:10]
    return Task(
        id="dates-local",
        prompt="Write the date from this sentence in YYYY-MM-DD format.\n\n{input}",
        goal="A prompt that makes the model write the date in a sentence as YYYY-MM-DD.",
        examples=[Example(**r) for r in rows],
        scorer={"kind": "regex", "pattern": r"\d{4}-\d{2}-\d{2}", "group": 0},
        split=Split(seed=0, dev=5, test=5),
    )


@pytest.mark.local_model
@pytest.mark.parametrize("loop", list(CONFIGS))
def test_a_search_loop_on_the_local_model_within_a_small_budget(loop: str, tmp_path: Path) -> None:
    run = run_loop(
        loop,
        dates_task(),
        {"model": "local/smollm2", "max_tokens": 120, "eval_max_tokens": 16, "budget_calls": 24, **CONFIGS[loop]},
        cache=tmp_path,
    )
    assert not run.incomplete and run.stop_reason in ("budget", "max_iterations")
    assert run.spent.calls <= 24
    start = run.iterations[0]
    assert start.candidate == run.task.prompt and start.grounded.n + start.grounded.errors == 5
    written = [it for it in run.iterations if it.index > 0]
    assert written or loop == "protegi"  # ProTeGi's first round may not fit: its calls are then the expansion's
    for it in written:  # a candidate is text the model wrote, or its failure is recorded
        assert it.candidate or it.decision == "NO_CANDIDATE" and any(e.iteration == it.index for e in run.errors)
    for it in run.iterations:
        if it.grounded is not None:
            examples = [st.output["example"] for st in it.steps if st.phase == "score_dev"]
            assert len(examples) == len(set(examples)) and set(examples) <= set(range(5))
    assert run.baseline_test.n + run.baseline_test.errors == 5 and run.final_test is not None
    incumbents = {it.incumbent for it in run.iterations if it.incumbent is not None}
    assert all(run.iterations[i].test is not None for i in incumbents)
    again = run_loop(
        loop,
        dates_task(),
        {"model": "local/smollm2", "max_tokens": 120, "eval_max_tokens": 16, "budget_calls": 24, **CONFIGS[loop]},
        cache=tmp_path,
    )
    assert again.comparable() == run.comparable() and again.totals.tokens == 0  # nothing paid again
