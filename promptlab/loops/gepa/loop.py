"""GEPA, after "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement Learning" (Agrawal, Tan, Soylu,
Ziems, Khare, Opsahl-Ong, Singhvi, Shandilya, Ryan, Jiang, Potts, Sen, Dimakis, Stoica, Klein, Zaharia and
Khattab, 2025; arXiv:2507.19457), run on GEPA's own engine: `gepa.optimize` from the `gepa` library, with
promptlab's adapter, reflection model, callbacks and stop callback. Nothing of GEPA's algorithm is written here.

More in docs/baselines.md, section "promptlab.loops.gepa.loop".
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import gepa
from gepa.strategies.instruction_proposal import InstructionProposalSignature
from gepa.utils import MaxCandidateProposalsStopper

from ...errors import ConfigError
from ...eval.tasks import input_text
from ...record import Run, Task
from ..runtime.budget import BUDGET
from ..runtime.decision import Decision
from ..runtime.provenance import text_hash
from ..runtime.search import Search, define_search_loop
from ..runtime.search_router import Action
from .adapter import PromptAdapter, ReflectionModel
from .bridge import Bridge, Halted
from .config import COMPONENT, GEPAConfig, metric_calls
from .record import Callbacks, Recorder

REFLECTOR_PROMPT = InstructionProposalSignature.default_prompt_template
"""GEPA's own reflection prompt (`<curr_param>`: the candidate, `<side_info>`: the minibatch's examples with
their replies and the scorer's verdicts); `prompts={"reflector": ...}` overrides it."""


class GEPALog:
    """GEPA's logger: its lines go to the `promptlab.gepa` logger at DEBUG, not to the notebook's output."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("promptlab.gepa")

    def log(self, message: str) -> None:
        self.logger.debug("%s", message)


def check_reflector_prompt(cfg: GEPAConfig) -> None:
    """A reflector prompt without GEPA's placeholders is a ConfigError naming the field, before any call."""
    template = cfg.prompts.get("reflector")
    if template is not None:
        missing = [p for p in ("<curr_param>", "<side_info>") if p not in template]
        if missing:
            raise ConfigError(f"prompts.reflector: GEPA's reflection template needs {' and '.join(missing)}")


def optimizer(search: Search, cfg: GEPAConfig, bridge: Bridge, recorder: Recorder) -> Any:
    """The call of `gepa.optimize` for this run (to run in a worker thread)."""
    ctx, task = search.ctx, search.task
    dev = list(range(len(search.dev)))
    judged = (task.scorer or {}).get("kind") == "judge"
    template = cfg.prompts.get("reflector")
    ctx.run.provenance.setdefault("prompt_hashes", {})["reflector"] = text_hash(template or REFLECTOR_PROMPT)
    limit = metric_calls(cfg, 2 if judged else 1)
    seed = cfg.seed if cfg.seed is not None else ctx.run.sample
    ctx.run.info.update(gepa_version=gepa_version(), max_metric_calls=limit, seed=seed)

    def optimize() -> Any:
        return gepa.optimize(
            seed_candidate={COMPONENT: task.prompt},
            trainset=dev,
            valset=dev,
            adapter=PromptAdapter(bridge, recorder),
            reflection_lm=ReflectionModel(bridge, recorder),
            candidate_selection_strategy=cfg.candidate_selection_strategy,
            frontier_type=cfg.frontier_type,
            skip_perfect_score=cfg.skip_perfect_score,
            reflection_minibatch_size=cfg.reflection_minibatch_size,
            reflection_prompt_template=template,
            use_merge=cfg.use_merge,
            max_merge_invocations=cfg.max_merge_invocations,
            max_metric_calls=limit,
            max_reflection_cost=cfg.max_reflection_cost,
            stop_callbacks=[
                bridge.stopper(recorder.next_iteration_stop),
                MaxCandidateProposalsStopper(cfg.max_iterations),
            ],
            callbacks=[Callbacks(bridge, recorder)],
            logger=GEPALog(),
            seed=seed,
            raise_on_exception=True,
            display_progress_bar=False,
        )

    return optimize


def gepa_version() -> str:
    """The installed gepa library's version."""
    from importlib.metadata import version

    return version("gepa")


@define_search_loop(
    "gepa",
    GEPAConfig,
    "GEPA (Agrawal et al. 2025): reflective prompt evolution with a Pareto front, on GEPA's engine",
    check=check_reflector_prompt,
)
async def arun_gepa(search: Search, task: Task, cfg: GEPAConfig) -> Run:
    """Run GEPA (the `gepa` library's engine) on a grounded task (examples, scorer, split) and return its record.

    Returns:
        The Run: iteration 0 is the starting prompt, each later iteration one GEPA iteration (its parent(s),
        minibatch scores, candidate and GEPA's verdict: NEW_BEST, ACCEPTED, REJECTED, NO_CANDIDATE,
        UNFINISHED; see `promptlab.loops.gepa.record`); `final_output` is GEPA's best on dev;
        `Run.baseline_test`, `Run.final_test`, `Run.delta` and each incumbent's `Iteration.test`.
    """
    bridge = Bridge.here()
    example = input_text(search.dev[0].input) if search.dev else ""
    recorder = Recorder(search, bridge, REFLECTOR_PROMPT + (task.prompt + example) * cfg.reflection_minibatch_size)
    result = None
    try:
        result = await bridge.run(optimizer(search, cfg, bridge, recorder))
    except Halted:
        pass
    except asyncio.CancelledError:  # the optimizer's thread has ended (`Bridge.run`); what it decided is kept
        recorder.close("cancelled")
        raise
    recorder.close(bridge.reason)
    ctx = search.ctx
    iterations = sum(it.index > 0 for it in ctx.run.iterations)
    decision: Decision[Action]
    if bridge.reason is not None:
        decision = Decision("STOP", bridge.reason, BUDGET)
    elif iterations >= cfg.max_iterations:
        decision = Decision("STOP", f"{cfg.max_iterations} GEPA iterations done", "max_iterations")
    else:
        decision = Decision("STOP", "GEPA's own budget (max_metric_calls, max_reflection_cost) is spent", BUDGET)
    if result is not None:
        ctx.run.info.update(gepa_best_candidate=result.best_idx, gepa_metric_calls=result.total_metric_calls)
    search.incumbent = recorder.best
    return await search.finish(
        decision,
        f"GEPA on task {task.id!r}: {iterations} iteration(s), "
        f"{sum(it.decision in ('NEW_BEST', 'ACCEPTED') for it in ctx.run.iterations)} candidate(s) accepted.",
    )


run_gepa = arun_gepa.sync

__all__ = ["REFLECTOR_PROMPT", "arun_gepa", "check_reflector_prompt", "run_gepa"]
