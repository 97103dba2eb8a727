"""ProTeGi, after "Automatic Prompt Optimization with 'Gradient Descent' and Beam Search" (Pryzant, Iter, Li, Lee,
Zhu and Zeng, 2023; arXiv:2305.03495).

More in docs/baselines.md, section "promptlab.loops.protegi.loop".
"""

from __future__ import annotations

import json
from typing import Any

from ...eval.tasks import input_text
from ...record import Iteration, Run, Task
from ..runtime.decision import Decision
from ..runtime.search import PARAPHRASE_PROMPT, Rewrite, Search, define_search_loop
from ..runtime.search_router import Action, route
from ..runtime.toolkit import cut
from .bandit import SELECTIONS, Arms
from .config import Prompts, ProTeGiConfig, Reasons

Successor = tuple[str, str, int]
"""(prompt text, origin, parent iteration index)."""


def error_text(search: Search, it: Iteration, positions: list[int]) -> str:
    """The wrong answers of `it` on the dev examples at `positions`: input, expected output, the model's answer."""
    replies = {st.output.get("example"): st.output.get("text") for st in it.steps if st.phase == "score_dev"}
    blocks = []
    for k, i in enumerate(positions, start=1):
        ex = search.dev[i]
        target = ex.target if isinstance(ex.target, str) else json.dumps(ex.target, ensure_ascii=False)
        blocks.append(
            f"Example {k}\nInput: {input_text(ex.input)}\nExpected output: {target}\n"
            f"The model's answer: {cut(replies.get(i) or '', 300)}"
        )
    return "\n\n".join(blocks)


class _Round:
    """One round's expansion: the successors written for the beam prompts."""

    def __init__(self, search: Search, cfg: ProTeGiConfig, arms: Arms, number: int) -> None:
        self.search, self.cfg, self.arms, self.number = search, cfg, arms, number
        n_dev = len(search.dev)
        self.minibatch = sorted(search.rng("minibatch", number).sample(range(n_dev), min(cfg.minibatch_size, n_dev)))

    async def write(self, role: str, phase: str, prompt: str, schema: Any, parent: Iteration) -> Any:
        """One call of the expansion as a step of the budget (placed on the parent's iteration); raises
        _Stopped when the budget refuses it."""
        decision = self.search.next_step(1, self.search.write_cost(phase, prompt))
        if decision.stops:
            raise _Stopped(decision)
        out, _ = await self.search.write(role, phase, prompt, schema, parent)
        return out

    async def expand(self, parent: Iteration) -> list[Successor]:
        """The successors of one beam prompt (at most `max_expansion_factor`)."""
        search, cfg, ctx = self.search, self.cfg, self.search.ctx
        assert parent.candidate is not None
        if not await self.arms.pull(parent, self.minibatch):
            raise _Stopped(route(1, self.arms.stopped))
        ledger = self.arms.ledger(parent)
        errors = [i for i in self.minibatch if (s := ledger.get(i)) is not None and s < 1.0]
        edited: list[tuple[str, str]] = []
        for g in range(cfg.n_gradients if errors else 0):
            shown = search.rng("errors", self.number, parent.index, g).sample(
                errors, min(cfg.errors_per_gradient, len(errors))
            )
            wrong = error_text(search, parent, shown)
            asked = ctx.prompt(
                "gradient", GRADIENT_PROMPT, prompt=parent.candidate, errors=wrong, n=cfg.gradients_per_error
            )
            reasons = await self.write("gradient", "gradient", asked, Reasons, parent)
            for reason in reasons.reasons[: cfg.gradients_per_error] if reasons is not None else []:
                asked = ctx.prompt(
                    "editor",
                    EDITOR_PROMPT,
                    prompt=parent.candidate,
                    errors=wrong,
                    reason=reason,
                    n=cfg.steps_per_gradient,
                )
                edits = await self.write("editor", "edit", asked, Prompts, parent)
                edited += [
                    (p, f"edit of reason {g + 1}")
                    for p in (edits.prompts[: cfg.steps_per_gradient] if edits is not None else [])
                ]
        written = list(edited)
        for text in [t for t, _ in edited] + [parent.candidate]:
            asked = ctx.prompt("paraphraser", PARAPHRASE_PROMPT, prompt=text)
            for _ in range(cfg.mc_samples_per_step):
                out = await self.write("paraphraser", "paraphrase", asked, Rewrite, parent)
                if out is not None:
                    written.append((out.prompt, "paraphrase"))
        distinct = list(dict.fromkeys(t.strip() for t, _ in written if t.strip() and t.strip() != parent.candidate))
        origin = {t.strip(): o for t, o in reversed(written)}
        kept = distinct
        if len(distinct) > cfg.max_expansion_factor:
            picks = search.rng("expand", self.number, parent.index).sample(
                range(len(distinct)), cfg.max_expansion_factor
            )
            kept = [distinct[i] for i in sorted(picks)]
        parent.metrics.update(
            {
                f"round_{self.number}_errors": len(errors),
                f"round_{self.number}_successors": len(distinct),
                f"round_{self.number}_kept": len(kept),
            }
        )
        return [(t, origin[t], parent.index) for t in kept]


