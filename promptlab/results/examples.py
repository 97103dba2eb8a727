"""The per-example frame: what each candidate prompt's model replied on each labelled example, and its score.

A grounded loop runs every candidate prompt on the task's dev examples, and the starting and final prompts on
the test examples (`promptlab.loops.runtime.grounding`); each of those calls is a Step of the run record (phase
`score_dev` / `score_test`, output {"text", "example", "score"}). `example_frame(results)` reads them back from the
ok cells' runs.jsonl as one row per run x measurement x example (columns `EXAMPLE_COLUMNS`), and `example_rows(run)`
gives one run's rows as dicts (what the Inspect export writes as samples).

Which candidate a measurement ran: a dev step belongs to its iteration, whose candidate it measured (iteration 0 is
the starting prompt). The test steps follow the order in which `measure_test` ran them: the starting prompt
(`baseline_test`), then the final prompt (`final_test`), then, with `test_incumbents`, each incumbent whose
prompt was not measured yet (`incumbent_test`); a new measurement starts where the example positions start again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..eval.tasks import examples_of
from ..record import Example, Run, Step
from .columns import Columns
from .store import Results, load, read_runs

if TYPE_CHECKING:
    import pandas as pd

EXAMPLE_COLUMNS: Columns = {
    "cell_id": ("string", "Sweep cell the run belongs to."),
    "run_id": ("string", "The run (Run.run_id)."),
    "loop": ("string", "Loop name."),
    "task_id": ("string", "Task id."),
    "sample": ("Int64", "Replicate index of the run."),
    "measure": (
        "string",
        "Which measurement: 'dev' (a candidate on the dev split, inside the loop), 'baseline_test' (the "
        "starting prompt on test), 'final_test' (the final prompt on test) or 'incumbent_test' (test_incumbents).",
    ),
    "candidate": (
        "Int64",
        "The iteration whose candidate prompt was run (0: the starting prompt); <NA> when the final prompt is no "
        "iteration's candidate.",
    ),
    "split": ("string", "dev or test."),
    "example": ("Int64", "Position of the example within its split (split order)."),
    "example_id": ("string", "The example's id, <NA> if it has none."),
    "input": ("string", "The example's input (a dict input as JSON text)."),
    "target": ("string", "The example's target (JSON text unless a string)."),
    "output": ("string", "The target model's reply; <NA> when the call failed."),
    "score": ("Float64", "The scorer's value in [0, 1]; <NA> when the call or the scorer failed (never a default)."),
    "error": ("string", "Why the score is missing ('Kind: message', or the scorer's error), else <NA>."),
    "model": ("string", "The model that replied (the target model)."),
    "input_tokens": ("Int64", "Input tokens of the call (the original call, also for a cache hit)."),
    "output_tokens": ("Int64", "Output tokens of the call."),
    "cost_usd": ("Float64", "Cost of the original call; <NA> when the price is unknown."),
    "cache_hit": ("boolean", "The reply came from the call cache."),
}
"""The per-example frame: one row per run x measurement x example."""

TEST_MEASURES = ("baseline_test", "final_test")
"""The test measurements every grounded run makes, in the order it makes them."""


def example_frame(results: Results | str | os.PathLike[str]) -> pd.DataFrame:
    """Every example reply of the ok cells' runs, one row per run x measurement x example (`EXAMPLE_COLUMNS`).

    Args:
        results: A loaded results directory, or its path.

    Returns:
        The frame, in cell, run and step order; empty (same columns) when no run measured examples.
    """
    import pandas as pd

    loaded = results if isinstance(results, Results) else load(results)
    rows: list[dict[str, Any]] = []
    wanted = set(loaded.runs["run_id"].dropna())
    for cell_id in dict.fromkeys(loaded.runs["cell_id"].dropna()):
        for run in read_runs(loaded.path, str(cell_id)):
            if run.run_id in wanted:
                rows.extend(example_rows(run, str(cell_id)))
    dtypes: dict[str, Any] = {name: dtype for name, (dtype, _) in EXAMPLE_COLUMNS.items()}
    data = {name: pd.array([r[name] for r in rows], dtype=dtype) for name, dtype in dtypes.items()}
    return pd.DataFrame(data)


def example_rows(run: Run, cell_id: str = "") -> list[dict[str, Any]]:
    """One run's per-example rows (`EXAMPLE_COLUMNS` keys), dev measurements first, then test ones."""
    rows: list[dict[str, Any]] = []
    base = {"cell_id": cell_id, "run_id": run.run_id, "loop": run.loop, "task_id": run.task.id, "sample": run.sample}
    if not run.task.grounded:
        return rows
    for split, measure, candidate, steps in measurements(run):
        examples = examples_of(run.task, split)
        for step in steps:
            position = int(step.output["example"])
            example = examples[position] if 0 <= position < len(examples) else None
            rows.append(
                {
                    **base,
                    "measure": measure,
                    "candidate": candidate,
                    "split": split,
                    "example": position,
                    **_example_fields(example),
                    **_reply_fields(step),
                }
            )
    return rows


