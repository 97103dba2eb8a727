"""PCEE: Planner, Controller, Executor, Evaluator in a sandboxed workspace (see `promptlab.loops.pcee.loop`)."""

from __future__ import annotations

from .loop import PCEEConfig, arun_pcee, run_pcee
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

__all__ = ["FixPlan", "PCEEConfig", "PlaceholderError", "Plan", "PlanStep", "Verdict", "arun_pcee",
           "fill_placeholders", "placeholder_steps", "plan_schemas", "run_pcee"]
