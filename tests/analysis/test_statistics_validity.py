"""The statistics the reports use, checked against a known truth on simulated data (seeded; well under 60 s).

- The 95% intervals cover the true value in 93-97% of at least 1,000 simulated data sets each: Wilson's
  interval of an accuracy (`mean_ci` on 0/1 scores), the bootstrap interval of a mean gain over runs
  (`bootstrap_ci`, what `delta_table` reports per configuration) and the paired-delta interval of two prompts
  on the same test examples (`paired_delta_ci`, what `Run.delta` records).
- `compare` with Holm's correction, on families of configurations that truly do not differ, rejects some
  null in at most 6% of the families (a family-wise error rate of 5%).
- `calibration` recovers the Spearman correlation a simulated critic was built with (`sim/noisy`).
- `counterfactual_stopping` gives what actually re-running a scripted loop at each lower threshold and cap
  gives.

docs/analysis.md quotes the coverage these tests measure.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

import promptlab
from promptlab import analysis
from promptlab.critics.simulated import parse_sim
from promptlab.eval.stats import bootstrap_ci, mean_ci, paired_delta_ci
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.loops.p3ro.config import P3ROConfig
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.record import Example, Split, Task
from promptlab.results.frames import iteration_frame, tidy

DATASETS = 1000
COVERAGE = (0.93, 0.97)


def coverage(intervals: list[tuple[float | None, float | None]], truths: list[float]) -> float:
    return float(
        np.mean(
            [
                lo is not None and hi is not None and lo - 1e-12 <= t <= hi + 1e-12
                for (lo, hi), t in zip(intervals, truths, strict=True)
            ]
        )
    )


def test_wilson_interval_of_an_accuracy_covers_95_percent() -> None:
    """A prompt's accuracy on n = 20 (dev) or 60 (test) examples, true accuracy anywhere in 0.1-0.9."""
    rng = np.random.default_rng(11)
    intervals, truths = [], []
    for k in range(DATASETS):
        p, n = rng.uniform(0.1, 0.9), (20, 60)[k % 2]
        _, _, lo, hi = mean_ci(list((rng.random(n) < p).astype(float)))
        intervals.append((lo, hi))
        truths.append(p)
    assert COVERAGE[0] <= coverage(intervals, truths) <= COVERAGE[1]


def test_bootstrap_interval_of_a_mean_gain_over_runs_covers_95_percent() -> None:
    """The mean test-split gain of one configuration over 12 runs (a demo configuration's n): each run's
    prompt has its own true gain (normal across runs around the configuration's gain, the truth), measured
    with the sampling noise of 60 test examples under each prompt."""
    rng = np.random.default_rng(12)
    intervals, truths = [], []
    for _ in range(DATASETS):
        effect, spread = rng.uniform(-0.1, 0.15), rng.uniform(0.03, 0.08)
        base = rng.uniform(0.35, 0.5, 12)
        gain = rng.normal(effect, spread, 12)  # base + gain stays inside [0, 1] (asserted below)
        assert ((base + gain > 0) & (base + gain < 1)).all()
        before, after = rng.binomial(60, base) / 60, rng.binomial(60, base + gain) / 60
        intervals.append(bootstrap_ci(list(after - before)))
        truths.append(effect)
    assert COVERAGE[0] <= coverage(intervals, truths) <= COVERAGE[1]


def test_paired_delta_interval_of_two_prompts_covers_95_percent() -> None:
    """Final minus starting prompt on the same 60 test examples: correlated 0/1 outcomes (most examples are
    right or wrong under both prompts), true difference known."""
    rng = np.random.default_rng(13)
    intervals, truths = [], []
    for _ in range(DATASETS):
        p_before, agree, p_switch = rng.uniform(0.2, 0.7), rng.uniform(0.5, 0.9), rng.uniform(0.2, 0.8)
        before = rng.random(60) < p_before
        after = np.where(rng.random(60) < agree, before, rng.random(60) < p_switch)
        _, _, lo, hi = paired_delta_ci(list(before.astype(float)), list(after.astype(float)))
        intervals.append((lo, hi))
        truths.append((1 - agree) * (p_switch - p_before))
    assert COVERAGE[0] <= coverage(intervals, truths) <= COVERAGE[1]


