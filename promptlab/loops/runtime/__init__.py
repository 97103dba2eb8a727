"""What every loop runs on, by kind: how a loop is defined and registered (`define`: `define_loop`, `LoopSpec`,
`LOOPS`), what a router returns (`decision`), the config base and reading a task and config (`config`), the
small helpers loops share (`toolkit`), what a run records about its origin (`provenance`), the run context that
records calls, steps and events (`context`), one role's call as a loop asks it (`role_call`), how a reply is read
(`replies`), what a re-score may change
(`rescoring`), grounded scoring of candidates (`grounding`), budgets (`budget`),
the prompt-search baselines' shared toolkit (`search`) and router (`search_router`), and tool steps
(`tool_steps`)."""

from __future__ import annotations

from .config import LoopConfig, as_config, as_task
from .context import RunContext
from .decision import Decision
from .define import (
    LOOPS,
    AsyncLoop,
    LoopSpec,
    RunArgs,
    define_loop,
    define_loop_runner,
    register_loop,
    rescore_sample,
    sync_twin,
)
from .grounding import PromptLoopConfig, ScoreMode, ScoreSource, measure, measure_test
from .provenance import provenance_scope
from .role_call import RoleCall
from .toolkit import best_iteration

__all__ = [
    "LOOPS",
    "AsyncLoop",
    "Decision",
    "LoopConfig",
    "LoopSpec",
    "PromptLoopConfig",
    "RoleCall",
    "RunArgs",
    "RunContext",
    "ScoreMode",
    "ScoreSource",
    "as_config",
    "as_task",
    "best_iteration",
    "define_loop",
    "define_loop_runner",
    "measure",
    "measure_test",
    "provenance_scope",
    "register_loop",
    "rescore_sample",
    "sync_twin",
]
