"""A results directory shaped like the demo's: Creator/Critic runs on grounded tasks, one generator and three critics
whose own scores sit on different scales (SmolLM2's G-Eval expectation, the oracle's 1 + 9 x accuracy, a noisy
oracle), with dev and test accuracies that differ by critic. For the chart tests of issue #31 (comparisons across
critics use accuracy; a critic's own score stays within that critic)."""

from __future__ import annotations

from pathlib import Path

from factories import make_run

from promptlab.record import Delta, GroundedScore
from promptlab.results.store import write_cell

CRITICS = {
    "smollm2": "local/smollm2",
    "oracle": "sim/oracle",
    "noisy": "sim/noisy?sd=2&seed=0",
}
"""Cell id -> critic model."""
TASKS = ("sentiment", "arithmetic", "dates")
START_DEV = {"sentiment": 0.30, "arithmetic": 0.20, "dates": 0.25}
"""Dev accuracy of each task's starting prompt."""
GAIN = {"smollm2": 0.02, "oracle": 0.12, "noisy": 0.06}
"""How much the prompt each critic returns gains, on average."""


def critic_score(cell: str, accuracy: float, sample: int) -> float:
    """The critic's own score of a candidate: on its own scale."""
    if cell == "oracle":
        return 1 + 9 * accuracy
    if cell == "noisy":
        return min(10.0, max(1.0, 1 + 9 * accuracy + (-1.5, 0.8, 2.1, -0.4)[sample % 4]))
    return 4.2 + 0.3 * (sample % 3)  # SmolLM2's expectation: near-flat, unrelated to accuracy


def acc(split: str, score: float, n: int) -> GroundedScore:
    return GroundedScore(split=split, score=score, n=n, ci_low=max(0.0, score - 0.1), ci_high=min(1.0, score + 0.1))


def write_critics_sweep(results_dir: Path, samples: int = 4) -> Path:
    """Three ok cells (one per critic) of 3 tasks x `samples` two-iteration runs (the start, one rewrite)."""
    for cell, critic in CRITICS.items():
        params = {"loop": "creator_critic", "generator_model": "local/smollm2", "critic_model": critic}
        runs = []
        for task in TASKS:
            for sample in range(samples):
                start = START_DEV[task]
                rewrite = round(start + GAIN[cell] + 0.05 * (sample % 3) - 0.04, 2)
                scores = [critic_score(cell, start, sample), critic_score(cell, rewrite, sample)]
                config = {"model": "local/smollm2", **params}
                config.pop("loop")
                run = make_run(
                    [[s] for s in scores],
                    loop="creator_critic",
                    task_id=task,
                    sample=sample,
                    config=config,
                    criteria=("overall",),
                )
                run.run_id = f"{cell}-{task}-{sample}"
                for it, dev in zip(run.iterations, (start, rewrite), strict=True):
                    it.grounded = acc("dev", dev, 20)
                    it.decision_score = it.average
                pick = max(range(2), key=lambda k: scores[k])  # the critic's choice, the start on a tie
                run.final_output = run.iterations[pick].candidate
                test_start, test_final = start - 0.02, (start, rewrite)[pick] - 0.03
                run.baseline_test, run.final_test = acc("test", test_start, 60), acc("test", test_final, 60)
                gain = test_final - test_start
                run.delta = Delta(value=gain, n=60, ci_low=gain - 0.08, ci_high=gain + 0.08)
                runs.append(run)
        write_cell(results_dir, cell, params, runs)
    return results_dir
