"""Missing scores are errors: a score the run needed and could not read from a reply that parsed (a critic's
expected score with no usable log-probabilities, a criterion the evaluator skipped or wrote badly) is recorded
as an error of the run (`Run.errors`, kind `ScoreMissing`, so `n_errors` counts it), while the run goes on with
the score missing. A reply that did not parse at all is already an error of its call and is not counted twice."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScoreMissing
from ...record import Score, Step
from .context import RunContext


def record_missing(ctx: RunContext, step: Step, scores: Sequence[Score], what: str) -> None:
    """Record on `step` and the run one ScoreMissing error naming every score of `scores` that is missing
    (criterion and why), unless none is or the step already carries its call's error."""
    missing = [s for s in scores if s.score is None]
    if not missing or step.error is not None:
        return
    said = "; ".join(f"{s.criterion}: {s.justification or 'no reason given'}" for s in missing)
    ctx.fail(step, ScoreMissing(f"{what}: {len(missing)} of {len(scores)} score(s) could not be read ({said})"))


__all__ = ["record_missing"]
