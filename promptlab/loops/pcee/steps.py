"""One PCEE step: the controller fills its placeholders, the executor runs its tool, the evaluator judges it.

The controller pipes data as the design document's "Site Foreman": with `piping="extract"` (the default) it
asks the controller model, for each `{step_N_output}` placeholder, for the value this step needs from step N's
output (the version number from a search result, not the whole result); with `piping="paste"` it pastes step
N's whole output (no model call). A placeholder naming a step without output, or an extraction that fails,
fails the step in the controller (judge "controller", score 0.0): the tool is not run and the evaluator is not
asked. Every step that ran is judged by the evaluator, a tool error too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from ...record import Iteration, Score, Step, Task
from ...tools.registry import ToolRegistry, ToolResult
from ..runtime.context import RunContext
from ..runtime.replies import reply_config
from ..runtime.tool_steps import run_tool_step
from ..runtime.toolkit import cut
from .config import PCEEConfig
from .schemas import PlaceholderError, Plan, PlanStep, Verdict, fill_placeholders, placeholder_steps


@dataclass
class Execution:
    """One tool execution as the corrector reads it."""

    label: str
    """'step N (kind)'."""
    tool: str
    """The tool called."""
    tool_input: Any
    """Its input, placeholders filled."""
    result: ToolResult
    """What it gave back."""


@dataclass
class PCEEState:
    """The controller's memory during a run."""

    ctx: RunContext
    cfg: PCEEConfig
    tools: ToolRegistry
    task: Task
    plan: Plan
    outputs: dict[int, str] = field(default_factory=dict)
    history: list[Execution] = field(default_factory=list)
    retries_used: int = 0
    last_output: str | None = None

    def clip(self, value: Any) -> str:
        """A tool input or result as prompt text, cut to `result_chars` (None: whole)."""
        return cut(value, self.cfg.result_chars, count=True)


class Extraction(BaseModel):
    """The controller's reply: the value to put in place of one placeholder."""

    model_config = reply_config()

    value: str = Field(json_schema_extra={"maxLength": 500})
    """The exact text the step needs (the length is a generation hint)."""


async def _extract(s: PCEEState, step: PlanStep, n: int, it: Iteration) -> str | None:
    """The controller model's value for `{step_n_output}` in `step` (None when its reply is unusable)."""
    source = next((p for p in s.plan.plan if p.step_id == n), None)
    prompt = s.ctx.prompt(
        "controller",
        CONTROLLER_PROMPT,
        request=s.task.prompt,
        instruction=step.instruction,
        tool=step.tool_name,
        tool_input=json.dumps(step.tool_input, ensure_ascii=False),
        placeholder=f"{{step_{n}_output}}",
        source_instruction=source.instruction if source else "(not in the plan)",
        source_output=s.clip(s.outputs[n]),
    )
    out, _ = await s.ctx.call("controller", "control", prompt, schema=Extraction, iteration=it)
    return out.value if out is not None else None


async def control(s: PCEEState, step: PlanStep, it: Iteration) -> tuple[Any, str | None]:
    """The step's tool input with its placeholders filled, or (None, why) when the controller cannot fill it."""
    try:
        fill_placeholders(step.tool_input, s.outputs)  # every placeholder must name a step with output
    except PlaceholderError as e:
        record = Step(iteration=it.index, phase="control", role="controller", output={"tool_input": step.tool_input})
        s.ctx.fail(record, e)
        it.steps.append(record)
        return None, str(e)
    needed = sorted(placeholder_steps(step.tool_input))
    if not needed or s.cfg.piping == "paste":
        return fill_placeholders(step.tool_input, s.outputs), None
    values: dict[int, str] = {}
    for n in needed:
        value = await _extract(s, step, n, it)
        if value is None:
            return None, f"the controller could not extract {{step_{n}_output}} from step {n}'s output (see errors)"
        values[n] = value
    it.metrics["extracted"] = json.dumps({f"step_{n}_output": v for n, v in values.items()}, ensure_ascii=False)
    return fill_placeholders(step.tool_input, values), None


