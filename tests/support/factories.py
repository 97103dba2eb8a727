"""Hand-built Run records and a small results directory for the results and plots tests."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from promptlab.record import Iteration, ModelCall, Run, Score, Step, StepError, Task, Totals

IN_TOK, OUT_TOK, COST = 10, 5, 0.001
"""Tokens and cost of every hand-built model call."""


def _step(
    phase: str, role: str, iteration: int | None, *, hit: bool = False, error: bool = False, cost: float | None = COST
) -> Step:
    if error:
        err = StepError(iteration=iteration, phase=phase, role=role, kind="ParseError", message="bad JSON", raw="{oops")
        return Step(
            iteration=iteration,
            phase=phase,
            role=role,
            model="fake/critic",
            call=ModelCall(model="fake/critic", attempts=3),
            error=err,
        )
    return Step(
        iteration=iteration,
        phase=phase,
        role=role,
        model="fake/model",
        output={"text": "x"},
        call=ModelCall(
            model="fake/model", cache_hit=hit, input_tokens=IN_TOK, output_tokens=OUT_TOK, cost_usd=cost, latency_s=0.01
        ),
    )


def make_run(
    scores: list[list[float | None]],
    *,
    loop: str = "p3ro",
    task_id: str = "t1",
    sample: int = 0,
    config: dict[str, Any] | None = None,
    stop_reason: str = "max_iterations",
    criteria: tuple[str, ...] = ("clarity", "tone"),
    hit: bool = False,
    failed_eval_at: int | None = None,
    cost: float | None = COST,
    final_scores: list[float | None] | None = None,
) -> Run:
    """A run with one setup step, per iteration a generate and an evaluate step (plus a failed critic
    step at `failed_eval_at`), and one final step; every successful call has IN_TOK/OUT_TOK/`cost`.

    `scores[k]` are iteration k+1's per-criterion scores (None = missing); an empty list = unscored.
    """
    config = config or {"model": "fake/model", "generator_model": None, "critic_model": None}
    task = Task(id=task_id, prompt=f"prompt of {task_id}", goal="be clear")
    run = Run(
        run_id=f"{loop}-{task_id}-{sample}-{hashlib.sha256(str(config).encode()).hexdigest()[:12]}",  # hash() % 10,000 collided
        loop=loop,
        task=task,
        config=config,
        sample=sample,
        setup=[_step("plan", "planner", None, hit=hit, cost=cost)],
    )
    errors: list[StepError] = []
    for k, row in enumerate(scores, start=1):
        steps = [
            _step("generate", "generator", k, hit=hit, cost=cost),
            _step("evaluate", "critic", k, hit=hit, cost=cost),
        ]
        if failed_eval_at == k:
            steps.append(_step("evaluate", "critic", k, error=True))
            assert steps[-1].error is not None
            errors.append(steps[-1].error)
        present = [s for s in row if s is not None]
        run.iterations.append(
            Iteration(
                index=k,
                candidate=f"candidate {k}",
                steps=steps,
                decision="continue",
                scores=[Score(criterion=c, score=s, judge="fake/critic") for c, s in zip(criteria, row, strict=False)],
                average=round(sum(present) / len(present), 4) if present else None,
            )
        )
    run.final = [_step("polish", "polisher", None, hit=hit, cost=cost)]
    run.final_scores = [Score(criterion="judge", score=s) for s in (final_scores or [])]
    run.errors = errors
    scored = [it for it in run.iterations if it.average is not None]
    if scored:
        best = max(scored, key=lambda it: (it.average, -it.index))
        run.best_iteration, run.best_score = best.index, best.average
    run.stop_reason = stop_reason
    n_calls = sum(1 for s in [*run.setup, *run.final, *(s for it in run.iterations for s in it.steps)])
    n_ok = n_calls - len(errors)
    run.totals = Totals(
        calls=n_calls,
        cache_hits=n_ok if hit else 0,
        failed_calls=len(errors),
        input_tokens=0 if hit else IN_TOK * n_ok,
        output_tokens=0 if hit else OUT_TOK * n_ok,
        cost_usd=None if cost is None else (0.0 if hit else round(COST * n_ok, 10)),
        wall_time_s=1.5,
    )
    return run


CELL_A = {
    "loop": "p3ro",
    "finish_threshold": 8.0,
    "max_iterations": 3,
    "generator_model": "fake/gen-a",
    "critic_model": "fake/crit-a",
}
CELL_B = {
    "loop": "p3ro",
    "finish_threshold": 9.0,
    "max_iterations": 3,
    "generator_model": "fake/gen-b",
    "critic_model": "fake/crit-a",
}
CELL_FAILED = {
    "loop": "p3ro",
    "finish_threshold": 9.5,
    "max_iterations": 3,
    "generator_model": "fake/gen-a",
    "critic_model": "fake/crit-a",
}


def cfg(params: dict[str, Any]) -> dict[str, Any]:
    """The loop config a cell's params imply."""
    return {
        "model": "fake/model",
        "generator_model": params["generator_model"],
        "critic_model": params["critic_model"],
        "finish_threshold": params["finish_threshold"],
        "max_iterations": params["max_iterations"],
    }


def runs_a() -> list[Run]:
    """Cell A: 2 tasks x 2 samples; one run reaches the threshold, one has a missing score and a failed call."""
    c = cfg(CELL_A)
    return [
        make_run([[6.0, 7.0], [8.0, 9.0]], task_id="t1", sample=0, config=c, stop_reason="threshold"),
        make_run([[5.0, None], [6.0, 6.0], [7.0, 7.0]], task_id="t1", sample=1, config=c, failed_eval_at=1),
        make_run([[4.0, 4.0], [5.0, 5.0], [6.0, 6.0]], task_id="t2", sample=0, config=c),
        make_run([[7.0, 7.0], [None, None], []], task_id="t2", sample=1, config=c, final_scores=[8.0, None]),
    ]


