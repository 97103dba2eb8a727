"""A grounded task whose right answer is always 'yes', a scripted target that answers by the prompt's first word,
and a scripted Creator/Critic run over it: the fixtures of the candidate-0 and creator-feedback tests."""

from __future__ import annotations

import json
from typing import Any

import promptlab
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.record import Example, Split, Task

EXAMPLES = [Example(input=f"item {i}", target="yes") for i in range(12)]


def yes_task(prompt: str = "GOOD start", id: str = "s") -> Task:
    """12 examples whose target is 'yes', 6 of them dev."""
    return Task(
        id=id, prompt=prompt, goal="answer yes", examples=EXAMPLES, scorer={"kind": "exact"}, split=Split(seed=0, dev=6)
    )


def target_reply(messages: list[dict[str, Any]]) -> str:
    """'yes' for a GOOD prompt, for a HALF prompt on even items only, else 'no'."""
    text = messages[-1]["content"]
    item = int(text.rsplit("item ", 1)[1])
    return "yes" if text.startswith("GOOD") or (text.startswith("HALF") and item % 2 == 0) else "no"


def critique(score: float, weakness: str = "w") -> str:
    """A critic's reply with `score` and one weakness."""
    return json.dumps({"score": score, "strengths": [], "weaknesses": [weakness], "suggestions": ["t"]})


def run_cc(
    name: str, rewrites: list[str], scores: list[float], task: Task, *, weakness: str = "w", **kw: Any
) -> tuple[Any, Any]:
    """A Creator/Critic run on `task` whose creator writes `rewrites` in turn (and records its prompts) and whose
    critic gives `scores`; returns the run and the creator."""
    writes, replies = list(rewrites), [critique(c, weakness) for c in scores]
    creator = promptlab.scripted(f"{name}-creator", respond=lambda m: writes.pop(0))
    critic = promptlab.scripted(f"{name}-critic", respond=lambda m: replies.pop(0))
    target = promptlab.scripted(f"{name}-target", respond=target_reply)
    cfg = CreatorCriticConfig(model=creator.name, critic_model=critic.name, target_model=target.name, **kw)
    return run_creator_critic(task, cfg, cache=False), creator
