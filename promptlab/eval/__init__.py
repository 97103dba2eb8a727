"""Grounded evaluation: a prompt measured on labelled examples (`evaluate`), scorers (`scorers`, built on
`matching`), task files and splits (`tasks`), expected (G-Eval) scores (`expected`) and the intervals every
report uses (`stats`)."""

from __future__ import annotations

from .evaluate import EvalResult, ExampleRecord, aevaluate_prompt, evaluate_prompt
from .expected import ExpectedScore, expected_scores
from .scorers import SCORERS, get_scorer, register_scorer
from .scoring import Scored, Scorer
from .stats import bootstrap_ci, mean_ci, paired_delta_ci
from .tasks import check_task, examples_of, format_prompt, read_tasks, split_examples

__all__ = [
    "EvalResult",
    "ExampleRecord",
    "ExpectedScore",
    "SCORERS",
    "Scored",
    "Scorer",
    "aevaluate_prompt",
    "bootstrap_ci",
    "check_task",
    "evaluate_prompt",
    "examples_of",
    "expected_scores",
    "format_prompt",
    "get_scorer",
    "mean_ci",
    "paired_delta_ci",
    "read_tasks",
    "register_scorer",
    "split_examples",
]
