"""OPRO, after "Large Language Models as Optimizers" (Yang, Wang, Lu, Liu, Le, Zhou and Chen, 2023;
arXiv:2309.03409).

More in docs/baselines.md, section "promptlab.loops.opro.loop".
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from ...eval.tasks import input_text
from ...record import Run, Task
from ..runtime.search import Instruction, Search, SearchConfig, define_search_loop, dev_score
from ..runtime.search_router import route


class OPROConfig(SearchConfig):
    """OPRO settings: `generator_model` plays the optimizer, `target_model` (the scorer in the paper) runs the
    candidates on the dev split."""

    ROLES = ("optimizer",)

    temperature: float = Field(1.0, ge=0.0, le=2.0)
    """The optimizer's sampling temperature (the paper's 1.0); candidates run at 0."""
    max_iterations: int = Field(200, ge=1, le=1000)
    """Optimisation steps at most (the paper's 200); each asks for `candidates_per_step` instructions."""
    candidates_per_step: int = Field(8, ge=1, le=100)
    """Instructions asked for per step (the paper's 8), each from the same meta-prompt."""
    shown_instructions: int = Field(20, ge=1, le=200)
    """The best instructions so far that the meta-prompt shows (the paper's 20)."""
    score_threshold: float = Field(0.0, ge=0.0, le=1.0)
    """An instruction is shown only when its dev score is at least this (0.0, as the paper's code for its PaLM
    scorer; 0.3 for its GPT scorers)."""
    exemplars: int = Field(3, ge=0, le=50)
    """Dev examples shown per step, drawn at random (the paper's 3)."""
    score_buckets: int | None = Field(100, ge=1, le=1000)
    """Scores are shown as whole numbers, `round(score x score_buckets)` (the paper's 100); None: as they are."""


def _shown(score: float, buckets: int | None) -> str:
    return str(round(score * buckets)) if buckets is not None else f"{score:.3f}"


def meta_prompt(search: Search, cfg: OPROConfig, step: int) -> str:
    """The optimizer's prompt for `step`: the best scored instructions (ascending), then the exemplars."""
    scored = [
        (score, it.index, text)
        for text, it in search.by_text.items()
        if (score := dev_score(it)) is not None and score >= cfg.score_threshold
    ]
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[: cfg.shown_instructions]
    history = "\n\n".join(
        f"text:\n{text}\nscore:\n{_shown(score, cfg.score_buckets)}"
        for score, _, text in sorted(best, key=lambda s: (s[0], -s[1]))
    )
    dev = search.dev
    picks = search.rng("exemplars", step).sample(range(len(dev)), min(cfg.exemplars, len(dev)))
    exemplars = "\n\n".join(
        f"input:\n<INS>\n\n{input_text(dev[i].input)}\noutput:\n{_target(dev[i].target)}" for i in picks
    )
    scale = cfg.score_buckets if cfg.score_buckets is not None else 1
    return search.ctx.prompt(
        "optimizer",
        OPTIMIZER_PROMPT,
        history=history or "(none yet)",
        exemplars=exemplars or "(no examples shown)",
        scale=scale,
    )


def _target(target: Any) -> str:
    return target if isinstance(target, str) else json.dumps(target, ensure_ascii=False)


@define_search_loop(
    "opro", OPROConfig, "OPRO: an optimizer model sees the best instructions with their dev scores and proposes more"
)
async def arun_opro(search: Search, task: Task, cfg: OPROConfig) -> Run:
    """Run OPRO on a grounded task (examples, scorer, split) and return its record.

    Returns:
        The Run: iteration 0 is the starting prompt, each later iteration one optimizer proposal with its dev
        score (`metrics['step']`); `final_output` is the best on dev; `Run.baseline_test`, `Run.final_test`,
        `Run.delta` and each incumbent's `Iteration.test`.
    """
    ctx = search.ctx
    decision = await search.start()
    steps = 0
    while not decision.stops:
        if (decision := route(cfg.max_iterations - steps, None)).stops:  # no step left
            break
        steps += 1
        prompt = meta_prompt(search, cfg, steps)
        for k in range(cfg.candidates_per_step):
            incumbent = search.incumbent.candidate if search.incumbent else task.prompt
            cost = search.write_cost("optimize", prompt), search.dev_cost(incumbent or task.prompt)
            decision = search.next_step(cfg.candidates_per_step - k, *cost)
            if decision.stops:
                break
            it = ctx.new_iteration()
            it.metrics.update(step=steps, draw=k + 1)
            out, call = await search.write("optimizer", "optimize", prompt, Instruction, it)
            await search.take(it, out.instruction if out is not None else None, call, f"optimizer, step {steps}")
    ctx.run.info["steps"] = steps
    return await search.finish(
        decision, f"OPRO on task {task.id!r}: {steps} step(s) of up to {cfg.candidates_per_step} instruction(s) each."
    )


run_opro = arun_opro.sync


# Role prompt (override with config.prompts["optimizer"]; fields: history, exemplars, scale) ------------------
OPTIMIZER_PROMPT = """Your job is to find the instruction that makes an AI model do a task best. Below are \
instructions tried so far, each with its score: how many of the task's examples it got right, out of {scale}. \
They are sorted from the lowest score to the highest.

{history}

This is how an instruction is used: <INS> stands for it, the model reads the input with the instruction in \
that place, and its answer counts as right when it gives the output shown.

{exemplars}

Write one new instruction that is different from every instruction above and scores higher than all of them. \
Reply with JSON only: an object whose "instruction" field is the new instruction."""

__all__ = ["OPROConfig", "OPTIMIZER_PROMPT", "arun_opro", "meta_prompt", "run_opro"]
