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

from typing import Any

from pydantic import Field

from ...events import EventHandler
from ...llm.call import CacheArg
from ...llm.settings import Settings
from ...record import Run, Task
from ..runtime.base import LoopSpec, as_config, as_task, by_decision_score, register_loop, sync_twin
from ..runtime.budget import BUDGET
from ..runtime.context import RunContext
from ..runtime.search import PARAPHRASE_PROMPT, Rewrite, Search, SearchConfig, check_search_loop


class ResampleConfig(SearchConfig):
    """Resample settings: `generator_model` plays the paraphraser, `target_model` runs the candidates."""

    ROLES = ("paraphraser",)

    temperature: float = Field(0.9, ge=0.0, le=2.0)
    """Sampling temperature of the paraphrases (APE's generation temperature); candidates run at 0."""
    max_iterations: int = Field(100, ge=1, le=999)
    """Paraphrases of the starting prompt at most (each one iteration)."""


async def arun_resample(
    task: Task | str | dict[str, Any],
    config: ResampleConfig | dict[str, Any] | None = None,
    *,
    sample: int = 0,
    on_event: EventHandler | None = None,
    cache: CacheArg = None,
    settings: Settings | None = None,
    provenance: dict[str, Any] | None = None,
) -> Run:
    """Run the no-feedback control on a grounded task and return its record.

    Args:
        task: a grounded Task (examples, scorer, split), or a dict of its fields.
        config: a ResampleConfig, a dict of its fields, or None for the defaults.
        sample: replicate index (independent draws).
        on_event: called with each Event as the run goes.
        cache: the call cache (None: default, False: none, or a directory).
        settings: retries, structured re-asks, timeouts.
        provenance: extra entries for `Run.provenance` (the sweep's `experiment_hash`).

    Returns:
        The Run: iteration 0 is the starting prompt, each later iteration one paraphrase with its dev score;
        `final_output` is the best on dev; `Run.baseline_test`, `Run.final_test`, `Run.delta` and each
        incumbent's `Iteration.test`.

    Raises:
        ConfigError: a bad config, or a task without examples, before any call.
    """
    task, cfg = as_task(task), as_config(ResampleConfig, config)
    extra = check_search_loop(task, cfg, "resample")
    ctx = RunContext(
        "resample",
        task,
        cfg,
        sample=sample,
        on_event=on_event,
        cache=cache,
        settings=settings,
        provenance=provenance,
        models=extra,
        rank_by=by_decision_score,
    )
    ctx.run.models["target"] = cfg.target()
    ctx.emit("run_started", f"resample on task {task.id}", task=task.id, models=ctx.run.models)
    search = Search(ctx, cfg)
    stop = "max_iterations"
    if await search.start() is None:
        stop = BUDGET
    request = ctx.prompt("paraphraser", PARAPHRASER_PROMPT, prompt=task.prompt)
    for _ in range(cfg.max_iterations if stop != BUDGET else 0):
        if search.stop(search.write_cost("paraphrase", request), search.dev_cost(task.prompt)):
            stop = BUDGET
            break
        it = ctx.new_iteration()
        out, step = await search.write("paraphraser", "paraphrase", request, Rewrite, it)
        await search.take(it, out.prompt if out is not None else None, step, "paraphrase of the starting prompt")
    return await search.finish(
        stop,
        f"Resample on task {task.id!r}: {sum(i.index > 0 for i in ctx.run.iterations)} paraphrase(s) "
        "of the starting prompt, no feedback.",
    )


run_resample = sync_twin(arun_resample)

register_loop(
    LoopSpec(
        "resample",
        ResampleConfig,
        arun_resample,
        "No-feedback control: paraphrases of the starting prompt, the best on dev",
    )
)

# Role prompt (override with config.prompts["paraphraser"]; field: prompt) ------------------------------------
PARAPHRASER_PROMPT = PARAPHRASE_PROMPT
"""The paraphraser's prompt: the paraphrase prompt the search loops share (APE's rounds, ProTeGi's Monte Carlo
step), applied to the starting prompt."""

__all__ = ["PARAPHRASER_PROMPT", "ResampleConfig", "arun_resample", "run_resample"]
