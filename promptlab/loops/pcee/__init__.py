"""PCEE: Planner, Controller, Executor, Evaluator in a sandboxed workspace (see `promptlab.loops.pcee.loop`)."""

from __future__ import annotations

from .config import PCEEConfig, Piping
from .loop import CORRECTOR_PROMPT, PLANNER_PROMPT, arun_pcee, run_pcee
from .schemas import (
    FixPlan,
    PlaceholderError,
    Plan,
    PlanStep,
    Verdict,
    fill_placeholders,
    placeholder_steps,
    plan_schemas,
)
from .steps import CONTROLLER_PROMPT, EVALUATOR_PROMPT

__all__ = [
    "CONTROLLER_PROMPT",
    "CORRECTOR_PROMPT",
    "EVALUATOR_PROMPT",
    "FixPlan",
    "PCEEConfig",
    "PLANNER_PROMPT",
    "Piping",
    "PlaceholderError",
    "Plan",
    "PlanStep",
    "Verdict",
    "arun_pcee",
    "fill_placeholders",
    "placeholder_steps",
    "plan_schemas",
    "run_pcee",
]
