"""A results directory of real Creator/Critic runs for the critic-bias probes: a scripted creator and target
(each rewrite answers more items right and is longer), and per cell one critic: the oracle, a simulated critic
with every bias planted, or a scripted model critic (`fake/bias-critic`) that answers critiques and pairwise
judgements and counts them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import promptlab
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.record import Example, Split, Task
from promptlab.results.store import write_cell

PLANTED = "sim/biased?per_100=0.3&inflation=0.3&first=0.6&anchor=0.5&sd=0.3&seed=1"
"""The simulated critic with every bias planted."""
CRITICS = {"oracle": "sim/oracle", "biased": PLANTED, "model": "fake/bias-critic"}
"""Cell id -> critic model."""
EXAMPLES = [Example(input=f"item {i}", target="yes") for i in range(20)]


def task(k: int) -> Task:
    return Task(
        id=f"t{k}",
        prompt=f"Q{k} answer",
        goal="answer yes",
        examples=EXAMPLES,
        scorer={"kind": "exact"},
        split=Split(seed=k, dev=12),
    )


def target_reply(messages: list[dict[str, Any]]) -> str:
    """A prompt answers items below its number of words x 2 right (longer rewrites do better)."""
    text = messages[-1]["content"]
    item = int(text.rsplit("item ", 1)[1])
    words = len(text.rsplit("item ", 1)[0].split())
    return "yes" if item < 2 * words % 17 + 2 else "no"


def critic_reply(messages: list[dict[str, Any]]) -> str:
    """A critique whose score grows with the prompt's length; a pairwise judgement that always says A."""
    text = messages[-1]["content"]
    if "Prompt A:" in text:
        return json.dumps({"better": "A", "reason": "first"})
    return json.dumps({"score": min(10, 3 + len(text) // 400)})


def register_models(samples: int = 3) -> Any:
    """Register the sweep's scripted models by name (what re-asking its runs needs in another process, e.g. a
    notebook's kernel); returns the model critic. Creators answer a fixed rewrite: a re-ask never calls them."""
    for cell_id in CRITICS:
        for k in range(3):
            for s in range(samples):
                promptlab.scripted(f"bias-creator-{cell_id}-{k}-{s}", respond=lambda _m: "unused")
    promptlab.scripted("bias-target", respond=target_reply)
    return promptlab.scripted("bias-critic", respond=critic_reply)


def write_biased_sweep(results_dir: Path, samples: int = 3) -> tuple[Path, Any]:
    """Three cells (one per critic) of 3 tasks x `samples` runs of 3 rewrites; returns (dir, the model critic)."""
    model_critic = promptlab.scripted("bias-critic", respond=critic_reply)
    target = promptlab.scripted("bias-target", respond=target_reply)
    for cell_id, critic in CRITICS.items():
        runs = []
        for k in range(3):
            for s in range(samples):
                step = [0]

                def rewrite(_m: Any, k: int = k, s: int = s, step: list[int] = step) -> str:
                    step[0] += 1
                    return f"Q{k} answer" + " carefully" * (3 * step[0] + s + k)

                creator = promptlab.scripted(f"bias-creator-{cell_id}-{k}-{s}", respond=rewrite)
                cfg = CreatorCriticConfig(
                    model=creator.name,
                    target_model=target.name,
                    critic_model=critic,
                    max_iterations=3,
                    finish_threshold=10.0,
                    final="best",
                )
                runs.append(run_creator_critic(task(k), cfg, sample=s, cache=None))
        write_cell(results_dir, cell_id, {"loop": "creator_critic", "critic_model": critic}, runs)
    return results_dir, model_critic
