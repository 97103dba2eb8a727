"""PCEE: Planner, Controller, Executor, Evaluator, with a self-correction sub-loop, in a workspace.

The planner writes a JSON plan of steps {step_id, instruction, tool_name, tool_input}; a tool_input
may hold `{step_N_output}` placeholders. The controller (plain Python, `fill_placeholders`) fills them
from earlier steps' outputs; the executor runs the step's tool in the run's workspace; the evaluator
model judges the step "success" or "failure" against its instruction.

Routing on a failure: while corrections remain in `retry_budget` (per run), the corrector writes a
fix plan of 1-3 steps, its steps run (each executed and evaluated, the rest of the fix plan skipped
after a failing one), and the failed step is retried. With the budget spent the run stops with
"failed_step" (`info["failed_step"]` says which). All steps succeeding gives "plan_complete";
`max_iterations` caps the tool executions of the run (plan steps, retries and fix steps together) and
stops it with "max_iterations"; a planner call that fails gives "error".

Each execution is an Iteration: candidate = "tool(input) -> output", scores = [Score("verdict", 1.0 on
success / 0.0 on failure, reason)], average = that score, metrics {"step_id", "retries", "tool",
"kind" (plan | retry | fix), "fix_for", "exit_code" for shell}, decision next_step | correct | stop.
A step whose tool errs (unknown tool, bad input, path outside the workspace) or whose placeholder
names a step without output fails with a 0.0 verdict from the controller (judge "controller"), without
an evaluator call. When the evaluator's reply cannot be parsed the score is missing (None, the error
recorded) and the step is routed as a failure. `final_output` is the output (as text) of the last plan
step that succeeded; `info` holds "workspace", "plan", "corrections", "retries_used", "unsafe_shell" and
"shell_sandbox" (bubblewrap, unsafe or refused).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from ..call import CacheArg, Settings
from ..errors import PromptlabError
from ..events import EventHandler
from ..record import Iteration, Run, Score, Step, Task
from ..tools import ToolEnv, ToolRegistry, ToolResult, build_tools, check_tool_names, run_tool_step
from ..workspace import Workspace
from ._base import LoopConfig, LoopSpec, RunContext, as_config, as_task, register_loop, run_sync

_PLACEHOLDER = re.compile(r"\{step_(\d+)_output\}")


class PCEEConfig(LoopConfig):
    """Settings of a PCEE run."""

    ROLES: ClassVar[tuple[str, ...]] = ("planner", "corrector", "evaluator")
    CRITIC_ROLES: ClassVar[frozenset[str]] = frozenset({"evaluator"})

    max_iterations: int = Field(8, ge=1, le=100)
    """Most tool executions in the run: plan steps, retries and fix steps together."""
    retry_budget: int = Field(2, ge=0, le=20)
    """Corrections (fix plan + retry of the failed step) allowed per run."""
    tools: list[str] = Field(
        default_factory=lambda: ["write_file", "read_file", "list_files", "shell", "search", "calculator"])
    """Tools the plan may use, by name."""
    shell_timeout_s: float = Field(10.0, gt=0)
    """Wall-clock limit of a shell command (the whole sandbox is killed past it)."""
    output_cap: int = Field(8192, ge=256)
    """Most bytes kept of a shell command's stdout and stderr (and characters of a file read)."""
    unsafe_shell: bool = False
    """Where bubblewrap is missing, run shell commands unsandboxed instead of refusing them (recorded in
    `Run.info["unsafe_shell"]`)."""
    workspace_base: str | None = None
    """Parent folder of run workspaces (None: .promptlab/workspaces); the run's is <base>/<run_id>."""
    docs_dir: str | None = None
    """Folder the search tool searches (None: the repository's data/docs)."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        return check_tool_names(v)


class PlanStep(BaseModel):
    """One step of a plan."""

    model_config = ConfigDict(extra="forbid")

    step_id: int = Field(ge=1)
    """The step's number (placeholders name it as {step_N_output})."""
    instruction: str = Field(max_length=300)
    """What the step must achieve (the evaluator judges against it)."""
    tool_name: str
    """The tool that carries it out."""
    tool_input: str | dict[str, Any]
    """The tool's input (an object, or a bare string); may hold {step_N_output} placeholders."""


class Plan(BaseModel):
    """The planner's plan."""

    model_config = ConfigDict(extra="forbid")

    plan: list[PlanStep] = Field(min_length=1, max_length=12)
    """Steps in execution order."""

    @model_validator(mode="after")
    def _unique_ids(self) -> Plan:
        ids = [s.step_id for s in self.plan]
        if len(ids) != len(set(ids)):
            raise ValueError(f"step_id values must be unique, got {ids}")
        return self


