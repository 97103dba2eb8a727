"""PCEE: Planner, Controller, Executor, Evaluator, with a self-correction sub-loop, in a workspace.

More in docs/loops.md, section "promptlab.loops.pcee.loop".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...record import Iteration, Run, Task
from ...tools.builtin import ToolEnv, build_tools
from ...tools.workspace import Workspace
from ..runtime.budget import last_step_cost
from ..runtime.context import RunContext
from ..runtime.define import define_loop
from .config import PCEEConfig
from .router import Progress, route
from .schemas import PlanStep, plan_schemas
from .steps import PCEEState, execute, history_text


def _progress(s: PCEEState, **verdict: Any) -> Progress:
    """The router's view of the run now (the budget asked about an execution like the last one) and `verdict`."""
    budget = s.ctx.budget_stop(*last_step_cost(s.ctx))
    return Progress(executions=len(s.ctx.run.iterations), budget=budget, retries_used=s.retries_used, **verdict)


def _stop_before(s: PCEEState) -> str | None:
    """The stop reason when the next execution must not start (the last execution is re-decided as a stop)."""
    decision = route(_progress(s), s.cfg)
    if decision.stops and s.ctx.run.iterations:
        s.ctx.decide(s.ctx.run.iterations[-1], decision.action, decision.reason)
    return decision.stop_reason


async def _correct(s: PCEEState, step: PlanStep, failed: Iteration, reason: str) -> tuple[bool, Iteration, str]:
    """Ask for a fix plan and run it: (every fix step succeeded, the last iteration, why not).

    The fix plan's steps run until one fails (the rest is skipped) or the execution cap is reached."""
    ctx = s.ctx
    entry: dict[str, Any] = {"step_id": step.step_id, "attempt": s.retries_used, "reason": reason}
    ctx.run.info["corrections"].append(entry)
    prompt = ctx.prompt(
        "corrector",
        CORRECTOR_PROMPT,
        request=s.task.prompt,
        tools=s.tools.describe(),
        plan=json.dumps(s.plan.model_dump(mode="json")["plan"], indent=1),
        step=json.dumps(step.model_dump(mode="json")),
        reason=reason,
        history=history_text(s),
    )
    # a later correction of the same failure would repeat this prompt: ask for a fresh draw
    fix, fstep = await ctx.call(
        "corrector",
        "correct",
        prompt,
        schema=plan_schemas(s.tools)[1],
        iteration=failed,
        sample_offset=s.retries_used - 1,
    )
    if fix is None:
        entry["error"] = fstep.error.message if fstep.error else "no fix plan"
        entry["succeeded"] = False
        return False, failed, f"the corrector's fix plan could not be read ({entry['error']})"
    entry["fix_plan"] = fix.model_dump(mode="json")["plan"]
    last = failed
    for fix_step in fix.plan:
        if route(_progress(s), s.cfg).stops:
            break
        last, ok, why = await execute(s, fix_step, kind="fix", retries=s.retries_used, fix_for=step.step_id)
        if not ok:
            entry["succeeded"] = False
            return False, last, f"fix step {fix_step.step_id} failed ({why}); the rest of the fix plan is skipped"
        decision = route(_progress(s, ok=True, step_id=fix_step.step_id, reason=f"fix step succeeded: {why}"), s.cfg)
        ctx.decide(last, decision.action, decision.reason)
    entry["succeeded"] = len(ctx.run.iterations) < s.cfg.execution_cap
    return entry["succeeded"], last, "" if entry["succeeded"] else "the fix plan could not finish within max_iterations"


def _record_failed_step(s: PCEEState, step: PlanStep, it: Iteration, reason: str) -> None:
    """`info['failed_step']`: which step failed for good, and why."""
    s.ctx.run.info["failed_step"] = {
        "step_id": step.step_id,
        "instruction": step.instruction,
        "tool": step.tool_name,
        "reason": reason,
        "iteration": it.index,
    }


async def _recover(s: PCEEState, step: PlanStep, it: Iteration, reason: str) -> str | None:
    """Corrections after a failed step until one succeeds (None: retry the step) or the router stops the run."""
    failed_correction: str | None = None
    while True:
        verdict = _progress(s, ok=False, step_id=step.step_id, reason=reason, correction_failed=failed_correction)
        decision = route(verdict, s.cfg)
        s.ctx.decide(it, decision.action, decision.reason)
        if decision.stop_reason == "failed_step":
            _record_failed_step(s, step, it, reason)
        if decision.stop_reason is not None:
            return decision.stop_reason
        s.retries_used += 1
        ok, it, failed_correction = await _correct(s, step, it, reason)
        if ok:
            return None
        reason = f"{reason}; correction {s.retries_used} failed: {failed_correction}"


