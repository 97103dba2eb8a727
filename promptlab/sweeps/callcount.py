"""How many model calls a sweep will make, counted by a dry run of the same experiment on `fake/auto`.

The loops decide how many calls a run makes (iterations, candidates, dev and test examples, early stops), and
which of them repeat (the starting prompt's evaluations are the same for every sample and every critic; a
rewrite at temperature > 0 differs per sample). Rather than a formula per loop, `count_calls` runs the experiment
with every model replaced by `fake/auto` (`Experiment.with_models`; it answers at once, and its replies vary with
the sample as a real model's do) into a scratch directory and a scratch call cache, and reads the runs' call
records: a call answered by the cache is a repeat, the others are what a sweep from an empty cache makes.

It runs replicate 0, then replicate 1 on the same cache: the first gives the calls every sample shares plus one
sample's own, the second one further sample's own, so R replicates make about `first + (R - 1) x second`.
A real model may stop a loop earlier or later than `fake/auto` does (a parse failure, a perfect score), so the
count is an estimate; `CallCount` says what it was counted on. A model the dry run cannot replace (a task's
judge scorer names its own) would be called for real: then nothing is run, and `count_calls` names it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..record import Run, Step
    from .experiment import Experiment

DRY_MODEL = "fake/auto"
"""The model that plays every role in the counting dry run."""
EVAL_PHASES = frozenset({"score_dev", "score_test"})
"""Phases whose calls run a candidate prompt on one example (capped by `eval_max_tokens`, not `max_tokens`)."""


@dataclass(frozen=True)
class CallCount:
    """The calls a sweep of an experiment makes from an empty cache, as a dry run counted them."""

    runs: int
    """Runs of the experiment (cells x tasks x replicates)."""
    asked: int
    """Calls the loops ask for, repeats included."""
    made: int
    """Calls made from an empty cache (the cache answers the repeats)."""
    token_cap: int
    """The made calls' reply caps added up (`eval_max_tokens` for an evaluation, `max_tokens` otherwise)."""
    replicates_run: int
    """Replicates the dry run ran (1 or 2); the rest are extrapolated."""


def steps_of(run: Run) -> list[Step]:
    """Every step of a run: setup, each iteration's, the final ones."""
    return [*run.setup, *(s for it in run.iterations for s in it.steps), *run.final]


def tally(runs: list[Run]) -> tuple[int, int, int]:
    """(asked, made, token cap of the made) over the runs' model calls."""
    asked = made = cap = 0
    for run in runs:
        for step in steps_of(run):
            if step.call is None:
                continue
            asked += 1
            if not step.call.cache_hit:
                made += 1
                key = "eval_max_tokens" if step.phase in EVAL_PHASES else "max_tokens"
                cap += int(run.config.get(key) or 0)
    return asked, made, cap


def dry_sweep(exp: Experiment, out: Path, cache: Path) -> tuple[int, int, int]:
    """Sweep `exp` (already on fake/auto) into `out` with the call cache `cache`; the tally of its runs."""
    from ..results.store import read_runs
    from .run import sweep

    result = sweep(exp, out, cache=cache, progress=False, workers=4)
    return tally([run for cell in result.cells for run in read_runs(out, cell.cell_id)])


def uncounted_models(dry: Experiment) -> list[str]:
    """The models a dry run of `dry` would still call for real: those `with_models` cannot replace, such as a
    task's judge scorer's model (simulated critics and scripted models cost nothing and are left out)."""
    from ..llm.providers.resolved import resolve_model
    from .cells import preflight_cells

    tasks = dry.load_tasks()
    called = preflight_cells(dry.cells(tasks), tasks)
    return [m for m in called if resolve_model(m).runs_a_model]


def count_calls(exp: Experiment) -> CallCount | list[str]:
    """The calls a sweep of `exp` makes from an empty cache, by a dry run on fake/auto (see the module doc); or,
    when the dry run would call a real model (a judge scorer's), those models, and no dry run.

    Raises:
        ConfigError: the experiment does not check (as its sweep would).
    """
    dry = exp.with_models(DRY_MODEL)
    real = uncounted_models(dry)
    if real:
        return real
    runs = len(dry.cells()) * len(dry.load_tasks()) * exp.replicates
    with tempfile.TemporaryDirectory(prefix="promptlab-count-") as scratch:
        root = Path(scratch)
        first = dry_sweep(dry.model_copy(update={"replicates": 1}), root / "first", root / "cache")
        if exp.replicates == 1:
            return CallCount(runs, *first, replicates_run=1)
        # replicates 0 and 1 on the cache of replicate 0: what is made now is one further sample's own calls
        both = dry_sweep(dry.model_copy(update={"replicates": 2}), root / "both", root / "cache")
    more = exp.replicates - 1
    asked = first[0] + more * (both[0] - first[0])
    return CallCount(runs, asked, first[1] + more * both[1], first[2] + more * both[2], replicates_run=2)


__all__ = ["DRY_MODEL", "EVAL_PHASES", "CallCount", "count_calls", "steps_of", "tally", "uncounted_models"]