class FixPlan(BaseModel):
    """The corrector's short plan to repair a failed step before it is retried."""

    model_config = ConfigDict(extra="forbid")

    plan: list[PlanStep] = Field(min_length=1, max_length=3)
    """One to three steps."""


def plan_schemas(tools: ToolRegistry) -> tuple[type[Plan], type[FixPlan]]:
    """Plan and FixPlan whose JSON schemas only offer steps that call one of `tools` with a valid input.

    Only the schema is narrowed (a constrained decoder or a schema-following provider keeps to it);
    validation accepts any step, and an unknown tool or a bad input is a step failure when it runs.
    """
    return _plan_schemas(json.dumps(tools.call_schemas("tool_name", "tool_input")))


@lru_cache(maxsize=64)
def _plan_schemas(branches_json: str) -> tuple[type[Plan], type[FixPlan]]:
    head = {k: v for k, v in PlanStep.model_json_schema()["properties"].items() if k in ("step_id", "instruction")}
    branches = []
    for b in json.loads(branches_json):
        # the tool's name right after step_id: a constrained decoder then follows one branch only
        props = {"step_id": head["step_id"], "tool_name": b["properties"]["tool_name"],
                 "instruction": head["instruction"], "tool_input": b["properties"]["tool_input"]}
        branches.append({**b, "properties": props, "required": list(props)})

    def known_steps(schema: dict[str, Any]) -> None:
        schema.clear()
        schema["anyOf"] = branches

    class Step(PlanStep):
        model_config = ConfigDict(extra="forbid", json_schema_extra=known_steps)

    plan = create_model("Plan", __base__=Plan, plan=(list[Step], Field(min_length=1, max_length=12)))
    fix = create_model("FixPlan", __base__=FixPlan, plan=(list[Step], Field(min_length=1, max_length=3)))
    return plan, fix


class Verdict(BaseModel):
    """The evaluator's judgement of one executed step."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["success", "failure"]
    """Whether the step achieved its instruction."""
    reason: str = Field(max_length=300)
    """Why."""


class PlaceholderError(PromptlabError, KeyError):
    """A `{step_N_output}` placeholder names a step that has no output."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def fill_placeholders(tool_input: Any, outputs: dict[int, str]) -> Any:
    """`tool_input` with every `{step_N_output}` replaced by step N's output (in strings, dicts, lists).

    Other braces are left alone. A pure function: the input is not changed.

    Raises:
        PlaceholderError: a placeholder names a step with no output; the message names it.
    """
    if isinstance(tool_input, str):
        def sub(m: re.Match[str]) -> str:
            n = int(m.group(1))
            if n not in outputs:
                have = ", ".join(str(k) for k in sorted(outputs)) or "none"
                raise PlaceholderError(f"placeholder {m.group(0)} refers to step {n}, which has no output "
                                       f"(steps with output: {have})")
            return outputs[n]
        return _PLACEHOLDER.sub(sub, tool_input)
    if isinstance(tool_input, dict):
        return {k: fill_placeholders(v, outputs) for k, v in tool_input.items()}
    if isinstance(tool_input, list):
        return [fill_placeholders(v, outputs) for v in tool_input]
    return tool_input


@dataclass
class _State:
    """The controller's memory during a run."""

    ctx: RunContext
    cfg: PCEEConfig
    tools: ToolRegistry
    task: Task
    plan: Plan
    outputs: dict[int, str] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)
    retries_used: int = 0
    last_output: str | None = None


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