def test_compare_with_holm_keeps_the_family_wise_error_rate() -> None:
    """Four configurations that do not differ (shared task effects, independent run noise), every pair
    compared over 10 tasks: Holm's correction rejects some true null in at most 6% of 400 families (a test
    without the correction rejects in about a fifth of them)."""
    rng = np.random.default_rng(14)
    families = 400
    rejected = 0
    tasks = [f"t{i}" for i in range(10)]
    for _ in range(families):
        task_effect = rng.normal(0, 0.1, len(tasks))
        rows = [
            {"loop": "p3ro", "variant": v, "task_id": t, "sample": 0, "delta": task_effect[i] + rng.normal(0, 0.1)}
            for v in "abcd"
            for i, t in enumerate(tasks)
        ]
        table = analysis.compare(pd.DataFrame(rows), by="variant")
        assert len(table) == 6 and (table["n"] == 10).all()
        rejected += bool((table["p_holm"] < 0.05).any())
    assert rejected / families <= 0.06


def test_calibration_recovers_the_spearman_a_noisy_critic_implies() -> None:
    """sim/noisy?sd=S scores a candidate 1 + 9 a + Normal(0, S), clipped to 1-10. Over candidates whose dev
    accuracy a is k/20 (k ~ Binomial(20, p), p ~ Uniform(0, 1)), the Spearman correlation between score and
    accuracy that S implies is found here by simulating a million candidates; calibration, on 150
    candidates scored through the critic itself, must cover it with its 95% CI, and its estimate must lie
    close to it."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(15)
    for sd in (1.0, 3.0):
        big_a = rng.binomial(20, rng.uniform(0, 1, 1_000_000)) / 20
        implied = spearmanr(np.clip(1 + 9 * big_a + rng.normal(0, sd, big_a.size), 1, 10), big_a).statistic
        critic = parse_sim(f"sim/noisy?sd={sd:g}&seed=4")
        acc = rng.binomial(20, rng.uniform(0, 1, 150)) / 20
        rows = [
            {
                "cell_id": "c",
                "run_id": f"r{i}",
                "loop": "creator_critic",
                "iteration": 0,
                "criterion": "overall",
                "critic_model": critic.name,
                "grounded_score": a,
                "score": critic.score(float(a), f"candidate {i}", sample=0, criterion="overall"),
            }
            for i, a in enumerate(acc)
        ]
        (row,) = analysis.calibration(pd.DataFrame(rows)).itertuples()
        assert row.n == 150 and row.spearman_ci_low <= implied <= row.spearman_ci_high, (sd, implied, row)
        assert abs(row.spearman - implied) < 0.1
    # and a critic that knows nothing: its CI covers 0
    blind = parse_sim("sim/random?seed=2")
    rows = [
        {
            "cell_id": "c",
            "run_id": f"r{i}",
            "loop": "creator_critic",
            "iteration": 0,
            "criterion": "overall",
            "critic_model": blind.name,
            "grounded_score": a,
            "score": blind.score(float(a), f"c{i}", sample=0, criterion="overall"),
        }
        for i, a in enumerate(acc)
    ]
    (row,) = analysis.calibration(pd.DataFrame(rows)).itertuples()
    assert row.spearman_ci_low <= 0 <= row.spearman_ci_high


# counterfactual stopping against real re-runs ---------------------------------------------------------
EXAMPLES = [Example(input=f"item {i}", target="yes") for i in range(10)]
TASK = Task(
    id="cf",
    prompt="V0 start",
    goal="answer yes",
    examples=EXAMPLES,
    scorer={"kind": "exact"},
    split=Split(seed=0, dev=6),
)


def _variant(text: str) -> int:
    return sum(map(ord, text)) % 7


def _target(messages: list[dict[str, Any]]) -> str:
    """A prompt 'V<k> ...' answers items below k+2 right: its dev accuracy depends on the prompt only."""
    text = messages[-1]["content"]
    return "yes" if int(text.rsplit("item ", 1)[1]) < int(text[1]) + 2 else "no"


def _creator(messages: list[dict[str, Any]]) -> str:
    """A rewrite that is a pure function of the creator's prompt (so a re-run repeats the same rewrites)."""
    return f"V{_variant(messages[-1]['content'])} rewrite {len(messages[-1]['content'])}"


