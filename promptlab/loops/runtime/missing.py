"""Missing scores are errors: a score the run needed and could not read from a reply that parsed (a critic's
expected score with no usable log-probabilities, a criterion the evaluator skipped or wrote badly) is recorded
as an error of the run (`Run.errors`, kind `ScoreMissing`, so `n_errors` counts it), while the run goes on with
the score missing. A reply that did not parse at all is already an error of its call and is not counted twice.
A grounded measurement whose scorer could not score some examples' replies records one such error per
measurement, naming how many examples were unscored (`record_unscored`)."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScoreMissing
from ...eval.evaluate import EvalResult
from ...record import Iteration, Score, Step, StepError
from .context import RunContext


def record_missing(ctx: RunContext, step: Step, scores: Sequence[Score], what: str) -> None:
    """Record on `step` and the run one ScoreMissing error naming every score of `scores` that is missing
    (criterion and why), unless none is or the step already carries its call's error."""
    missing = [s for s in scores if s.score is None]
    if not missing or step.error is not None:
        return
    said = "; ".join(f"{s.criterion}: {s.justification or 'no reason given'}" for s in missing)
    ctx.fail(step, ScoreMissing(f"{what}: {len(missing)} of {len(scores)} score(s) could not be read ({said})"))


def record_unscored(ctx: RunContext, result: EvalResult, phase: str, iteration: Iteration | None) -> None:
    """Record on the run one ScoreMissing error for a measurement (`phase`, e.g. "score_dev") naming how many
    examples' replies its scorer could not score, and the first reasons; nothing when it scored every reply
    it got (a failed model call is already an error of its call)."""
    unscored = [r for r in result.records if r.error is not None and r.error.startswith("scorer:")]
    if not unscored:
        return
    reasons = list(dict.fromkeys(r.error.removeprefix("scorer: ") for r in unscored if r.error))
    said = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    err = StepError(
        iteration=iteration.index if iteration is not None else None,
        phase=phase,
        role="scorer",
        kind=ScoreMissing.__name__,
        message=ctx.clean(f"{phase}: {len(unscored)} of {len(result.records)} example(s) could not be scored ({said})"),
    )
    ctx.run.errors.append(err)
    ctx.emit("error", f"{err.kind}: {err.message}", iteration=err.iteration, phase=phase, role="scorer")


__all__ = ["record_missing", "record_unscored"]
