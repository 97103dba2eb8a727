"""What people can judge in a results directory: per run, what its starting prompt and its returned prompt produce
for the same input, or the two prompts themselves.

- A grounded run's test replies (`baseline_test` against `final_test`, on the same example).
- An open-ended run's recorded outputs (`record_outputs`: the two prompts' own replies).
- Otherwise, for a loop whose output is a prompt, the starting and the returned prompt.

Each item carries the critic's scores of the two prompts (the iterations' averages) where the run has them, so
the critic can be set beside the people. More in docs/people.md.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..eval.tasks import examples_of
from ..loops.runtime.budget import OUTPUT_PHASE
from ..record import Run
from ..results.examples import final_candidate, measurements
from ..results.store import load, read_runs

SIDES = ("start", "returned")
"""The two sides of a pair: what the starting prompt and what the returned prompt gave."""
LABELS = ("start", "tie", "returned")
"""A pair's labels (the side preferred), in the order of the statistics' 3 x 3 tables."""
Kind = Literal["pair", "rating"]


class Item(BaseModel):
    """One thing to judge: two texts for the same input (a pair) or one text (a rating)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Stable id (a hash of the run, the kind, the input and the sides): the same on every plan."""
    kind: Kind
    """'pair' (which of two is better) or 'rating' (one text on the plan's scale)."""
    what: Literal["outputs", "prompts"]
    """The texts are what the prompts produced ('outputs') or the prompts themselves ('prompts')."""
    cell_id: str
    """The sweep cell of the run."""
    run_id: str
    """The run."""
    task_id: str
    """The run's task."""
    loop: str
    """The run's loop."""
    critic: str
    """The model of the run's judging roles (config critic_model, else model)."""
    pairing: str
    """The run's model pairing: 'generator / critic'."""
    input: str
    """What the texts answer, shown to the person: the example's input, or the task's goal."""
    example: int | None = None
    """The test example's position in its split (grounded runs); None for an open-ended run's own outputs."""
    texts: dict[str, str]
    """Side ('start', 'returned') -> text; a rating has one side."""
    critic_scores: dict[str, float | None] = Field(default_factory=dict)
    """Side -> the critic's score of that side's prompt (its iteration's average), where the run has one."""
    order: list[str]
    """The sides in the order a CSV's A and B refer to (drawn with the plan's seed)."""


def candidate_items(
    results: str, kind: Kind, rng: random.Random, per_run: int = 1
) -> tuple[list[Item], dict[str, int]]:
    """Every item the ok runs of `results` offer, and how many runs were left out and why."""
    loaded = load(results)
    items: list[Item] = []
    left_out: dict[str, int] = {}
    wanted = set(loaded.runs["run_id"].dropna())
    for cell_id in dict.fromkeys(loaded.runs["cell_id"].dropna()):
        for run in read_runs(loaded.path, str(cell_id)):
            if run.run_id not in wanted:
                continue
            found = list(run_items(run, str(cell_id), kind, rng, per_run))
            if not found:
                why = _why_none(run)
                left_out[why] = left_out.get(why, 0) + 1
            items.extend(found)
    return items, left_out


def run_items(run: Run, cell_id: str, kind: Kind, rng: random.Random, per_run: int = 1) -> Iterator[Item]:
    """The items of one run: up to `per_run` inputs whose two texts differ (pairs), or each distinct text
    (ratings)."""
    pairs = [p for p in _text_pairs(run) if p[1]["start"] != p[1]["returned"]]
    rng.shuffle(pairs)
    scores = _critic_scores(run)
    cfg = run.config
    critic = str(cfg.get("critic_model") or cfg.get("model") or "?")
    pairing = f"{cfg.get('generator_model') or cfg.get('model') or '?'} / {critic}"
    for what, texts, shown_input, example in pairs[:per_run]:
        for chosen in [list(SIDES)] if kind == "pair" else [[s] for s in SIDES]:
            order = rng.sample(chosen, len(chosen))
            key = "|".join([kind, run.run_id, shown_input, *(texts[s] for s in chosen)])
            yield Item(
                id="i" + hashlib.sha256(key.encode()).hexdigest()[:12],
                kind=kind,
                what=what,
                cell_id=cell_id,
                run_id=run.run_id,
                task_id=run.task.id,
                loop=run.loop,
                critic=critic,
                pairing=pairing,
                input=shown_input,
                example=example,
                texts={s: texts[s] for s in chosen},
                critic_scores={s: scores.get(s) for s in chosen},
                order=order,
            )


def _text_pairs(run: Run) -> list[tuple[Literal["outputs", "prompts"], dict[str, str], str, int | None]]:
    """(what, side -> text, input, test example) for each input both prompts answered."""
    goal = run.task.goal.strip() or run.task.prompt
    if run.task.grounded:
        tests = {m: steps for split, m, _, steps in measurements(run) if split == "test"}
        start, returned = tests.get("baseline_test", []), tests.get("final_test", [])
        found = {s.output["example"]: s for s in start}
        out = []
        for step in returned:
            other = found.get(step.output["example"])
            a, b = (other.output.get("text") if other else None), step.output.get("text")
            if isinstance(a, str) and isinstance(b, str):
                position = int(step.output["example"])
                out.append(("outputs", {"start": a, "returned": b}, _example_input(run, position), position))
        return out  # type: ignore[return-value]
    outputs = {s.output.get("prompt"): s.output.get("text") for s in run.final if s.phase == OUTPUT_PHASE}
    first, last = outputs.get("start"), outputs.get("returned")
    if isinstance(first, str) and isinstance(last, str):
        return [("outputs", {"start": first, "returned": last}, goal, None)]
    if "score_source" in run.config and isinstance(run.final_output, str):  # a loop whose output is a prompt
        return [("prompts", {"start": run.task.prompt, "returned": run.final_output}, goal, None)]
    return []


def _example_input(run: Run, position: int) -> str:
    examples = examples_of(run.task, "test")
    value = examples[position].input if 0 <= position < len(examples) else ""
    return value if isinstance(value, str) else "\n".join(f"{k}: {v}" for k, v in value.items())


def _critic_scores(run: Run) -> dict[str, float | None]:
    """The critic's average for the starting prompt (iteration 0, where it was a candidate) and the returned one."""
    by_index = {it.index: it for it in run.iterations}
    start = by_index.get(0)
    final = final_candidate(run)
    returned = by_index.get(final) if final is not None else None
    return {
        "start": start.average if start is not None and start.candidate == run.task.prompt else None,
        "returned": returned.average if returned is not None else None,
    }


def _why_none(run: Run) -> str:
    if run.task.grounded:
        return "no test replies that differ between the starting and the returned prompt"
    if any(s.phase == OUTPUT_PHASE for s in run.final) or "score_source" in run.config:
        return "the returned prompt (or its reply) is the starting one's"
    return "no prompt returned and no outputs recorded (record_outputs)"


__all__ = ["LABELS", "SIDES", "Item", "Kind", "candidate_items", "run_items"]
