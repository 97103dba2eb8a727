"""PES: Plan-Execute-Synthesize, an agent loop with tools, threads and delegation (see `promptlab.loops.pes.agent`)."""

from __future__ import annotations

from .a2a import AgentDirectory
from .agent import PLANNING_SYSTEM, SYNTHESIS_SYSTEM, PESAgent, arun_pes, run_pes
from .config import Persona, PESConfig, ThreadState
from .observe import TOKEN_KINDS, ObservationType
from .run import JUDGE_PROMPT, PLANNER_PROMPT, SYNTHESIZER_PROMPT

__all__ = [
    "AgentDirectory",
    "JUDGE_PROMPT",
    "ObservationType",
    "PESAgent",
    "PESConfig",
    "PLANNER_PROMPT",
    "PLANNING_SYSTEM",
    "Persona",
    "SYNTHESIS_SYSTEM",
    "SYNTHESIZER_PROMPT",
    "TOKEN_KINDS",
    "ThreadState",
    "arun_pes",
    "run_pes",
]
