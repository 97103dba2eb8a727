"""A real open-ended results directory for the judging tests: Creator/Critic on the shipped open-ended tasks
(data/prompt_tasks.jsonl), `fake/auto` writing and answering, two scripted critics (`fake/people-critic-a`,
`-b`) as two pairings, the starting prompt scored as candidate 0 and both prompts' own replies recorded
(`record_outputs`), run for real by `promptlab.sweeps.sweep` (inline, in this process)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import promptlab
from promptlab.sweeps.experiment import Experiment
from promptlab.sweeps.run import sweep

ROOT = Path(__file__).resolve().parents[2]
CRITICS = ("fake/people-critic-a", "fake/people-critic-b")


def critic_reply(messages: list[dict[str, Any]]) -> str:
    """A critique whose score (1-10) is drawn from a hash of the prompt judged."""
    text = messages[-1]["content"]
    score = 1 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % 10
    return json.dumps({"score": score, "strengths": ["clear"], "weaknesses": ["vague"], "suggestions": ["be specific"]})


def register_critics() -> None:
    """Register the two scripted critics in this process."""
    for name in CRITICS:
        promptlab.scripted(name.removeprefix("fake/"), respond=critic_reply)


def write_open_ended_sweep(results: Path, *, replicates: int = 2) -> Path:
    """The sweep's results directory: 6 tasks x 2 pairings x `replicates` runs (24 by default)."""
    register_critics()
    exp = Experiment.from_dict(
        {
            "name": "people",
            "loops": ["creator_critic"],
            "tasks": str(ROOT / "data" / "prompt_tasks.jsonl"),
            "config": {"model": "fake/auto", "max_tokens": 64, "record_outputs": True, "include_start": True},
            "grid": {"max_iterations": [2]},
            "pairings": [{"generator": "fake/auto", "critic": c} for c in CRITICS],
            "replicates": replicates,
        }
    )
    sweep(exp, results, cache=results.with_name(results.name + ".cache"), progress=False, workers=1)
    return results