async def _run_plan(s: PCEEState) -> str:
    """Execute the plan with corrections; returns the router's stop reason."""
    steps = s.plan.plan
    for pos, step in enumerate(steps):
        retries = 0
        while True:
            stop = _stop_before(s)
            if stop is not None:
                return stop
            it, ok, reason = await execute(s, step, kind="retry" if retries else "plan", retries=retries)
            if ok:
                s.last_output = s.outputs[step.step_id]
                done = dict(ok=True, step_id=step.step_id, reason=reason, last_step=pos == len(steps) - 1)
                decision = route(_progress(s, **done, plan_steps=len(steps)), s.cfg)
                s.ctx.decide(it, decision.action, decision.reason)
                if decision.stop_reason is not None:
                    return decision.stop_reason
                break
            stop = await _recover(s, step, it, reason)
            if stop is not None:
                return stop
            retries += 1
    return "plan_complete"


@define_loop(
    "pcee",
    PCEEConfig,
    "Planner-Controller-Executor-Evaluator: a JSON plan with placeholder piping, run step by step in a workspace, "
    "with self-correction",
)
async def arun_pcee(ctx: RunContext, task: Task, cfg: PCEEConfig) -> Run:
    """Run PCEE once (the task's prompt is the request, its goal optional guidance): plan, then execute,
    evaluate and correct step by step in a fresh workspace.

    Returns:
        The Run: `final_output` is the output of the last plan step that succeeded; `stop_reason`
        'plan_complete', 'failed_step', 'max_iterations', 'budget' or 'error' (no plan); see the module.
    """
    ws = Workspace.claim(
        cfg.workspace_base,
        ctx.run.run_id,
        shell_timeout_s=cfg.shell_timeout_s,
        output_cap=cfg.output_cap,
        unsafe_shell=cfg.unsafe_shell,
    )
    tools = build_tools(cfg.tools, ToolEnv(Path(cfg.docs_dir) if cfg.docs_dir else None, ws))
    ctx.run.info.update(
        workspace=str(ws.root),
        plan=None,
        corrections=[],
        retries_used=0,
        unsafe_shell=cfg.unsafe_shell,
        shell_sandbox=ws.shell_mode,
    )
    ctx.emit("run_started", f"PCEE: {task.prompt[:80]}", workspace=str(ws.root))
    guidance = f"What a good result achieves: {task.goal}\n" if task.goal.strip() else ""
    prompt = ctx.prompt("planner", PLANNER_PROMPT, request=task.prompt, guidance=guidance, tools=tools.describe())
    plan, _ = await ctx.call("planner", "plan", prompt, schema=plan_schemas(tools)[0])
    if plan is None:
        return ctx.finish("error", None)
    ctx.run.info["plan"] = plan.model_dump(mode="json")["plan"]
    state = PCEEState(ctx=ctx, cfg=cfg, tools=tools, task=task, plan=plan)
    stop_reason = await _run_plan(state)
    ctx.run.info["retries_used"] = state.retries_used
    return ctx.finish(stop_reason, state.last_output)


run_pcee = arun_pcee.sync


PLANNER_PROMPT = """Break the request below into a plan of tool calls, run one after another in a \
private workspace folder.

Request:
{request}
{guidance}
Tools:
{tools}

Reply with a JSON object {{"plan": [...]}}, each step an object with:
- "step_id": 1, 2, 3, ... in order;
- "instruction": what the step must achieve, concrete enough to check;
- "tool_name": one of the tools above;
- "tool_input": the tool's input object (or a bare string for tools that take one).
A later step can use an earlier step's output by writing {{step_N_output}} (N = that step's step_id) \
inside its tool_input; it is replaced by that output's text before the step runs. Keep the plan as \
short as the request allows. File paths are relative to the workspace."""

CORRECTOR_PROMPT = """A step of a plan failed. Write a short fix plan that repairs the cause, so the \
failed step can then be run again unchanged.

Overall request: {request}

Tools:
{tools}

The plan:
{plan}

Failed step: {step}
Why it failed: {reason}

Executions so far:
{history}

Reply with a JSON object {{"plan": [...]}} of 1 to 3 steps, each with "step_id", "instruction", \
"tool_name" and "tool_input" (an object, or a bare string for tools that take one). Fix steps may use \
{{step_N_output}} placeholders for outputs of the plan's steps that succeeded."""


__all__ = ["CORRECTOR_PROMPT", "PLANNER_PROMPT", "arun_pcee", "run_pcee"]
