"""P³RO: Plan, Probe, Reflect & Orient, Polish (see `promptlab.loops.p3ro.loop`)."""

from __future__ import annotations

from .config import MissingCriteria, P3ROConfig, ScoreType, average_of
from .evaluate import EVALUATOR_PROMPT
from .loop import (
    DECOMPOSER_PROMPT,
    GENERATOR_PROMPT,
    REFLECTOR_PROMPT,
    STRATEGIST_PROMPT,
    arun_p3ro,
    rescore_p3ro,
    run_p3ro,
)
from .router import Action, route
from .text import journey_summary

__all__ = [
    "Action",
    "DECOMPOSER_PROMPT",
    "EVALUATOR_PROMPT",
    "GENERATOR_PROMPT",
    "MissingCriteria",
    "P3ROConfig",
    "REFLECTOR_PROMPT",
    "STRATEGIST_PROMPT",
    "ScoreType",
    "arun_p3ro",
    "average_of",
    "journey_summary",
    "rescore_p3ro",
    "route",
    "run_p3ro",
]
