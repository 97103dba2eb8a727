"""The run context: records one loop run as it goes (model calls through the core path, steps, errors,
events, totals) and closes it into a `Run`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from types import EllipsisType
from typing import Any

from ...errors import ConfigError, ParseError, ProviderError
from ...events import Event, EventHandler, wants_tokens
from ...llm.call.completion import Completion
from ...llm.call.entry import CacheArg, acomplete
from ...llm.call.preflight import preflight
from ...llm.call.settings import Settings
from ...record import Iteration, ModelCall, Run, Score, Step, StepError, Task, new_run_id
from ...sanitize import Cleaner
from .budget import BudgetMeter
from .config import LoopConfig
from .provenance import base_provenance, note_model, scoped_provenance, text_hash
from .role_call import RoleCall, cleaned
from .toolkit import best_iteration, by_average, mean_present

USER_INPUT = frozenset({"task", "config"})
"""Run fields recorded as the user gave them; everything else is cleaned by `finish` (`promptlab.sanitize`)."""


class RunContext(BudgetMeter):
    """Records one run as it goes: model calls through the core path, steps, errors, events, totals."""

    def __init__(
        self,
        loop: str,
        task: Task,
        config: LoopConfig,
        *,
        sample: int = 0,
        on_event: EventHandler | None = None,
        cache: CacheArg = None,
        settings: Settings | None = None,
        provenance: dict[str, Any] | None = None,
        models: Iterable[str] = (),
        rank_by: Callable[[Iteration], float | None] = by_average,
        check_roles: Iterable[str] | None = None,
    ) -> None:
        """Check every model the run will use (the roles' and `models`) before any call, then open the record.

        `provenance` adds entries to `Run.provenance` (e.g. the sweep's `experiment_hash`); `rank_by` is how
        `finish` picks `Run.best_iteration` (the loop's own rule: `by_decision_score` where the router uses
        a score); `check_roles` limits the check to those roles (a re-score calls its critics only)."""
        cfg = config.model_dump(mode="json")
        roles = config.ROLES or ()
        preflight([*(config.model_for(r) for r in roles if check_roles is None or r in set(check_roles)), *models])
        self.config = config
        self.rank_by = rank_by
        self.cache = cache
        self.settings = settings
        self.on_event = on_event
        self.clean = Cleaner()
        """Cleans model and tool output for the run's records and events (the secrets of the environment it started in)."""
        self.t0 = time.perf_counter()
        super().__init__()
        self.run = Run(
            run_id=new_run_id(),
            loop=loop,
            task=task,
            config=cfg,
            sample=sample,
            models={r: config.model_for(r) for r in roles},
            started_at=time.time(),
        )
        self.run.provenance = base_provenance(task) | scoped_provenance() | dict(provenance or {})

    # events -----------------------------------------------------------------------------------
    def emit(
        self,
        kind: Any,
        message: str = "",
        *,
        iteration: int | None = None,
        phase: str | None = None,
        role: str | None = None,
        **data: Any,
    ) -> None:
        """Send an event to the callback, if any (a failing callback never stops the run)."""
        if self.on_event is None:
            return
        event = Event(
            kind=kind,
            run_id=self.run.run_id,
            loop=self.run.loop,
            iteration=iteration,
            phase=phase,
            role=role,
            message=self.clean(message),
            data=self.clean(data),
        )
        try:
            self.on_event(event)
        except Exception as e:  # the run is worth more than the display
            logging.getLogger("promptlab").warning("on_event callback failed: %s", e)

    # prompts ----------------------------------------------------------------------------------
    def prompt(self, role: str, default: str, **fields: Any) -> str:
        """The role's prompt (an override from the config, else `default`) with `fields` filled in."""
        template = self.config.prompts.get(role, default)
        self.run.provenance.setdefault("prompt_hashes", {})[role] = text_hash(template)
        try:
            return template.format(**fields)
        except (KeyError, IndexError) as e:
            raise ConfigError(
                f"prompts.{role}: the template uses a field {e} that this role does not "
                f"provide; available fields: {sorted(fields)}"
            ) from e

    # model calls ------------------------------------------------------------------------------
    async def call(self, role: str, phase: str, prompt: str, **options: Any) -> tuple[Any, Step]:
        """Make one role's model call (`ask(RoleCall(role, phase, prompt, **options))`: the options are the
        fields of `promptlab.loops.runtime.role_call.RoleCall`) and return its reply.

        Returns (parsed object or text, step): a parsed reply has the schema's type. On a ParseError or
        ProviderError the first item is None, the step carries the error (with the raw output), and the
        run's `errors` lists it.
        """
        request = RoleCall(role, phase, prompt, **options)
        c, step = await self.ask(request)
        return request.answer(c), step

    async def ask(self, request: RoleCall) -> tuple[Completion | None, Step]:
        """Make one role's model call and record it as a step of its iteration (or of setup/final); returns the
        whole Completion (None on failure: the step carries the error) and the step."""
        model, role, phase = request.model_of(self.config), request.role, request.phase
        it = request.iteration.index if request.iteration is not None else None
        self.emit("phase", f"{role} ({model})", iteration=it, phase=phase, role=role)
        step = Step(iteration=it, phase=phase, role=request.judge or role, model=model)
        c: Completion | None = None
        try:
            c = await acomplete(
                model,
                request.prompt,
                cache=self.cache,
                on_token=self._token_sink(request.token_type, it, phase, role),
                **request.call_args(self.config, self.run.sample, self.settings),
            )
        except (ParseError, ProviderError) as e:
            self._failed(step, model, e)
        else:
            c = cleaned(c, self.clean)  # model output is hostile: no terminal escape nor secret reaches a record
            self._answered(step, role, c, keep_raw=request.keep_raw)
        if request.place:
            self.place(step, request.iteration)
        return c, step

    def _token_sink(
        self, token_type: str | None, it: int | None, phase: str, role: str
    ) -> Callable[[str], None] | None:
        """Where a streamed reply's pieces go as `token` events: only to a handler that asks for tokens (else
        the reply is not streamed at all)."""
        if token_type is None or not wants_tokens(self.on_event):
            return None

        def on_token(piece: str) -> None:
            self.emit("token", piece, iteration=it, phase=phase, role=role, token_type=token_type, text=piece)

        return on_token

    def _failed(self, step: Step, model: str, e: ParseError | ProviderError) -> None:
        """Record a call that failed for good on its step, the run's errors and totals (with the requests it
        made and, for a ParseError, what its unusable replies cost)."""
        step.call = ModelCall(model=model, attempts=e.requests if isinstance(e, ParseError) else e.attempts)
        self.fail(step, e, raw=e.raw if isinstance(e, ParseError) else None).infrastructure = isinstance(
            e, ProviderError
        )
        if isinstance(e, ParseError):  # its replies were paid for although none parsed
            self.run.totals.add_failure(model, e.input_tokens, e.output_tokens, e.cost_usd)
            self.spend(step.phase, *e.original, failed=True)  # as first made: a replay spends the same
        else:
            self.run.totals.add_failure(model)
            self.spend(step.phase, failed=True)

    def _answered(self, step: Step, role: str, c: Completion, *, keep_raw: bool) -> None:
        """Record a completed call on its step (whose role is the judge's name, if any), the run's totals and
        provenance, and emit it as `role`'s model call."""
        model = step.model or c.model
        step.call = ModelCall(
            model=model,
            cache_hit=c.cache_hit,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            cost_usd=c.cost_usd,
            latency_s=round(c.latency_s, 6),
            attempts=c.attempts,
        )
        self.run.totals.add(c)
        self.spend(step.phase, c.input_tokens or 0, c.output_tokens or 0, c.cost_usd)
        note_model(self.run.provenance, step.role, model, c)
        if keep_raw:
            step.raw = c.text
        step.output = c.parsed.model_dump(mode="json") if c.parsed is not None else {"text": c.text}
        self.emit(
            "model_call",
            f"{model} {'(cached)' if c.cache_hit else ''}".strip(),
            iteration=step.iteration,
            phase=step.phase,
            role=role,
            cache_hit=c.cache_hit,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            cost_usd=c.cost_usd,
            output=step.output,  # the node's output, which PrintLog shows readably
        )

    def fail(self, step: Step, error: BaseException, *, raw: str | None = None) -> StepError:
        """Record an error on a step and on the run, and emit it."""
        err = StepError(
            iteration=step.iteration,
            phase=step.phase,
            role=step.role,
            kind=type(error).__name__,
            message=self.clean(str(error)),
            raw=self.clean(raw),
        )
        step.error = err
        self.run.errors.append(err)
        self.emit(
            "error", f"{err.kind}: {err.message}", iteration=step.iteration, phase=step.phase, role=step.role, raw=raw
        )
        return err

    def place(self, step: Step, iteration: Iteration | None) -> None:
        """Append a step to `iteration` (or to the run's setup or final steps)."""
        if iteration is not None:
            iteration.steps.append(step)
        elif self.run.iterations:
            self.run.final.append(step)
        else:
            self.run.setup.append(step)

    # iterations -------------------------------------------------------------------------------
    def new_iteration(self, index: int | None = None) -> Iteration:
        """Start the next iteration (appended to the run): number `index`, by default one more than the last
        (1 for the first; 0 is the starting prompt scored as candidate 0)."""
        if index is None:
            index = self.run.iterations[-1].index + 1 if self.run.iterations else 1
        it = Iteration(index=index)
        self.run.iterations.append(it)
        self.emit("phase", f"iteration {it.index}", iteration=it.index, phase="iteration")
        return it

    def score(self, it: Iteration, scores: list[Score], average: float | None | EllipsisType = ...) -> None:
        """Set an iteration's scores and average (the mean of present scores unless given, None included)
        and emit them."""
        it.scores = scores
        it.average = mean_present(s.score for s in scores) if isinstance(average, EllipsisType) else average
        self.emit(
            "score",
            f"average {it.average:.3g}" if it.average is not None else "score missing",
            iteration=it.index,
            average=it.average,
            scores=[s.model_dump() for s in scores],
        )

    def decide(self, it: Iteration, decision: str, reason: str, *, incumbent: int | None = None) -> None:
        """Record and emit an iteration's decision, the run's spend at that point and, for a loop that returns a
        prompt, `incumbent`: the iteration whose candidate it would return if it stopped now."""
        it.decision, it.reason = decision, reason
        it.spent = self.spent.model_copy()
        it.incumbent = incumbent
        self.emit("decision", f"{decision}: {reason}", iteration=it.index, decision=decision)

    def finish(self, stop_reason: str, final_output: str | None) -> Run:
        """Close the run: stop reason, output, best iteration (by `rank_by`, the rule the loop chooses its
        best prompt by) and its average, wall time; emits run_finished."""
        r = self.run
        r.stop_reason, r.final_output = self.recorded_stop(stop_reason), final_output
        best = best_iteration(r.iterations, key=self.rank_by)
        if best is not None:
            r.best_iteration, r.best_score = best.index, best.average
        r.totals.wall_time_s = round(time.perf_counter() - self.t0, 4)
        r.spent = self.spent.model_copy()
        self.clean.model(r, skip=USER_INPUT)  # the one pass every loop's record goes through (plan, candidates, steps)
        self.emit("run_finished", f"stopped: {r.stop_reason}", stop_reason=r.stop_reason, best_score=r.best_score)
        return r
