"""GEPA: reflective prompt evolution with a Pareto front, on the `gepa` library's own engine (see
`promptlab.loops.gepa.loop`)."""

from __future__ import annotations

from .adapter import PromptAdapter, ReflectionModel
from .bridge import Bridge, Halted
from .config import COMPONENT, GEPAConfig, metric_calls
from .loop import REFLECTOR_PROMPT, arun_gepa, run_gepa

__all__ = [
    "COMPONENT",
    "Bridge",
    "GEPAConfig",
    "Halted",
    "PromptAdapter",
    "REFLECTOR_PROMPT",
    "ReflectionModel",
    "arun_gepa",
    "metric_calls",
    "run_gepa",
]
