"""People's judgments in the Inspect logs: a second score, 'people', on each judged sample, and an open-ended run's
recorded outputs (`record_outputs`) as samples of their own, so its judgments have a sample to sit on.

The score is the share of the item's judgments preferring the returned prompt's text (ties half) for a pair, or the
mean rating; its metadata names the item and every judgment (person, value, the order shown).
"""

from __future__ import annotations

import os
from typing import Any

from ..loops.runtime.budget import OUTPUT_PHASE
from ..people.judged import pair_label
from ..people.plan import plan_path, read_plan
from ..people.storage import SKIP, read_judgments
from ..record import Run
from ..results.examples import final_candidate

OUTPUT_MEASURES = {"start": "start_output", "returned": "returned_output"}
"""The measure of an open-ended run's recorded output, by side (its samples' id prefix)."""


def output_rows(run: Run, cell_id: str = "") -> list[dict[str, Any]]:
    """An open-ended run's recorded outputs as rows shaped like `results.examples.example_rows` (split 'output')."""
    rows = []
    for step in run.final:
        side = step.output.get("prompt")
        if step.phase != OUTPUT_PHASE or side not in OUTPUT_MEASURES:
            continue
        call = step.call
        rows.append(
            {
                "cell_id": cell_id,
                "run_id": run.run_id,
                "loop": run.loop,
                "task_id": run.task.id,
                "sample": run.sample,
                "measure": OUTPUT_MEASURES[side],
                "candidate": 0 if side == "start" else final_candidate(run),
                "split": "output",
                "example": 0,
                "example_id": None,
                "input": run.task.goal or run.task.prompt,
                "target": None,
                "output": step.output.get("text"),
                "score": None,
                "error": f"{step.error.kind}: {step.error.message}" if step.error else None,
                "model": step.model,
                "input_tokens": call.input_tokens if call else None,
                "output_tokens": call.output_tokens if call else None,
                "cost_usd": call.cost_usd if call else None,
                "cache_hit": call.cache_hit if call else None,
            }
        )
    return rows


def people_scores(results: str | os.PathLike[str]) -> dict[str, dict[tuple[str, int], Any]]:
    """Run id -> (measure, example) -> the Inspect `Score` of the people's judgments of that sample."""
    from inspect_ai.scorer import Score

    if not plan_path(results).is_file():
        return {}
    plan = read_plan(results)
    items = plan.by_id()
    found: dict[str, list[Any]] = {}
    for j in read_judgments(results).judgments:
        if j.item in items and j.value != SKIP:
            found.setdefault(j.item, []).append(j)
    out: dict[str, dict[tuple[str, int], Any]] = {}
    for item_id, judgments in found.items():
        item = items[item_id]
        if plan.kind == "pair":
            values = [pair_label(j.value, j.shown)[0] for j in judgments]
            shares = [v / 2 for v in values if v is not None]
        else:
            shares = [float(j.value) for j in judgments]
        if not shares:
            continue
        side = "returned" if "returned" in item.texts else next(iter(item.texts))
        key = ("final_test" if side == "returned" else "baseline_test", item.example or 0)
        if item.example is None:
            key = (OUTPUT_MEASURES[side], 0)
        meta = {
            "item": item.id,
            "kind": plan.kind,
            "judgments": len(shares),
            "by": [{"person": j.person, "value": j.value, "shown": j.shown} for j in judgments],
        }
        out.setdefault(item.run_id, {})[key] = Score(value=sum(shares) / len(shares), metadata=meta)
    return out


__all__ = ["OUTPUT_MEASURES", "output_rows", "people_scores"]