def runs_b() -> list[Run]:
    """Cell B: 2 tasks x 2 samples, replayed from the cache (original tokens still recorded)."""
    c = cfg(CELL_B)
    return [
        make_run(
            [[5.0, 5.0], [6.0, 6.0], [6.0, 6.0]],
            task_id=t,
            sample=s,
            config=c,
            hit=True,
            stop_reason="max_iterations" if s == 0 else "plateau",
        )
        for t in ("t1", "t2")
        for s in (0, 1)
    ]


FAILED_ERROR = {
    "kind": "SweepCellError",
    "message": "cell 4 raised ValueError: boom",
    "notebook": "run_cell.ipynb",
    "cell_index": 4,
    "ename": "ValueError",
    "evalue": "boom",
}


def write_sweep(results_dir: Path) -> Path:
    """A results directory with two ok cells and one failed cell (holding a partial run)."""
    from promptlab.results.store import write_cell

    write_cell(results_dir, "a", CELL_A, runs_a(), wall_time_s=3.0)
    write_cell(results_dir, "b", CELL_B, runs_b(), wall_time_s=2.0)
    partial = make_run([[3.0, 3.0]], task_id="t1", config=cfg(CELL_FAILED), stop_reason="error")
    write_cell(results_dir, "failed", CELL_FAILED, [partial], error=FAILED_ERROR, wall_time_s=1.0)
    return results_dir


def make_grounded_run(*, source: str = "grounded", task_id: str = "g1") -> Run:
    """A creator_critic-shaped run on a grounded task: two iterations with dev scores, a baseline and a
    final test measure, a delta and provenance (values chosen by hand; see test_results)."""
    from promptlab.record import Delta, GroundedScore

    config = {"model": "fake/gen", "critic_model": "fake/crit", "score_source": source, "target_model": "fake/target"}
    run = make_run([[4.0], [6.0]], loop="creator_critic", task_id=task_id, config=config, criteria=("overall",))
    run.models = {"creator": "fake/gen", "critic": "fake/crit", "target": "fake/target"}
    for it, (dev, n) in zip(run.iterations, [(0.5, 4), (0.75, 4)], strict=True):
        it.grounded = GroundedScore(split="dev", score=dev, n=n, ci_low=dev - 0.3, ci_high=min(dev + 0.2, 1.0))
        it.decision_score = 1 + 9 * dev if source == "grounded" else it.average
        for sc in it.scores:
            sc.judge = "critic"
    run.baseline_test = GroundedScore(split="test", score=0.25, n=8, ci_low=0.07, ci_high=0.59)
    run.final_test = GroundedScore(split="test", score=0.625, n=8, ci_low=0.31, ci_high=0.86)
    run.delta = Delta(value=0.375, n=8, ci_low=0.125, ci_high=0.625)
    run.info["final_iteration"] = 2
    run.provenance = {
        "promptlab_version": "0.1.0",
        "litellm_version": "1.2.3",
        "task_hash": "t" * 16,
        "experiment_hash": "e" * 16,
        "prompt_hashes": {"creator": "a" * 16, "critic": "b" * 16},
        "models": {"creator": {"requested": "fake/gen", "reported": "gen-2024", "endpoint": None}},
    }
    return run


LONG_CRITERION = (
    "the reply names the customer's order number, apologises once, without grovelling, gives a "
    "concrete delivery date, offers a refund or a replacement, then signs off with the support "
    "agent's full name and team."
)
"""A criterion of 200 characters and more (what a decomposer can write), for the run browser's layout tests."""
assert len(LONG_CRITERION) >= 200


def make_wide_run(*, with_start: bool = False) -> Run:
    """A run that strains the run browser: a 200-character criterion with a long justification, 20
    per-example `score_dev` steps per iteration, an unpriced call (cost unknown), a long step error; with
    `with_start`, an iteration 0 holding the starting prompt (what grounded runs record)."""
    from promptlab.record import GroundedScore

    run = make_run([[7.0, 6.0], [8.0, 9.0]], criteria=(LONG_CRITERION, "tone"), cost=None)
    for it in run.iterations:
        it.scores[0].justification = "Because " + "the reply is specific and polite; " * 12
        it.grounded = GroundedScore(split="dev", score=0.6, n=20, ci_low=0.39, ci_high=0.78)
        it.steps += [
            Step(
                iteration=it.index,
                phase="score_dev",
                role="target",
                model="fake/target",
                output={"text": f"answer {k}", "example": k, "score": 1.0 if k < 12 else 0.0},  # 12 of 20: 0.6
                call=ModelCall(model="fake/target", input_tokens=7, output_tokens=2, cost_usd=None),
            )
            for k in range(20)
        ]
        it.steps.append(
            Step(
                iteration=it.index,
                phase="evaluate",
                role="critic",
                model="fake/critic",
                error=StepError(
                    iteration=it.index,
                    phase="evaluate",
                    role="critic",
                    kind="ParseError",
                    message="no JSON object in the reply: " + "x" * 300,
                ),
            )
        )
    if with_start:
        start = Iteration(
            index=0,
            candidate=run.task.prompt,
            decision="start",
            grounded=GroundedScore(split="dev", score=0.4, n=20, ci_low=0.22, ci_high=0.61),
        )
        run.iterations.insert(0, start)
    return run
