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


WRITER = "fake/people-writer"
"""A scripted generator (and, as a pairing's generator, the target model of its runs' outputs): the prompts it
writes make it answer with GOOD in its reply, the starting prompts do not. The planted truth of the reference
judge's tests: only its pairing's returned texts are GOOD."""
MARK = "EXPERT"
GOOD = "GOOD"


def writer_reply(messages: list[dict[str, Any]]) -> str:
    """A prompt starting with MARK when asked to improve one; a GOOD answer to such a prompt; a plain answer to
    anything else."""
    text = messages[-1]["content"]
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    if text.startswith("You improve prompts"):
        return f"{MARK} {digest}: answer with care, in the form the goal asks for."
    if text.startswith(MARK):
        return f"{GOOD} answer {digest}: careful, complete and in the form asked for."
    return f"A plain answer {digest}."


def quality(text: str) -> int:
    """The planted quality of a text of the WRITER sweep: 1 for a GOOD answer, -1 for one that echoes the
    prompt-improving instruction (fake/auto answering its own rewrite), else 0."""
    return 1 if GOOD in text else -1 if "You improve prompts" in text else 0


def better_side(texts: dict[str, str]) -> str:
    """The side ('start', 'returned' or 'tie') of higher planted quality."""
    a, b = quality(texts["start"]), quality(texts["returned"])
    return "returned" if b > a else "start" if a > b else "tie"


def write_open_ended_sweep(
    results: Path, *, replicates: int = 2, writers: tuple[str, str] = ("fake/auto", "fake/auto"), **fields: Any
) -> Path:
    """The sweep's results directory: 6 tasks x 2 pairings x `replicates` runs (24 by default); the pairings'
    generators are `writers` (WRITER is registered), and `fields` are further experiment fields
    (`reference_judge`)."""
    register_critics()
    promptlab.scripted(WRITER.removeprefix("fake/"), respond=writer_reply)
    exp = Experiment.from_dict(
        {
            "name": "people",
            "loops": ["creator_critic"],
            "tasks": str(ROOT / "data" / "prompt_tasks.jsonl"),
            "config": {"model": "fake/auto", "max_tokens": 64, "record_outputs": True, "include_start": True},
            "grid": {"max_iterations": [2]},
            "pairings": [{"generator": g, "critic": c} for g, c in zip(writers, CRITICS, strict=True)],
            "replicates": replicates,
            **fields,
        }
    )
    sweep(exp, results, cache=results.with_name(results.name + ".cache"), progress=False, workers=1)
    return results
