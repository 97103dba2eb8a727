"""Model and tool output are hostile: terminal controls are stripped and secrets redacted before a record, a
prompt or a terminal (promptlab.sanitize, applied by RunContext, ToolRegistry and PrintLog)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import promptlab as pl
from promptlab.events import PrintLog
from promptlab.loops.pcee.loop import PCEEConfig, run_pcee
from promptlab.sanitize import Cleaner, clean, clean_model, redact, strip_controls
from promptlab.tools.sandbox import sandbox_problem

SECRET = "sk-test-" + "Zq8rW2mN" * 4
ESCAPES = [
    "\x1b[2J\x1b[H",
    "\x1b]0;pwned title\x07",
    "\x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\x07",
    "\x1b[31m",
    "\x1bP1$qm\x1b\\",
    "\x9b2J",
    "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
    "\x08\x08\x07",
]
"""Clear screen + home, window title, OSC 52 clipboard write, colour, DCS, 8-bit CSI, OSC 8 link, BS and BEL."""
HOSTILE = "before " + "".join(ESCAPES) + f" key={SECRET} after"


def no_controls(text: str) -> bool:
    return not any(ord(c) < 32 and c not in "\t\n\r" or 0x7F <= ord(c) <= 0x9F for c in text)


@pytest.mark.parametrize("seq", ESCAPES)
def test_each_terminal_sequence_is_stripped_and_text_kept(seq: str) -> None:
    out = strip_controls(f"a{seq}b\tc\nd")
    assert no_controls(out) and out.startswith("a") and out.endswith("b\tc\nd") and "pwned" not in out


def test_clean_walks_json_like_values_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    got = clean({"k\x1b[1m": [HOSTILE, 3, None, ("\x07x",)]})
    assert got == {"k": ["before link key=[REDACTED:OPENAI_API_KEY] after", 3, None, ("x",)]}
    assert redact("plain text") == "plain text" and strip_controls("é 中 ü") == "é 中 ü"


def test_a_cleaner_redacts_the_secrets_of_the_environment_it_was_made_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run makes one Cleaner as it starts (its records and events redact what the environment held then);
    `clean` reads the environment on every call."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    before = Cleaner()
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert before(f"key={SECRET}\x1b[2J") == f"key={SECRET}"  # controls stripped; the secret came later
    assert clean(f"key={SECRET}") == Cleaner()(f"key={SECRET}") == "key=[REDACTED:OPENAI_API_KEY]"
    task = pl.Task(id="t", prompt=HOSTILE, goal=f"goal {SECRET}")
    assert clean_model(task, skip=frozenset({"goal"})).prompt == "before link key=[REDACTED:OPENAI_API_KEY] after"
    assert task.goal == f"goal {SECRET}"  # a skipped field is left as it was


@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
def test_a_pcee_run_keeps_no_escape_nor_model_written_secret_in_record_prompt_or_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner writes escapes and the secret into its plan; the command prints escapes; nothing of it
    reaches the Run (plan, steps, info, final output), the evaluator's prompts or PrintLog's output."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    seen: list[str] = []

    def judge(messages: list[dict[str, Any]]) -> str:
        seen.append(json.dumps(messages, ensure_ascii=False))
        return json.dumps({"verdict": "success", "reason": "ok"})

    command = r"printf 'out\033]52;c;ZXZpbA==\007\033[2Jdone'"
    step = {"step_id": 1, "instruction": f"run it {HOSTILE}", "tool_name": "shell", "tool_input": command}
    planner = pl.scripted("san-planner", [json.dumps({"plan": [step]})])
    evaluator = pl.scripted("san-eval", respond=judge)
    printed = io.StringIO()
    run = run_pcee(
        "Run the command",
        PCEEConfig(model=planner.name, role_models={"evaluator": evaluator.name}, workspace_base=str(tmp_path / "w")),
        cache=False,
        on_event=PrintLog(printed, tokens=True),
    )
    assert run.stop_reason == "plan_complete" and run.final_output == "outdone"
    record = run.model_dump_json()
    assert no_controls(json.loads(json.dumps(run.model_dump(mode="json"))).__repr__())
    assert "\\u001b" not in record and "\\u0007" not in record and "\\u009b" not in record
    assert SECRET not in record and "[REDACTED:OPENAI_API_KEY]" in json.dumps(run.info)
    plan_text = json.dumps(run.info, ensure_ascii=False)
    assert "run it before" in plan_text and "pwned" not in plan_text
    assert seen and all(no_controls(json.loads(s)[-1]["content"]) and SECRET not in s for s in seen)
    assert printed.getvalue() and no_controls(printed.getvalue()) and SECRET not in printed.getvalue()


def test_printlog_strips_controls_from_any_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    out = io.StringIO()
    PrintLog(out)(pl.Event(kind="observation", run_id="r", loop="x", message=HOSTILE))
    assert no_controls(out.getvalue()) and SECRET not in out.getvalue() and "before" in out.getvalue()