async def _execute(s: _State, step: PlanStep, *, kind: str, retries: int,
                   fix_for: int | None = None) -> tuple[Iteration, bool, str]:
    """Controller + executor + evaluator for one step: (iteration, success, reason)."""
    ctx = s.ctx
    it = ctx.new_iteration()
    it.metrics = {"step_id": step.step_id, "retries": retries, "tool": step.tool_name, "kind": kind}
    if fix_for is not None:
        it.metrics["fix_for"] = fix_for
    controller = Score(criterion="verdict", score=0.0, judge="controller")
    try:
        filled = fill_placeholders(step.tool_input, s.outputs)
    except PlaceholderError as e:
        record = Step(iteration=it.index, phase="control", role="controller", output={"tool_input": step.tool_input})
        ctx.fail(record, e)
        it.steps.append(record)
        it.candidate = f"{step.tool_name}({_short(step.tool_input)}) -> not run: {e}"
        ctx.score(it, [controller.model_copy(update={"justification": str(e)})])
        return it, False, str(e)
    result, _ = await run_tool_step(ctx, s.tools, it, step.tool_name, filled, phase="execute")
    if isinstance(result.output, dict) and "exit_code" in result.output:
        it.metrics["exit_code"] = result.output["exit_code"]
    it.candidate = f"{step.tool_name}({_short(filled)}) -> {result.brief(600)}"
    s.history.append(f"step {step.step_id} ({kind}) {it.candidate}")
    if not result.ok:
        reason = f"tool error: {result.error}"
        ctx.score(it, [controller.model_copy(update={"justification": reason})])
        return it, False, reason
    prompt = ctx.prompt("evaluator", EVALUATOR_PROMPT, request=s.task.prompt, instruction=step.instruction,
                        tool=step.tool_name, tool_input=_short(filled, 2000), result=_result_text(result))
    verdict, vstep = await ctx.call("evaluator", "evaluate", prompt, schema=Verdict, iteration=it)
    judge = s.cfg.model_for("evaluator")
    if verdict is None:
        message = vstep.error.message if vstep.error else "no evaluator output"
        ctx.score(it, [Score(criterion="verdict", score=None, judge=judge,
                             justification=f"evaluator output unusable: {message}")])
        return it, False, f"the evaluator's verdict could not be read ({message})"
    ok = verdict.verdict == "success"
    ctx.score(it, [Score(criterion="verdict", score=1.0 if ok else 0.0, justification=verdict.reason, judge=judge)])
    if ok and kind != "fix":  # fix steps have their own numbering; only plan steps feed placeholders
        s.outputs[step.step_id] = result.text
    return it, ok, verdict.reason


def _result_text(result: ToolResult) -> str:
    if isinstance(result.output, dict) and "exit_code" in result.output:
        o = result.output
        return (f"exit code: {o['exit_code']}, timed out: {o['timed_out']}\nstdout:\n{_short(o['stdout'], 2000)}\n"
                f"stderr:\n{_short(o['stderr'], 1000)}")
    return _short(result.text, 3000)


def _cap_reached(s: _State) -> bool:
    """True (after re-deciding the last iteration as a stop) when max_iterations executions are done."""
    its = s.ctx.run.iterations
    if len(its) < s.cfg.max_iterations:
        return False
    s.ctx.decide(its[-1], "stop", f"max_iterations ({s.cfg.max_iterations}) tool executions reached")
    return True


async def _correct(s: _State, step: PlanStep, failed: Iteration, reason: str) -> str | None:
    """Ask for a fix plan and run it; returns a stop reason if the run must stop, else None."""
    ctx = s.ctx
    entry: dict[str, Any] = {"step_id": step.step_id, "attempt": s.retries_used, "reason": reason}
    ctx.run.info["corrections"].append(entry)
    prompt = ctx.prompt("corrector", CORRECTOR_PROMPT, request=s.task.prompt, tools=s.tools.describe(),
                        plan=json.dumps(s.plan.model_dump(mode="json")["plan"], indent=1),
                        step=json.dumps(step.model_dump(mode="json")), reason=reason,
                        history="\n".join(s.history[-8:]) or "(nothing run yet)")
    fix, fstep = await ctx.call("corrector", "correct", prompt, schema=plan_schemas(s.tools)[1],
                                iteration=failed)
    if fix is None:
        entry["error"] = fstep.error.message if fstep.error else "no fix plan"
        return None
    entry["fix_plan"] = fix.model_dump(mode="json")["plan"]
    for fix_step in fix.plan:
        if _cap_reached(s):
            return "max_iterations"
        it, ok, why = await _execute(s, fix_step, kind="fix", retries=s.retries_used, fix_for=step.step_id)
        if not ok:
            ctx.decide(it, "next_step", f"fix step failed ({why}); skipping the rest of the fix plan, "
                                        f"retrying step {step.step_id}")
            return None
        ctx.decide(it, "next_step", f"fix step succeeded: {why}")
    return None