def _critic(messages: list[dict[str, Any]]) -> str:
    return json.dumps({"score": 1 + _variant(messages[-1]["content"]) * 1.5, "suggestions": ["more"]})


def _p3ro(messages: list[dict[str, Any]]) -> str:
    first = messages[0]["content"]
    if first.startswith("You turn a vague goal"):
        return json.dumps({"criteria": ["Clear", "Short", "Formatted"]})
    if first.startswith("You plan how"):
        return json.dumps({"plan": "1. be clear"})
    if first.startswith("You rewrite prompts"):
        return json.dumps({"prompt_text": _creator(messages), "reasoning": "r"})
    if first.startswith("You are a strict reviewer"):
        s = 1 + _variant(first) * 1.5
        return json.dumps(
            {
                "scores": [{"criterion": c, "score": s, "justification": "j"} for c in ("Clear", "Short", "Formatted")],
                "qualitative_feedback": "f",
            }
        )
    if first.startswith("You turn an evaluation"):
        return json.dumps({"summary": "lesson"})
    return _target(messages)


def _run(loop: str, cfg: dict[str, Any]) -> Any:
    if loop == "p3ro":
        return run_p3ro(TASK, P3ROConfig(model=promptlab.scripted("cf-p3", respond=_p3ro).name, **cfg), cache=False)
    models = {
        "model": promptlab.scripted("cf-creator", respond=_creator).name,
        "critic_model": promptlab.scripted("cf-critic", respond=_critic).name,
        "target_model": promptlab.scripted("cf-target", respond=_target).name,
    }
    return run_creator_critic(TASK, CreatorCriticConfig(**models, **cfg), cache=False)


@pytest.mark.parametrize(
    "loop, settings",
    [
        ("creator_critic", {"final": "best", "score_source": "critic"}),
        ("creator_critic", {"final": "last", "score_source": "grounded", "patience": 2}),
        ("creator_critic", {"final": "best", "score_source": "grounded", "include_start": False}),
        ("p3ro", {"score_source": "critic"}),
    ],
)
def test_counterfactual_stopping_equals_re_running_the_loop(loop: str, settings: dict[str, Any]) -> None:
    cap = 4
    logged = _run(loop, {**settings, "finish_threshold": 10.0, "max_iterations": cap})
    traj, runs = tidy([logged], {}, "cell")
    assert logged.stop_reason == "max_iterations"
    thresholds = sorted({float(d) for d in traj["decision_score"].dropna()} | {2.0, 10.0})
    table = analysis.counterfactual_stopping(
        traj, thresholds, list(range(1, cap + 1)), runs=runs, configs={logged.run_id: logged.config}, per_run=True
    )
    assert table["exact"].all() and len(table) == len(thresholds) * cap
    assert len({r for r in table["returned_iteration"]}) > 1  # the rules do return different prompts
    for row in table.itertuples():
        again = _run(loop, {**settings, "finish_threshold": row.threshold, "max_iterations": row.cap})
        its = iteration_frame(tidy([again], {}, "cell")[0])
        chosen = next(it for it in again.iterations if it.index == again.info["final_iteration"])
        assert (row.returned_iteration, row.grounded) == (chosen.index, chosen.grounded.score), row
        assert row.stop == sum(it.index > 0 for it in again.iterations), row
        assert row.stopped_early == (again.stop_reason == "threshold" and row.stop < row.cap), row
        assert row.tokens == int((its["input_tokens"] + its["output_tokens"]).sum()), row