async def execute(
    s: PCEEState, step: PlanStep, *, kind: str, retries: int, fix_for: int | None = None
) -> tuple[Iteration, bool, str]:
    """Controller + executor + evaluator for one step: (iteration, success, reason)."""
    ctx = s.ctx
    it = ctx.new_iteration()
    it.metrics = {"step_id": step.step_id, "retries": retries, "tool": step.tool_name, "kind": kind}
    if fix_for is not None:
        it.metrics["fix_for"] = fix_for
    filled, why = await control(s, step, it)
    if why is not None:
        it.candidate = f"{step.tool_name}({cut(step.tool_input, 300, count=True)}) -> not run: {why}"
        ctx.score(it, [Score(criterion="verdict", score=0.0, judge="controller", justification=why)])
        return it, False, why
    result, _ = await run_tool_step(ctx, s.tools, it, step.tool_name, filled, phase="execute")
    if isinstance(result.output, dict) and "exit_code" in result.output:
        it.metrics["exit_code"] = result.output["exit_code"]
    it.candidate = f"{step.tool_name}({cut(filled, 300, count=True)}) -> {result.brief(600)}"
    s.history.append(Execution(f"step {step.step_id} ({kind})", step.tool_name, filled, result))
    ok, reason = await evaluate(s, step, it, filled, result)
    if ok and kind != "fix":  # fix steps have their own numbering; only plan steps feed placeholders
        s.outputs[step.step_id] = result.text if result.ok else result.brief(None)
    return it, ok, reason


async def evaluate(s: PCEEState, step: PlanStep, it: Iteration, filled: Any, result: ToolResult) -> tuple[bool, str]:
    """The evaluator's verdict on an executed step (a tool error too: the design document's supervisor inspects every
    result; the error itself stays recorded on the step and in the run's errors)."""
    ctx = s.ctx
    prompt = ctx.prompt(
        "evaluator",
        EVALUATOR_PROMPT,
        request=s.task.prompt,
        instruction=step.instruction,
        tool=step.tool_name,
        tool_input=s.clip(filled),
        result=result_text(s, result),
    )
    verdict, vstep = await ctx.call("evaluator", "evaluate", prompt, schema=Verdict, iteration=it)
    judge = s.cfg.model_for("evaluator")
    if verdict is None:
        message = vstep.error.message if vstep.error else "no evaluator output"
        ctx.score(
            it,
            [
                Score(
                    criterion="verdict", score=None, judge=judge, justification=f"evaluator output unusable: {message}"
                )
            ],
        )
        return False, f"the evaluator's verdict could not be read ({message})"
    ok = verdict.verdict == "success"
    ctx.score(it, [Score(criterion="verdict", score=1.0 if ok else 0.0, justification=verdict.reason, judge=judge)])
    if not ok and not result.ok:  # the corrector gets the error message, as the design document's correction planner
        return False, f"{verdict.reason} (tool error: {result.error})"
    return ok, verdict.reason


def result_text(s: PCEEState, result: ToolResult) -> str:
    """A tool result as the evaluator and the corrector read it (cut to `result_chars` per part, if set)."""
    if isinstance(result.output, dict) and "exit_code" in result.output:  # a shell step, failed or not
        o = result.output
        return (
            f"{'' if result.ok else 'the tool failed: '}exit code: {o['exit_code']}, timed out: {o['timed_out']}\n"
            f"stdout:\n{s.clip(o['stdout'])}\nstderr:\n{s.clip(o['stderr'])}"
        )
    if not result.ok:
        return f"the tool failed: {s.clip(result.error or '')}"
    return s.clip(result.text)


def history_text(s: PCEEState) -> str:
    """The executions shown to the corrector: all of them (or the last `correction_history`), uncut unless
    `result_chars` is set."""
    shown = s.history if s.cfg.correction_history is None else s.history[len(s.history) - s.cfg.correction_history :]
    if s.cfg.correction_history == 0:
        shown = []
    blocks = [f"{e.label} {e.tool}({s.clip(e.tool_input)}) ->\n{result_text(s, e.result)}" for e in shown]
    return "\n\n".join(blocks) or "(nothing run yet)"


# Role prompts (override with config.prompts[role]; fields as in each template) ----------------------
CONTROLLER_PROMPT = """You prepare the input of one step of a plan. The step's input holds the placeholder \
{placeholder}, which stands for something taken from an earlier step's output. Give exactly the text that \
belongs in its place (a version number, a file name, a value, a passage), nothing around it.

Overall request: {request}
This step's instruction: {instruction}
This step's tool: {tool}
This step's input: {tool_input}

The earlier step's instruction: {source_instruction}
The earlier step's output:
{source_output}

Reply with a JSON object: "value" (the text that replaces {placeholder})."""

EVALUATOR_PROMPT = """Check whether one step of a plan achieved what it was meant to.

Overall request: {request}
Step instruction: {instruction}
Tool: {tool}
Tool input: {tool_input}
Tool result:
{result}

Judge only this step against its instruction (a non-zero exit code or an error message usually means \
failure). Reply with a JSON object: "verdict" ("success" or "failure") and "reason" (one sentence)."""


__all__ = [
    "CONTROLLER_PROMPT",
    "EVALUATOR_PROMPT",
    "Execution",
    "Extraction",
    "PCEEState",
    "control",
    "evaluate",
    "execute",
    "history_text",
    "result_text",
]
