"""Resample: the no-feedback control of the prompt-search baselines.

It asks for paraphrases of the starting prompt, one at a time and never showing a score, measures each on the
dev split, and returns the best on dev (the starting prompt, candidate 0, included; ties to the earliest). Every
paraphrase is drawn from the same request (`PARAPHRASE_PROMPT` on the starting prompt), so nothing the loop
learns changes what it asks: what it gains over the start is what search alone buys, the share of any
optimizer's gain that needs no feedback. It paraphrases as APE's iterative round and ProTeGi's Monte Carlo step
do (the same prompt, `PARAPHRASER_PROMPT`), at APE's generation temperature (0.9).

Parameters (`ResampleConfig`): `max_iterations` paraphrases at most (100), `temperature` (0.9), and the
search loops' shared settings (`promptlab.loops.runtime.search.SearchConfig`: `target_model`,
`eval_max_tokens`, `eval_concurrency`, `test_incumbents`, `budget_calls`, `budget_tokens`). A step of the
budget is one paraphrase and its dev evaluation. Stop reasons: `max_iterations`, `budget`.
"""

from __future__ import annotations

from pydantic import Field

from ...record import Run, Task
from ..runtime.search import PARAPHRASE_PROMPT, Rewrite, Search, SearchConfig, define_search_loop


class ResampleConfig(SearchConfig):
    """Resample settings: `generator_model` plays the paraphraser, `target_model` runs the candidates."""

    ROLES = ("paraphraser",)

    temperature: float = Field(0.9, ge=0.0, le=2.0)
    """Sampling temperature of the paraphrases (APE's generation temperature); candidates run at 0."""
    max_iterations: int = Field(100, ge=1, le=999)
    """Paraphrases of the starting prompt at most (each one iteration)."""


@define_search_loop(
    "resample", ResampleConfig, "No-feedback control: paraphrases of the starting prompt, the best on dev"
)
async def arun_resample(search: Search, task: Task, cfg: ResampleConfig) -> Run:
    """Run the no-feedback control on a grounded task (examples, scorer, split) and return its record.

    Returns:
        The Run: iteration 0 is the starting prompt, each later iteration one paraphrase with its dev score;
        `final_output` is the best on dev; `Run.baseline_test`, `Run.final_test`, `Run.delta` and each
        incumbent's `Iteration.test`.
    """
    ctx = search.ctx
    decision = await search.start()
    request = ctx.prompt("paraphraser", PARAPHRASER_PROMPT, prompt=task.prompt)
    done = 0
    while not decision.stops:
        decision = search.next_step(
            cfg.max_iterations - done, search.write_cost("paraphrase", request), search.dev_cost(task.prompt)
        )
        if decision.stops:
            break
        done += 1
        it = ctx.new_iteration()
        out, step = await search.write("paraphraser", "paraphrase", request, Rewrite, it)
        await search.take(it, out.prompt if out is not None else None, step, "paraphrase of the starting prompt")
    return await search.finish(
        decision,
        f"Resample on task {task.id!r}: {sum(i.index > 0 for i in ctx.run.iterations)} paraphrase(s) "
        "of the starting prompt, no feedback.",
    )


run_resample = arun_resample.sync


# Role prompt (override with config.prompts["paraphraser"]; field: prompt) ------------------------------------
PARAPHRASER_PROMPT = PARAPHRASE_PROMPT
"""The paraphraser's prompt: the paraphrase prompt the search loops share (APE's rounds, ProTeGi's Monte Carlo
step), applied to the starting prompt."""

__all__ = ["PARAPHRASER_PROMPT", "ResampleConfig", "arun_resample", "run_resample"]
