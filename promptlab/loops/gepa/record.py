"""The Run record of a GEPA search, kept from GEPA's callbacks (`gepa.core.callbacks`).

More in docs/baselines.md, section "promptlab.loops.gepa.record".
"""

from __future__ import annotations

from typing import Any

from ...eval.evaluate import EvalResult
from ...llm.call.completion import Completion
from ...record import Iteration
from ..runtime.grounding import measure_examples
from ..runtime.role_call import RoleCall
from ..runtime.search import Search
from .bridge import Bridge, Halted
from .config import COMPONENT


class Recorder:
    """One GEPA run's record keeper: the model calls GEPA asks for, and GEPA's events, on the event loop."""

    def __init__(self, search: Search, bridge: Bridge, reflection_estimate: str) -> None:
        self.search, self.ctx, self.bridge = search, search.ctx, bridge
        self.current: Iteration | None = None
        """The iteration GEPA is in: its calls are steps of it."""
        self.by_gepa: dict[int, Iteration] = {}
        self.best: Iteration | None = None
        self.results: dict[tuple[str, tuple[int, ...]], EvalResult] = {}
        self.reflection_estimate = reflection_estimate
        """A text as long as a reflection prompt, for the first reflection's cost estimate."""

    # the calls GEPA asks for -------------------------------------------------------------------------
    def refuse(self, cost: tuple[int, int]) -> None:
        """Halt the run (raising `Halted`) when `cost` does not fit in its budget or a Stop was asked."""
        reason = self.search.stop(cost)
        if reason is not None:
            self.bridge.halt(reason)
            raise Halted(reason)

    async def evaluate(self, prompt: str, positions: list[int]) -> EvalResult:
        """`prompt` on the dev examples at `positions`, as steps of the current iteration."""
        self.refuse(self.search.dev_cost(prompt, len(positions)))
        result = await measure_examples(self.ctx, self.search.cfg, prompt, "dev", self.current, indices=positions)
        self.search.measured += len(positions)
        self.results[(prompt, tuple(positions))] = result
        return result

    async def reflect(self, prompt: str) -> Completion:
        """One reflection call (a fresh draw of `prompt`), a step of the current iteration."""
        estimate = prompt if self.ctx.spent_by_phase.get("reflect") is None else self.reflection_estimate
        self.refuse(self.search.write_cost("reflect", estimate))
        c, step = await self.ctx.ask(
            RoleCall(
                "reflector",
                "reflect",
                prompt,
                iteration=self.current,
                sample=self.search.fresh_sample(prompt),
                token_type="reflector",
            )
        )
        if c is None:
            raise RuntimeError(step.error.message if step.error else "the reflection call failed")
        return c

    async def next_iteration_stop(self) -> str | None:
        """Why GEPA's next iteration must not start: its least cost (the parent and the child on a minibatch,
        one reflection) would pass the budget, or a Stop was asked; None when it may."""
        b = self.search.cfg.reflection_minibatch_size  # type: ignore[attr-defined]
        start = self.search.task.prompt
        return self.search.stop(self.search.dev_cost(start, 2 * b), self.search.write_cost("reflect", start))

    # GEPA's events ---------------------------------------------------------------------------------------
    def indices(self, gepa_ids: Any) -> list[int]:
        """The Run iterations of GEPA's candidates `gepa_ids` (the current one for a candidate being added)."""
        its = [self.by_gepa.get(i, self.current) for i in gepa_ids]
        return [it.index for it in its if it is not None]

    def decide(self, it: Iteration, decision: str, reason: str) -> None:
        """Decide `it` with GEPA's best so far as the incumbent."""
        self.ctx.decide(it, decision, reason, incumbent=self.best.index if self.best else None)

    async def on(self, name: str, event: dict[str, Any]) -> None:
        """Handle GEPA's event `name` (a method `on_<name>` of this class, if any)."""
        handler = getattr(self, f"event_{name}", None)
        if handler is not None:
            handler(event)

    def event_optimization_start(self, event: dict[str, Any]) -> None:
        self.current = self.ctx.new_iteration(0)
        self.current.candidate = event["seed_candidate"][COMPONENT]
        self.current.metrics["origin"] = "start"

    def event_iteration_start(self, event: dict[str, Any]) -> None:
        self.current = self.ctx.new_iteration()
        self.current.metrics["gepa_iteration"] = event["iteration"]

    def event_candidate_selected(self, event: dict[str, Any]) -> None:
        it = self.current
        if it is not None:
            it.metrics["origin"] = "reflective_mutation"
            it.parents = self.indices([event["candidate_idx"]])

    def event_minibatch_sampled(self, event: dict[str, Any]) -> None:
        if self.current is not None:
            self.current.metrics["minibatch"] = ",".join(str(i) for i in event["minibatch_ids"])

    def event_evaluation_end(self, event: dict[str, Any]) -> None:
        if self.current is not None:
            key = "minibatch_after" if event["candidate_idx"] is None else "minibatch_before"
            self.current.metrics[key] = float(sum(event["scores"]))

    def event_evaluation_skipped(self, event: dict[str, Any]) -> None:
        if self.current is not None and self.current.decision is None:
            self.decide(self.current, "NO_CANDIDATE", f"GEPA skipped the step: {event['reason']}")

    def event_proposal_end(self, event: dict[str, Any]) -> None:
        if self.current is not None and COMPONENT in event["new_instructions"]:
            self.current.candidate = event["new_instructions"][COMPONENT]

    def event_merge_attempted(self, event: dict[str, Any]) -> None:
        it = self.current
        if it is not None:
            it.candidate = event["merged_candidate"][COMPONENT]
            it.metrics["origin"] = "merge"
            it.parents = self.indices(event["parent_ids"])

    def event_pareto_front_updated(self, event: dict[str, Any]) -> None:
        if self.current is not None:
            self.current.metrics["front"] = ",".join(str(i) for i in sorted(self.indices(event["new_front"])))

    def event_valset_evaluated(self, event: dict[str, Any]) -> None:
        it = self.current
        if it is None:
            return
        prompt, idx = event["candidate"][COMPONENT], event["candidate_idx"]
        it.candidate = prompt
        result = self.results.get((prompt, tuple(sorted(event["scores_by_val_id"]))))
        if result is not None:
            self.search.scored(it, result.grounded("dev"))
        self.by_gepa[idx] = it
        it.metrics.update(gepa_candidate=idx, gepa_val_score=event["average_score"])
        if idx == 0:
            self.best = it
            self.decide(it, "START", "the starting prompt (candidate 0, GEPA's seed)" + self.search.dev_note(it))
        elif event["is_best_program"]:
            self.best = it
            self.decide(it, "NEW_BEST", "accepted by GEPA, its best on dev so far" + self.search.dev_note(it))
        else:
            best = f"iteration {self.best.index}" if self.best else "none"
            self.decide(it, "ACCEPTED", f"accepted by GEPA, not above its best ({best})" + self.search.dev_note(it))

    def event_candidate_rejected(self, event: dict[str, Any]) -> None:
        self.rejected(str(event["reason"]))

    def event_merge_rejected(self, event: dict[str, Any]) -> None:
        self.rejected(str(event["reason"]))

    def rejected(self, reason: str) -> None:
        """GEPA rejected the current iteration's candidate on its minibatch: its minibatch measurement is its
        `grounded` score."""
        it = self.current
        if it is None or it.decision is not None:
            return
        minibatch = tuple(int(i) for i in str(it.metrics.get("minibatch") or "").split(",") if i)
        result = self.results.get((it.candidate, minibatch)) if it.candidate else None
        if result is not None:  # no decision score: a minibatch is no dev measurement to select on
            it.grounded = result.grounded("dev")
        self.decide(it, "REJECTED", f"GEPA: {reason}")

    def event_iteration_end(self, event: dict[str, Any]) -> None:
        it = self.current
        if it is not None and it.decision is None and self.bridge.reason is None:
            self.decide(it, "NO_CANDIDATE", "GEPA proposed no new text (a failed reflection: see errors)")

    def close(self, reason: str | None) -> None:
        """After the optimizer ended: an undecided iteration is UNFINISHED (or dropped when it made no call)."""
        it = self.current
        if it is None or it.decision is not None:
            return
        if not it.steps and it.index > 0:
            self.ctx.run.iterations.remove(it)
            return
        self.decide(it, "UNFINISHED", f"the run stopped before GEPA decided ({reason or 'the optimizer ended'})")


class Callbacks:
    """GEPA's callback object: every event it sends (a method `on_<name>`) is handled by the `Recorder` on the
    run's event loop."""

    def __init__(self, bridge: Bridge, recorder: Recorder) -> None:
        self.bridge, self.recorder = bridge, recorder

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_") or not hasattr(self.recorder, f"event_{name[3:]}"):
            raise AttributeError(name)

        def handle(event: dict[str, Any]) -> None:
            self.bridge.call(self.recorder.on(name[3:], dict(event)), always=True)

        return handle


__all__ = ["Callbacks", "Recorder"]
