"""Running a tool inside a loop run: events, a recorded Step, and errors kept on the run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...record import Iteration, Step
from ...tools.registry import ToolError, ToolRegistry, ToolResult
from .toolkit import cut

if TYPE_CHECKING:
    from .context import RunContext


async def run_tool_step(
    ctx: RunContext,
    tools: ToolRegistry,
    iteration: Iteration,
    name: str,
    tool_input: Any,
    *,
    phase: str = "tool",
) -> tuple[ToolResult, Step]:
    """Run one tool call as a step of `iteration`.

    Emits `tool_call` and `tool_result` events; the step's output is the ToolResult as JSON; an
    error result is also recorded as a `ToolError` on the step and in the run's errors.
    """
    ctx.emit(
        "tool_call",
        f"{name}({cut(tool_input, 120)})",
        iteration=iteration.index,
        phase=phase,
        role=name,
        tool=name,
        input=tool_input,
    )
    result = await tools.run(name, tool_input)
    return result, record_tool_result(ctx, iteration, result, phase=phase)


def record_tool_result(ctx: RunContext, iteration: Iteration, result: ToolResult, *, phase: str = "tool") -> Step:
    """Record a tool result (run here or elsewhere, e.g. a delegated task) as a step of `iteration`.

    Emits `tool_result`; an error result is also a `ToolError` on the step and in the run's errors."""
    it, name = iteration.index, result.tool
    step = Step(iteration=it, phase=phase, role=name, output=result.model_dump(mode="json"))
    if not result.ok:
        ctx.fail(step, ToolError(result.error or "tool failed"))
    ctx.emit(
        "tool_result",
        f"{name}: {result.status}: {cut(result.text if result.ok else result.error, 120)}",
        iteration=it,
        phase=phase,
        role=name,
        tool=name,
        status=result.status,
        output=result.output,
        error=result.error,
    )
    iteration.steps.append(step)
    return step