async def _run_plan(s: _State) -> str:
    """Execute the plan with corrections; returns the stop reason."""
    ctx, steps = s.ctx, s.plan.plan
    for pos, step in enumerate(steps):
        retries = 0
        while True:
            if _cap_reached(s):
                return "max_iterations"
            it, ok, reason = await _execute(s, step, kind="retry" if retries else "plan", retries=retries)
            if ok:
                s.last_output = s.outputs[step.step_id]
                if pos == len(steps) - 1:
                    ctx.decide(it, "stop", f"all {len(steps)} plan steps succeeded")
                    return "plan_complete"
                ctx.decide(it, "next_step", reason)
                break
            if s.retries_used >= s.cfg.retry_budget:
                ctx.decide(it, "stop", f"step {step.step_id} failed ({reason}) and the retry budget "
                                       f"({s.cfg.retry_budget}) is spent")
                ctx.run.info["failed_step"] = {"step_id": step.step_id, "instruction": step.instruction,
                                               "tool": step.tool_name, "reason": reason, "iteration": it.index}
                return "failed_step"
            s.retries_used += 1
            retries += 1
            ctx.decide(it, "correct", f"step {step.step_id} failed ({reason}); correction {s.retries_used} of "
                                      f"{s.cfg.retry_budget}")
            stop = await _correct(s, step, it, reason)
            if stop is not None:
                return stop
    return "plan_complete"


async def arun_pcee(task: Task | str | dict[str, Any], config: PCEEConfig | dict[str, Any] | None = None, *,
                    sample: int = 0, on_event: EventHandler | None = None, cache: CacheArg = None,
                    settings: Settings | None = None) -> Run:
    """Run PCEE once: plan, then execute, evaluate and correct step by step in a fresh workspace.

    Args:
        task: a Task, a dict of its fields, or the request as a string (goal: optional guidance).
        config: a PCEEConfig, a dict of its fields, or None for the defaults.
        sample: replicate index (the cache's sample index).
        on_event: a callback receiving every Event.
        cache: None for the default cache, False for none, or a directory.
        settings: call settings (retries, timeouts, concurrency).
    """
    task, cfg = as_task(task), as_config(PCEEConfig, config)
    ctx = RunContext("pcee", task, cfg, sample=sample, on_event=on_event, cache=cache, settings=settings)
    ws = Workspace.for_run(cfg.workspace_base, ctx.run.run_id, shell_timeout_s=cfg.shell_timeout_s,
                           output_cap=cfg.output_cap, unsafe_shell=cfg.unsafe_shell)
    tools = build_tools(cfg.tools, ToolEnv(Path(cfg.docs_dir) if cfg.docs_dir else None, ws))
    ctx.run.info.update(workspace=str(ws.root), plan=None, corrections=[], retries_used=0,
                        unsafe_shell=cfg.unsafe_shell, shell_sandbox=ws.shell_mode)
    ctx.emit("run_started", f"PCEE: {task.prompt[:80]}", workspace=str(ws.root))
    guidance = f"What a good result achieves: {task.goal}\n" if task.goal.strip() else ""
    prompt = ctx.prompt("planner", PLANNER_PROMPT, request=task.prompt, guidance=guidance, tools=tools.describe())
    plan, _ = await ctx.call("planner", "plan", prompt, schema=plan_schemas(tools)[0])
    if plan is None:
        return ctx.finish("error", None)
    ctx.run.info["plan"] = plan.model_dump(mode="json")["plan"]
    state = _State(ctx=ctx, cfg=cfg, tools=tools, task=task, plan=plan)
    stop_reason = await _run_plan(state)
    ctx.run.info["retries_used"] = state.retries_used
    return ctx.finish(stop_reason, state.last_output)


def run_pcee(task: Task | str | dict[str, Any], config: PCEEConfig | dict[str, Any] | None = None,
             **kwargs: Any) -> Run:
    """Sync twin of `arun_pcee`."""
    return run_sync(arun_pcee(task, config, **kwargs))


register_loop(LoopSpec("pcee", PCEEConfig, arun_pcee, "Planner-Controller-Executor-Evaluator: a JSON plan with "
                       "placeholder piping, run step by step in a workspace, with self-correction"))


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

EVALUATOR_PROMPT = """Check whether one step of a plan achieved what it was meant to.

Overall request: {request}
Step instruction: {instruction}
Tool: {tool}
Tool input: {tool_input}
Tool result:
{result}

Judge only this step against its instruction (a non-zero exit code or an error message usually means \
failure). Reply with a JSON object: "verdict" ("success" or "failure") and "reason" (one sentence)."""

CORRECTOR_PROMPT = """A step of a plan failed. Write a short fix plan that repairs the cause, so the \
failed step can then be run again unchanged.

Overall request: {request}

Tools:
{tools}

The plan:
{plan}

Failed step: {step}
Why it failed: {reason}

Recent executions:
{history}

Reply with a JSON object {{"plan": [...]}} of 1 to 3 steps, each with "step_id", "instruction", \
"tool_name" and "tool_input" (an object, or a bare string for tools that take one). Fix steps may use \
{{step_N_output}} placeholders for outputs of the plan's steps that succeeded."""
