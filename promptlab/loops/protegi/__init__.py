"""ProTeGi: prompt optimisation with textual gradients and beam search (see `promptlab.loops.protegi.loop`)."""

from __future__ import annotations

from .bandit import SELECTIONS, Arms, select_successive_rejects, select_ucb
from .config import Prompts, ProTeGiConfig, Reasons, Selection
from .loop import EDITOR_PROMPT, GRADIENT_PROMPT, arun_protegi, error_text, run_protegi

__all__ = [
    "Arms",
    "EDITOR_PROMPT",
    "GRADIENT_PROMPT",
    "ProTeGiConfig",
    "Prompts",
    "Reasons",
    "SELECTIONS",
    "Selection",
    "arun_protegi",
    "error_text",
    "run_protegi",
    "select_successive_rejects",
    "select_ucb",
]
