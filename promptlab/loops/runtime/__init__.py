"""What every loop runs on: the config base and loop registry (`base`), the run context that records calls,
steps and events (`context`), grounded scoring of candidates (`grounding`), budgets (`budget`), the prompt-search
baselines' shared toolkit (`search`) and tool steps (`tool_steps`)."""

from __future__ import annotations

from .base import (
    LOOPS,
    LoopConfig,
    LoopSpec,
    as_config,
    as_task,
    best_iteration,
    provenance_scope,
    register_loop,
    rescore_sample,
    sync_twin,
)
from .context import RunContext
from .grounding import PromptLoopConfig, ScoreMode, ScoreSource, measure, measure_test

__all__ = [
    "LOOPS",
    "LoopConfig",
    "LoopSpec",
    "PromptLoopConfig",
    "RunContext",
    "ScoreMode",
    "ScoreSource",
    "as_config",
    "as_task",
    "best_iteration",
    "measure",
    "measure_test",
    "provenance_scope",
    "register_loop",
    "rescore_sample",
    "sync_twin",
]
