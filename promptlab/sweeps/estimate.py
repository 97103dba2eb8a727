"""How long a sweep will take, said before it starts, from what was measured on this machine (`sweep_plan`).

Two bases, the more direct first:
- **Finished cells** of the experiment in the results directory (a resumed sweep): the unfinished cells are
  expected to take as long each as those did, `workers` at once (`time_estimate`).
- **Calls x time per call**, before any cell has finished: the calls a sweep makes from an empty cache, counted
  by a dry run on `fake/auto` (`promptlab.sweeps.callcount`), times the seconds per call of a short timed probe
  of the model, run now at the sweep's calls in flight (`promptlab.sweeps.probe`). A call's time is taken as
  proportional to its reply cap (`max_tokens`; `eval_max_tokens` for a prompt run on an example), the probe's
  calls being evaluation calls. A hosted model is not probed (it would cost money), nor is the time split
  between several models: the line then gives the calls and says there is no time per call to go on.

Calls already in the call cache cost nothing (an interrupted sweep's calls answer its re-run), so a re-run
takes less than the estimate; the lines say so.

`plan_sweep` returns the lines with the seconds they estimate (`SweepEstimate`); `require_confirmation` refuses to
start a sweep estimated above `CONFIRM_ABOVE_S` (5 minutes), or one whose time has no basis, unless the user
said so (notebook 02's `confirm = True`, papermill's `-p confirm True`): a newcomer's Run All never starts an
hour of work. Notebook 02 times a model only once confirmed (`probe_first`): Run All makes no model call first.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import PromptlabError

if TYPE_CHECKING:
    from .callcount import CallCount
    from .experiment import Experiment
    from .probe import Probe

RESUME = "calls already in the call cache cost nothing: a re-run resumes from it (finished cells are skipped)"
"""What every estimate adds about the cache."""
WIDTH = 100
"""Lines are wrapped at words to this width (a notebook's output would cut a long one mid-word)."""


CONFIRM_ABOVE_S = 300.0
"""A sweep estimated above this many seconds (5 minutes) starts only when the user confirms it
(`require_confirmation`)."""


@dataclass(frozen=True)
class SweepEstimate:
    """What a sweep will cost, said before it starts."""

    text: str
    """The plan in lines: runs and models, model calls, time, each with its basis."""
    runs: int
    """Runs of the sweep (cells x tasks x replicates)."""
    calls: int | None
    """Model calls from an empty cache, as a dry run counted them (None: not counted)."""
    seconds: float | None
    """The estimated time (None: no basis for one: a hosted model, several models, a judge scorer's model)."""

    @property
    def needs_confirmation(self) -> bool:
        """Whether the sweep may start only when the user confirms it: estimated above `CONFIRM_ABOVE_S`, or
        with no estimate at all."""
        return self.seconds is None or self.seconds > CONFIRM_ABOVE_S


class NeedsConfirmation(PromptlabError):
    """A sweep estimated above `CONFIRM_ABOVE_S` (or not estimated) was about to start without `confirm`."""


def require_confirmation(plan: SweepEstimate, confirm: bool) -> None:
    """Nothing when the plan may start (`confirm`, or an estimate of at most `CONFIRM_ABOVE_S`); else
    NeedsConfirmation saying, in one line, how long it should take and how to start it."""
    if confirm or not plan.needs_confirmation:
        return
    calls = f", about {plan.calls:,} model calls" if plan.calls is not None else ""
    size = f"{plan.runs} runs{calls}"
    how = (
        f"should take about {duration(plan.seconds)} ({size}), more than {duration(CONFIRM_ABOVE_S)}"
        if plan.seconds is not None
        else f"has no time estimate ({size}; see the plan above)"
    )
    raise NeedsConfirmation(
        f"Not started: this sweep {how}. To run it, set confirm = True in the parameters cell and run again "
        '(papermill: -p confirm True); for a dry run in seconds, set model = "fake/auto".'
    )


def duration(seconds: float) -> str:
    """Seconds in words a reader takes in at once: "40 s", "12 min", "2.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def time_estimate(cells: list[Any], out: str | Path, workers: int) -> str:
    """One line: how long the unfinished cells of `out` should take (from the finished cells' wall times), or
    why there is no estimate yet."""
    return timed_cells(cells, out, workers)[0]


def timed_cells(cells: list[Any], out: str | Path, workers: int) -> tuple[str, float | None]:
    """`time_estimate`'s line and its seconds (None when no cell has finished yet)."""
    from ..results.store import cell_status

    statuses = [cell_status(out, c.cell_id) or {} for c in cells]
    times = [float(s.get("wall_time_s") or 0.0) for s in statuses if s.get("status") == "ok"]
    pending = len(cells) - len(times)
    if not pending:
        return f"every cell is finished in {out}: nothing to run", 0.0
    if not times:
        return (
            f"time: no cell of this experiment has finished in {out} yet, so there is nothing measured to "
            "estimate from",
            None,
        )
    each = sum(times) / len(times)
    at_once = max(1, min(workers, pending))
    seconds = each * pending / at_once
    return (
        f"time: about {duration(seconds)} for the {pending} unfinished cell(s), {at_once} at once "
        f"(the {len(times)} finished here took {duration(each)} each); {RESUME}",
        seconds,
    )


def calls_line(count: CallCount, replicates: int) -> str:
    """The calls line: made from an empty cache, asked, and how they were counted."""
    how = "replicate 0" if count.replicates_run == 1 else f"replicates 0 and 1, extrapolated to {replicates}"
    return (
        f"calls: about {count.made:,} model calls for the {count.runs} runs ({count.asked:,} asked, the repeats "
        f"answered by the cache), counted by a dry run of the experiment on fake/auto ({how}); the real model "
        "may stop a loop earlier or later"
    )


def probe_seconds(count: CallCount, probe: Probe) -> float:
    """The sweep's time from a probe: seconds per call x the made calls, scaled by their reply caps."""
    return probe.per_call / probe.max_tokens * count.token_cap


def probe_line(count: CallCount, probe: Probe, in_flight: int) -> str:
    """The time line from a probe (`probe_seconds`); `in_flight` is how many calls the sweep runs at once (more
    than the probe's: the time may be less)."""
    how = (
        "as the sweep runs them"
        if in_flight <= probe.at_once
        else f"the sweep runs up to {in_flight}: it may be quicker"
    )
    return (
        f"time: about {duration(probe_seconds(count, probe))}: {probe.model} took {probe.per_call:.2f} s per call "
        f"just now on this machine ({probe.calls} timed calls of at most {probe.max_tokens} tokens, "
        f"{probe.at_once} at once, {how}), a call's time taken as proportional to its reply cap; {RESUME}"
    )


def real_models(cells: list[Any]) -> list[str]:
    """The models the cells call, simulated critics left out."""
    from ..llm.providers.resolved import resolve_model
    from .models import models_of

    return [m for m in models_of(cells) if resolve_model(m).makes_calls]


def probe_first(exp: Experiment, confirm: bool) -> bool:
    """Whether a plan may time the model (a few calls) before the user confirms the sweep: once confirmed, or
    when no model of the sweep runs a model (scripts answer at once and cost nothing: a dry run on fake/auto is
    never held up). Notebook 02 plans with `probe=probe_first(exp, confirm)`: no model call before it asks."""
    from ..llm.providers.resolved import resolve_model

    return confirm or not any(resolve_model(m).runs_a_model for m in real_models(exp.cells()))


def first_eval_cap(cells: list[Any]) -> int:
    """The reply cap of the sweep's first evaluation calls (the first cell's `eval_max_tokens`)."""
    from ..loops.runtime.grounding import GroundedConfig

    given = cells[0].config.get("eval_max_tokens") if cells else None
    return int(given or GroundedConfig.model_fields["eval_max_tokens"].default)


def sweep_plan(exp: Experiment, out: str | Path, workers: int, *, probe: bool = True) -> str:
    """The lines of `plan_sweep`."""
    return plan_sweep(exp, out, workers, probe=probe).text


def plan_sweep(exp: Experiment, out: str | Path, workers: int, *, probe: bool = True) -> SweepEstimate:
    """What a sweep of `exp` into `out` will cost: the runs and models (`preview`), the model calls (a dry
    run's count) and the time, from the finished cells in `out` when there are some, else from a timed probe
    of the model (when `probe` and the experiment calls one model that is free to call), else a line saying
    there is no basis for a time (`seconds` None)."""
    from .callcount import count_calls
    from .cells import runs_in_flight
    from .models import preview
    from .probe import probe_model, probed

    cells, tasks = exp.cells(), exp.load_tasks()
    runs = len(cells) * len(tasks) * exp.replicates
    lines = [preview(exp.name, cells, len(tasks), exp.replicates)]
    count = count_calls(exp)
    if isinstance(count, list):  # a dry run would call these for real: neither calls nor time are estimated
        lines.append(
            f"calls and time: not estimated: a dry run would call {', '.join(count)} for real (a task's "
            "judge scorer); the bar's estimate appears once the first runs finish"
        )
        return SweepEstimate(wrapped(lines), runs, None, None)
    lines.append(calls_line(count, exp.replicates))
    timed, seconds = timed_cells(cells, out, workers)
    models = real_models(cells)
    if seconds is not None:
        lines.append(timed)
    elif not models:
        lines.append(f"time: no model call (simulated critics only): seconds; {RESUME}")
        seconds = 0.0
    elif len(models) > 1:
        lines.append(
            f"time: not estimated: the calls go to {len(models)} models ({', '.join(models)}) and the "
            "dry run does not split them by model; the bar's estimate appears once the first runs finish"
        )
    elif not probe or not probed(models[0]):
        why = (
            "a hosted model is not probed: it would cost money"
            if probe
            else "not timed before the sweep is confirmed: a timed probe makes model calls"
        )
        lines.append(
            f"time: not estimated: {models[0]}'s time per call is not measured here ({why}); the bar's "
            "estimate appears once the first runs finish"
        )
    else:
        at_once = runs_in_flight(models)
        measured = probe_model(models[0], tasks[0], first_eval_cap(cells), at_once)
        lines.append(probe_line(count, measured, at_once))
        seconds = probe_seconds(count, measured)
    return SweepEstimate(wrapped(lines), runs, count.made, seconds)


def wrapped(lines: list[str]) -> str:
    """The lines, each wrapped at words to `WIDTH` columns with its further lines indented."""
    return "\n".join(textwrap.fill(line, WIDTH, subsequent_indent="  ") for line in "\n".join(lines).splitlines())


__all__ = [
    "CONFIRM_ABOVE_S",
    "RESUME",
    "NeedsConfirmation",
    "SweepEstimate",
    "calls_line",
    "duration",
    "plan_sweep",
    "probe_first",
    "probe_line",
    "probe_seconds",
    "require_confirmation",
    "sweep_plan",
    "time_estimate",
    "timed_cells",
]
