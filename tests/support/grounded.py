"""A small grounded results directory (runs with dev/test scores, deltas and provenance) for the findings and
notebook tests: `write_grounded_sweep` writes it, `promptlab.results.load` reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factories import make_run

from promptlab.record import Delta, GroundedScore, Run
from promptlab.results.store import write_cell

CELLS = {
    "t8": {"loop": "p3ro", "finish_threshold": 8.0, "max_iterations": 3},
    "t10": {"loop": "p3ro", "finish_threshold": 10.0, "max_iterations": 3},
}
"""Two configurations over the same 3 tasks x 2 samples."""

DECISIONS = {"t1": [5.0, 7.0, 9.0], "t2": [6.0, 8.5, 8.0], "t3": [4.0, 5.0, 6.0]}
GROUNDED = {"t1": [0.2, 0.4, 0.7], "t2": [0.3, 0.6, 0.5], "t3": [0.1, 0.2, 0.3]}
"""Per task: the decision score and the dev-split grounded score of iterations 1..3 (critic tracks accuracy)."""


def grounded(split: str, score: float, n: int = 20) -> GroundedScore:
    return GroundedScore(split=split, score=score, n=n, ci_low=max(0.0, score - 0.1), ci_high=min(1.0, score + 0.1))


def grounded_run(params: dict[str, Any], task_id: str, sample: int, prompts_hash: str = "p1") -> Run:
    """A p3ro run truncated at the cell's threshold, with grounded iterations, test scores and a delta."""
    decisions, dev = DECISIONS[task_id], GROUNDED[task_id]
    stop = next((i + 1 for i, d in enumerate(decisions) if d >= params["finish_threshold"]), len(decisions))
    config = {"model": "fake/model", "critic_model": "fake/critic", **params}
    run = make_run(
        [[d] for d in decisions[:stop]],
        task_id=task_id,
        sample=sample,
        config=config,
        criteria=("quality",),
        stop_reason="threshold" if stop < 3 else "max_iterations",
    )
    run.run_id = f"{run.run_id}-{params['finish_threshold']:g}"
    for it, g in zip(run.iterations, dev, strict=False):
        it.decision_score = it.average
        it.grounded = grounded("dev", g)
    best = max(dev[:stop])
    run.baseline_test = grounded("test", 0.2)
    run.final_test = grounded("test", best + 0.05 * sample)
    run.delta = Delta(value=best + 0.05 * sample - 0.2, n=20, ci_low=best - 0.3, ci_high=best - 0.1)
    run.provenance = {"prompt_hashes": {"critic": prompts_hash}, "task_hash": f"h-{task_id}", "experiment_hash": "e1"}
    return run


def write_grounded_sweep(results_dir: Path, mixed_prompts: bool = False) -> Path:
    """Two ok cells of grounded p3ro runs; with `mixed_prompts` the second was made under other role prompts."""
    for cell_id, params in CELLS.items():
        ph = "p2" if mixed_prompts and cell_id == "t10" else "p1"
        write_cell(results_dir, cell_id, params, [grounded_run(params, t, s, ph) for t in DECISIONS for s in (0, 1)])
    return results_dir
