"""APE, after "Large Language Models Are Human-Level Prompt Engineers" (Zhou, Muresanu, Han, Paster, Pitis,
Chan and Ba, 2022; arXiv:2211.01910).

More in docs/baselines.md, section "promptlab.loops.ape.loop".
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from ...eval.tasks import input_text
from ...record import Iteration, Run, Task
from ..runtime.search import (
    PARAPHRASE_PROMPT,
    Instruction,
    Rewrite,
    Search,
    SearchConfig,
    define_search_loop,
    dev_score,
)
from ..runtime.search_router import route


class APEConfig(SearchConfig):
    """APE settings: `generator_model` plays the proposer and the resampler, `target_model` runs the candidates."""

    ROLES = ("proposer", "resampler")

    temperature: float = Field(0.9, ge=0.0, le=2.0)
    """Sampling temperature of proposals and rewordings (the paper's 0.9); candidates run at 0."""
    max_iterations: int = Field(0, ge=0, le=100)
    """Rounds of iterative Monte Carlo search after the proposals (0: none, the paper's default APE)."""
    demo_sets: int = Field(5, ge=1, le=100)
    """Demonstration sets the proposer is shown (the paper's `num_subsamples`, 5)."""
    demos: int = Field(5, ge=1, le=50)
    """Input/output demonstrations per set, drawn from the dev split (the paper's `num_demos`, 5)."""
    proposals_per_set: int = Field(50, ge=1, le=999)
    """Proposals asked for per demonstration set (the paper's `num_prompts_per_subsample`, 50)."""
    keep: int = Field(5, ge=1, le=100)
    """Iterative search: the best candidates so far that each round rewords (promptlab's choice)."""
    variations: int = Field(2, ge=1, le=100)
    """Iterative search: rewordings asked for per kept candidate and round (promptlab's choice)."""


def demo_text(search: Search, cfg: APEConfig, k: int) -> str:
    """Demonstration set `k`: `demos` dev examples drawn at random, as input/output pairs."""
    dev = search.dev
    picks = search.rng("demos", k).sample(range(len(dev)), min(cfg.demos, len(dev)))
    return "\n\n".join(f"Input: {input_text(dev[i].input)}\nOutput: {_target(dev[i].target)}" for i in picks)


def _target(target: Any) -> str:
    return target if isinstance(target, str) else json.dumps(target, ensure_ascii=False)


def best(search: Search, n: int) -> list[Iteration]:
    """The `n` best distinct candidates so far by dev score (ties to the earliest)."""
    scored = [it for it in search.by_text.values() if dev_score(it) is not None]
    return sorted(scored, key=lambda it: (-(dev_score(it) or 0.0), it.index))[:n]


@define_search_loop(
    "ape", APEConfig, "APE: instructions proposed from input/output demonstrations, the best on dev kept"
)
async def arun_ape(search: Search, task: Task, cfg: APEConfig) -> Run:
    """Run APE on a grounded task (examples, scorer, split) and return its record.

    Returns:
        The Run: iteration 0 is the starting prompt, each later iteration a proposal (`metrics['set']`) or a
        rewording (`metrics['round']`) with its dev score; `final_output` is the best on dev;
        `Run.baseline_test`, `Run.final_test`, `Run.delta` and each incumbent's `Iteration.test`.
    """
    ctx = search.ctx
    decision = await search.start()
    requests = [ctx.prompt("proposer", PROPOSER_PROMPT, demos=demo_text(search, cfg, k)) for k in range(cfg.demo_sets)]
    schedule: list[tuple[str, str, str, dict[str, int]]] = [
        ("proposer", "propose", requests[j % cfg.demo_sets], {"set": j % cfg.demo_sets + 1})
        for j in range(cfg.demo_sets * cfg.proposals_per_set)
    ]
    rounds = 0
    while not decision.stops:
        for k, (role, phase, request, where) in enumerate(schedule):
            size = search.incumbent.candidate if search.incumbent else None
            cost = search.write_cost(phase, request), search.dev_cost(size or task.prompt)
            decision = search.next_step(len(schedule) - k, *cost)
            if decision.stops:
                break
            it = ctx.new_iteration()
            it.metrics.update(where)
            out, call = await search.write(role, phase, request, Instruction if role == "proposer" else Rewrite, it)
            text = (out.instruction if role == "proposer" else out.prompt) if out is not None else None
            await search.take(it, text, call, "forward generation" if role == "proposer" else "rewording")
        if not decision.stops:
            decision = route(cfg.max_iterations - rounds, None)  # rounds left
        if decision.stops:
            break
        rounds += 1
        schedule = [
            (
                "resampler",
                "resample",
                ctx.prompt("resampler", RESAMPLER_PROMPT, prompt=parent.candidate),
                {"round": rounds, "parent": parent.index},
            )
            for parent in best(search, cfg.keep)
            for _ in range(cfg.variations)
        ]
    ctx.run.info["rounds"] = rounds
    return await search.finish(
        decision,
        f"APE on task {task.id!r}: {cfg.demo_sets} demonstration set(s), {rounds} round(s) of iterative search.",
    )


run_ape = arun_ape.sync


# Role prompts (override with config.prompts[role]; fields: demos for the proposer, prompt for the resampler) ---
PROPOSER_PROMPT = """Someone was given an instruction and applied it to several inputs. Here is what they \
produced for each input:

{demos}

What was the instruction? Write it as an instruction that could be given to someone else for new inputs of \
the same kind. Reply with JSON only: an object whose "instruction" field is the instruction."""

RESAMPLER_PROMPT = PARAPHRASE_PROMPT
"""APE's iterative round rewords a kept candidate with the paraphrase prompt the search loops share."""

__all__ = ["APEConfig", "PROPOSER_PROMPT", "RESAMPLER_PROMPT", "arun_ape", "run_ape"]
