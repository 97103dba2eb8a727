"""PrintLog shows each node's output readably (issue #29 item 11): the criteria, the plan, the prompt and
the reflection of a P³RO run, the plan steps and verdicts of PCEE, under each model call (scripted models)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import promptlab as pl
from promptlab.events import PrintLog, describe_output


def test_printlog_shows_the_criteria_plan_prompt_and_reflection_of_a_p3ro_run() -> None:
    replies = {
        "decomposer": {"criteria": ["Names the audience", "Asks for a format"]},
        "strategist": {"plan": "First name the audience, then the format."},
        "generator": {"prompt_text": "Write a haiku about shoes for runners.", "reasoning": "audience"},
        "evaluator": {
            "scores": [
                {"criterion": "Names the audience", "score": 9, "justification": "runners"},
                {"criterion": "Asks for a format", "score": 8, "justification": "haiku"},
            ],
            "qualitative_feedback": "good",
        },
        "reflector": {"summary": "Keep the audience in the first sentence."},
    }
    roles = {r: pl.scripted(f"plog-{r}", [json.dumps(v)] * 3).name for r, v in replies.items()}
    out = io.StringIO()
    pl.run_p3ro(
        {"id": "t", "prompt": "Write about shoes.", "goal": "Make it punchy"},
        {"role_models": roles, "max_iterations": 1},
        on_event=PrintLog(out),
    )
    text = out.getvalue()
    assert "    criteria:\n      1. Names the audience\n      2. Asks for a format\n" in text
    assert "    plan: First name the audience, then the format.\n" in text
    assert "    prompt: Write a haiku about shoes for runners.\n" in text
    assert "      1. Names the audience: 9 (runners)\n" in text
    assert "    reflection: Keep the audience in the first sentence.\n" in text
    assert '{"criteria"' not in text  # readable, not the raw JSON
    quiet = io.StringIO()
    pl.run_p3ro(
        {"id": "t", "prompt": "Write about shoes.", "goal": "Make it punchy"},
        {"role_models": roles, "max_iterations": 1},
        on_event=PrintLog(quiet, outputs=False),
    )
    assert "criteria:" not in quiet.getvalue() and "model_call decomposer" in quiet.getvalue()


def test_describe_output_gives_plan_steps_tool_calls_and_other_keys_one_line_each(tmp_path: Path) -> None:
    plan = {
        "plan": [{"step_id": 1, "instruction": "get it", "tool_name": "shell", "tool_input": "python --version"}],
        "confidence": 0.9,
    }
    assert describe_output(plan) == ["plan:", "  1. step 1: shell(python --version): get it", "confidence: 0.9"]
    planning = {"title": "Sum", "tool_calls": [{"tool": "calculator", "input": {"expression": "6*7"}}]}
    assert describe_output(planning) == ["title: Sum", "tool calls:", '  1. calculator({"expression": "6*7"})']
    assert describe_output({"content": "42", "metadata": {"sources": []}}) == [
        "answer: 42",
        "metadata:",
        "  sources: (none)",
    ]
    assert describe_output({"text": "line one\nline two"}) == ["reply:", "  line one", "  line two"]