class _Stopped(Exception):
    """The budget refused the next step of the round (`decision`: the router's, which stops)."""

    def __init__(self, decision: Decision[Action]) -> None:
        super().__init__(decision.reason)
        self.decision = decision


@define_search_loop(
    "protegi",
    ProTeGiConfig,
    "ProTeGi: textual gradients from dev errors, edits and paraphrases, a beam chosen by a bandit",
)
async def arun_protegi(search: Search, task: Task, cfg: ProTeGiConfig) -> Run:
    """Run ProTeGi on a grounded task (examples, scorer, split) and return its record.

    Returns:
        The Run: iteration 0 is the starting prompt, each later iteration a successor with its bandit estimate
        on dev; `final_output` is the head of the last beam; `info['beams']` the beams by round;
        `Run.baseline_test`, `Run.final_test`, `Run.delta` and each incumbent's `Iteration.test`.
    """
    ctx = search.ctx
    arms = Arms(search, search.rng("dev order").sample(range(len(search.dev)), len(search.dev)))
    decision = await search.start()
    start = search.incumbent
    beam = [start] if start is not None else []
    if start is not None and start.grounded is not None:
        arms.ledgers[start.index] = dict(enumerate(start.grounded.scores))
    beams: list[list[int]] = [[it.index for it in beam]]
    rounds = 0
    while not decision.stops:
        if (decision := route(cfg.max_iterations - rounds, None)).stops:  # no round left
            break
        rounds += 1
        expansion = _Round(search, cfg, arms, rounds)
        successors: list[Successor] = []
        try:
            for parent in beam:
                successors += await expansion.expand(parent)
        except _Stopped as stopped:
            decision = stopped.decision
            break
        pool, new = list(beam), []
        for text, origin, parent_index in successors:
            it = search.by_text.get(text)
            if it is None:
                it = ctx.new_iteration()
                it.candidate = text
                it.metrics.update(round=rounds, parent=parent_index, origin=origin)
                search.by_text[text] = it
                new.append(it)
            if it not in pool:
                pool.append(it)
        ranked = await SELECTIONS[cfg.selection](arms, pool, cfg)
        if ranked is None:
            decision = route(1, arms.stopped)
            for it in new:
                search.decide(it, "UNFINISHED", "the budget ended the round before its selection did")
            break
        beam = ranked[: cfg.beam_size]
        search.incumbent = beam[0]
        beams.append([it.index for it in beam])
        for it in new:
            where = "in the next beam" if it in beam else "not in the next beam"
            search.decide(
                it,
                "IN_BEAM" if it in beam else "OUT_OF_BEAM",
                f"{where} after round {rounds}'s {cfg.selection} selection{search.dev_note(it)}",
            )
    ctx.run.info.update(beams=beams, rounds=rounds)
    return await search.finish(
        decision,
        f"ProTeGi on task {task.id!r}: {rounds} round(s), beam {cfg.beam_size}, {cfg.selection} selection on dev.",
    )


run_protegi = arun_protegi.sync


# Role prompts (override with config.prompts[role]; fields: prompt, errors, n, and reason for the editor) -----
GRADIENT_PROMPT = """An AI model follows the prompt below to do a task.

The prompt:
"{prompt}"

With this prompt the model answered these examples wrongly:

{errors}

Give {n} reason(s) why the prompt may have led to these wrong answers: what in its wording is missing, unclear \
or misleading. Reply with JSON only: an object whose "reasons" field is a list of {n} reason(s), each one \
sentence."""

EDITOR_PROMPT = """An AI model follows the prompt below to do a task.

The prompt:
"{prompt}"

With this prompt the model answered these examples wrongly:

{errors}

A likely reason: {reason}

Write {n} improved version(s) of the prompt that remove this reason, each a complete prompt for the same task. \
Reply with JSON only: an object whose "prompts" field is a list of the {n} improved prompt(s)."""

__all__ = ["EDITOR_PROMPT", "GRADIENT_PROMPT", "arun_protegi", "error_text", "run_protegi"]
