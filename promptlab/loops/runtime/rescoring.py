"""What a re-score may change about a logged candidate for the critic-bias probes (`promptlab.analysis.bias_asks`):
the candidate's text (a padded copy) and a previous score shown in the critic's context (the anchoring probe).

`rescoring_goal` appends ANCHOR_NOTE to the goal the critic is shown; `rescoring_iteration` is the scratch
iteration a re-score scores in, carrying the logged candidate's dev score and index (what a simulated critic
scores from) and the shown score (`metrics["anchor"]`, what a simulated critic with an anchoring weight is
pulled towards).
"""

from __future__ import annotations

from ...record import Iteration

ANCHOR_NOTE = "\n\nFor reference, an earlier version of this prompt was scored {anchor:g} out of 10."
"""Appended to the goal when a re-score shows the critic a previous score."""


def rescoring_goal(goal: str, anchor: float | None) -> str:
    """The goal the critic is shown: with ANCHOR_NOTE when a previous score is shown."""
    return goal if anchor is None else goal + ANCHOR_NOTE.format(anchor=anchor)


def rescoring_iteration(scratch: Iteration, logged: Iteration, anchor: float | None) -> Iteration:
    """`scratch` made to stand for the logged iteration (its dev score and index) with the shown score."""
    scratch.grounded = logged.grounded
    scratch.index = logged.index
    if anchor is not None:
        scratch.metrics["anchor"] = anchor
    return scratch


__all__ = ["ANCHOR_NOTE", "rescoring_goal", "rescoring_iteration"]