def measurements(run: Run) -> Iterator[tuple[str, str, int | None, list[Step]]]:
    """(split, measure, candidate iteration, steps) of each measurement of the run, in the order it made them."""
    for it in run.iterations:
        steps = _example_steps(it.steps, "score_dev")
        for chunk in _chunks(steps):
            yield "dev", "dev", it.index, chunk
    test = _example_steps([*run.setup, *run.final], "score_test")
    names = [*TEST_MEASURES, *(["incumbent_test"] * len(test))]
    candidates = [0, final_candidate(run), *incumbent_candidates(run)]
    for i, chunk in enumerate(_chunks(test)):
        yield "test", names[i], candidates[i] if i < len(candidates) else None, chunk


def final_candidate(run: Run) -> int | None:
    """The iteration whose candidate is the run's final prompt: `info['final_iteration']`, else the last
    iteration whose candidate is the final output, else None."""
    recorded = run.info.get("final_iteration")
    if isinstance(recorded, int):
        return recorded
    matching = [it.index for it in run.iterations if it.candidate is not None and it.candidate == run.final_output]
    return matching[-1] if matching else None


def incumbent_candidates(run: Run) -> list[int]:
    """The iterations `measure_test` measured on test after the starting and final prompts (`test_incumbents`):
    each incumbent whose prompt was not measured yet, in the order they became incumbents."""
    measured = {run.task.prompt, run.final_output}
    by_index = {it.index: it for it in run.iterations}
    out = []
    for index in dict.fromkeys(it.incumbent for it in run.iterations if it.incumbent is not None):
        it = by_index.get(index)
        if it is None or it.candidate is None or it.test is None or it.candidate in measured:
            continue
        measured.add(it.candidate)
        out.append(index)
    return out


def _example_steps(steps: list[Step], phase: str) -> list[Step]:
    return [s for s in steps if s.phase == phase and isinstance(s.output.get("example"), int)]


def _chunks(steps: list[Step]) -> Iterator[list[Step]]:
    """The steps split into measurements: each measurement places its steps in example order, so a position that
    does not increase starts the next one."""
    chunk: list[Step] = []
    for step in steps:
        if chunk and step.output["example"] <= chunk[-1].output["example"]:
            yield chunk
            chunk = []
        chunk.append(step)
    if chunk:
        yield chunk


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _example_fields(example: Example | None) -> dict[str, Any]:
    if example is None:
        return {"example_id": None, "input": None, "target": None}
    return {"example_id": example.id, "input": _text(example.input), "target": _text(example.target)}


def _reply_fields(step: Step) -> dict[str, Any]:
    call, out = step.call, step.output
    error = f"{step.error.kind}: {step.error.message}" if step.error else out.get("scorer_error")
    score = out.get("score")
    return {
        "output": out.get("text"),
        "score": float(score) if isinstance(score, int | float) else None,
        "error": error,
        "model": step.model or (call.model if call else None),
        "input_tokens": call.input_tokens if call else None,
        "output_tokens": call.output_tokens if call else None,
        "cost_usd": call.cost_usd if call else None,
        "cache_hit": call.cache_hit if call else None,
    }


__all__ = ["EXAMPLE_COLUMNS", "TEST_MEASURES", "example_frame", "example_rows", "final_candidate", "measurements"]
