"""One run of a PES agent, phase by phase: plan and execute (delegations, then local tools), synthesize,
judge and finalize. Each phase is a function of the `Turn` that `PESAgent` opens; see `promptlab.loops.pes`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ...record import Iteration, Score, Task
from ...tools.registry import ToolError, ToolRegistry, ToolResult
from ..runtime.budget import BUDGET, last_step_cost
from ..runtime.context import RunContext
from ..runtime.decision import Decision
from ..runtime.tool_steps import record_tool_result, run_tool_step
from .a2a import DEFAULT_A2A_DIR, A2ATask, A2ATaskRepository, AgentDirectory, delegate_all
from .config import PESConfig, ThreadState
from .observe import ObservationType, Observer
from .router import Action, route
from .schemas import JudgeGrade, PlanningOutput, SynthesisOutput, planning_schema


@dataclass
class Turn:
    """What one run of a PES agent works with (the phases below are functions of it)."""

    ctx: RunContext
    cfg: PESConfig
    task: Task
    thread_id: str
    state: ThreadState
    tools: ToolRegistry
    systems: dict[str, str]
    history: list[dict[str, str]]
    observe: Observer
    depth: int
    agent: str
    directory: AgentDirectory | None
    rounds: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    a2a: list[A2ATask] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        return dict(
            query=self.task.prompt,
            guidance=guidance(self.task.goal),
            history=history_text(self.history),
            tools=self.tools.describe(),
            max_iterations=self.cfg.max_iterations,
        )


async def plan_and_execute(turn: Turn) -> str:
    """The ReAct-like loop; returns why it ended (no_tool_calls, max_iterations, error: the router's,
    `promptlab.loops.pes.router.route`; budget: the budget's). A step of the budget is one planning round with
    its tool calls, expected to cost what the last one did."""
    ctx, cfg = turn.ctx, turn.cfg
    schema = planning_schema(turn.tools)
    while True:
        if ctx.budget_stop(*last_step_cost(ctx)):
            return BUDGET  # the synthesis still answers from what was gathered
        it = ctx.new_iteration()
        prompt = ctx.prompt(
            "planner",
            PLANNER_PROMPT,
            **turn.fields(),
            iteration=it.index,
            delegation=delegation_context(turn),
            steps="\n".join(turn.rounds) or "(none yet: this is the first round)",
        )
        plan = await stream_call(turn, "planning", it, "planner", "plan", prompt, schema)
        decision = route(it.index, None, 0, cfg.max_iterations) if plan is None else await run_round(turn, it, plan)
        ctx.decide(it, decision.action, decision.reason)
        if decision.stop_reason is not None:
            return decision.stop_reason


async def run_round(turn: Turn, it: Iteration, plan: PlanningOutput) -> Decision[Action]:
    """One planned round: observe the plan, run its tool calls, record them, and ask the router what next."""
    it.candidate = plan.plan
    for kind, value in (
        (ObservationType.TITLE, plan.title),
        (ObservationType.INTENT, plan.intent),
        (ObservationType.PLAN, plan.plan),
        (ObservationType.THOUGHTS, plan.thoughts),
    ):
        turn.observe(kind, value, it.index)
    turn.state.title = plan.title or turn.state.title
    results, tasks = await execute_round(turn, it, plan)
    ok = sum(r.ok for r in results)
    it.metrics = {"tool_calls": len(results), "tool_successes": ok, "tool_errors": len(results) - ok}
    turn.rounds.append(round_text(it.index, plan, results, turn.cfg.result_chars))
    turn.steps.append(execution_step(turn, it, plan, results, tasks))
    if results:
        turn.ctx.score(it, [], average=round(10 * ok / len(results), 4))
    return route(it.index, len(results), ok, turn.cfg.max_iterations)


async def stream_call(
    turn: Turn, stage: str, it: Iteration | None, role: str, phase: str, prompt: str, schema: type[BaseModel]
) -> Any:
    """A planning or synthesis call framed by the LLM_STREAM_* observations (None if it failed)."""
    ctx, index = turn.ctx, it.index if it is not None else None
    model = turn.cfg.model_for(role)
    turn.observe(ObservationType.LLM_STREAM_START, {"stage": stage, "model": model}, index)
    out, step = await ctx.call(
        role,
        phase,
        prompt,
        schema=schema,
        iteration=it,
        system=turn.systems[stage],
        token_type=stage,
        keep_raw=stage == "planning",
    )
    if out is None:
        message = step.error.message if step.error else f"no {stage} output"
        turn.observe(ObservationType.LLM_STREAM_ERROR, {"stage": stage, "message": message}, index)
        turn.observe(ObservationType.ERROR, {"phase": phase, "message": message}, index)
        return None
    call = step.call
    turn.observe(
        ObservationType.LLM_STREAM_METADATA,
        {
            "stage": stage,
            "model": model,
            "input_tokens": call.input_tokens if call else None,
            "output_tokens": call.output_tokens if call else None,
        },
        index,
    )
    turn.observe(ObservationType.LLM_STREAM_END, {"stage": stage}, index)
    return out


async def execute_round(turn: Turn, it: Iteration, plan: PlanningOutput) -> tuple[list[ToolResult], list[A2ATask]]:
    """The round's delegations (started together, then awaited), then its local tools; results in plan order."""
    ctx = turn.ctx
    for call in plan.tool_calls:
        turn.observe(ObservationType.TOOL_CALL, call.model_dump(mode="json"), it.index)
    results: dict[int, ToolResult] = {}
    delegations: list[tuple[int, Any, dict[str, Any]]] = []
    for k, call in enumerate(plan.tool_calls):
        if call.tool == "delegate" and "delegate" in turn.tools:
            try:  # checked against the delegate tool's schema, like any tool input
                delegations.append((k, call.input, turn.tools.get("delegate").validate_input(call.input)))
            except ToolError as e:
                results[k] = ToolResult(tool="delegate", input=call.input, status="error", error=str(e))
                record_tool_result(ctx, it, results[k])
    tasks: list[A2ATask] = []
    if delegations:
        assert turn.directory is not None
        path = Path(turn.cfg.a2a_dir) if turn.cfg.a2a_dir else DEFAULT_A2A_DIR
        repo = A2ATaskRepository(path / f"{ctx.run.run_id}.json")
        ctx.run.info["a2a_tasks_file"] = str(repo.path)
        tasks = await delegate_all(
            [args for _, _, args in delegations],
            caller=turn.agent,
            directory=turn.directory,
            repo=repo,
            run_id=ctx.run.run_id,
            iteration=it.index,
            timeout_s=turn.cfg.delegate_timeout_s,
            poll_s=turn.cfg.delegate_poll_s,
            sample=ctx.run.sample,
            on_event=ctx.on_event,
            cache=ctx.cache,
            settings=ctx.settings,
            depth=turn.depth + 1,
        )
        turn.a2a += tasks
        for (k, raw, _), task in zip(delegations, tasks, strict=True):
            results[k] = a2a_result(raw, task)
            record_tool_result(ctx, it, results[k])
    for k, call in enumerate(plan.tool_calls):
        if k not in results:
            results[k], _ = await run_tool_step(ctx, turn.tools, it, call.tool, call.input)
    ordered = [results[k] for k in range(len(plan.tool_calls))]
    for r in ordered:
        turn.observe(ObservationType.TOOL_EXECUTION, r.model_dump(mode="json"), it.index)
        if not r.ok:
            turn.observe(ObservationType.ERROR, {"phase": "tool", "tool": r.tool, "message": r.error}, it.index)
    return ordered, tasks


def execution_step(
    turn: Turn, it: Iteration, plan: PlanningOutput, results: list[ToolResult], tasks: list[A2ATask]
) -> dict[str, Any]:
    """The design's ExecutionStep of one iteration."""
    raw = next((s.raw for s in it.steps if s.phase == "plan" and s.raw is not None), None)
    calls = [c.model_dump(mode="json") for c in plan.tool_calls]
    return {
        "iteration": it.index,
        "planning_output": plan.model_dump(mode="json"),
        "tool_results": [r.model_dump(mode="json") for r in results],
        "a2a_tasks": [t.record() for t in tasks],
        "planning_context": {
            "tools_list": [{"name": t.name, "description": t.description} for t in turn.tools],
            "a2a_summary": delegation_context(turn),
            "planned_tool_calls": calls,
            "raw_planning_text": raw,
        },
    }


def delegation_context(turn: Turn) -> str:
    if "delegate" not in turn.tools or turn.directory is None:
        return "(no delegation: no other agents)"
    # no task id here: it holds the run id, which no prompt may contain (the cache key would depend on it)
    done = [f"- round {t.iteration}: {t.agent or '?'} {t.status}: {t.task}" for t in turn.a2a]
    return (
        "Agents you can delegate to:\n"
        + turn.directory.summary(turn.agent)
        + ("\nDelegated so far:\n" + "\n".join(done) if done else "")
    )


async def synthesize(turn: Turn) -> str | None:
    prompt = turn.ctx.prompt(
        "synthesizer", SYNTHESIZER_PROMPT, **turn.fields(), steps="\n".join(turn.rounds) or "(no tool was run)"
    )
    out = await stream_call(turn, "synthesis", None, "synthesizer", "synthesize", prompt, SynthesisOutput)
    if out is None:
        return None
    turn.ctx.run.info["metadata"] = out.metadata.model_dump(mode="json")
    turn.observe(ObservationType.SYNTHESIS, out.model_dump(mode="json"))
    turn.observe(ObservationType.FINAL_RESPONSE, out.content)
    return str(out.content)


def finalize(turn: Turn, final: str | None) -> None:
    """Save the answer to the thread, record the state update, the execution steps and delegations."""
    run, state = turn.ctx.run, turn.state
    run.info["execution_steps"] = turn.steps
    if turn.a2a:
        run.info["a2a_tasks"] = [t.record() for t in turn.a2a]
    state.turns += 1
    if final is not None:
        limit = state.history_limit if state.history_limit is not None else turn.cfg.history_limit
        state.history += [{"role": "user", "content": turn.task.prompt}, {"role": "assistant", "content": final}]
        trim(state.history, limit)
    turn.observe(
        ObservationType.STATE_UPDATE,
        {
            "thread_id": turn.thread_id,
            "title": state.title,
            "turn": state.turns,
            "history_messages": len(state.history),
        },
    )


async def judge(turn: Turn, answer: str) -> Score:
    """The critic model's 1-10 grade of the answer (a missing score, with the error, if unparseable)."""
    ctx = turn.ctx
    prompt = ctx.prompt("judge", JUDGE_PROMPT, query=turn.task.prompt, guidance=guidance(turn.task.goal), answer=answer)
    grade, step = await ctx.call("judge", "judge", prompt, schema=JudgeGrade)
    model = turn.cfg.model_for("judge")
    if grade is None:
        message = step.error.message if step.error else "no judge output"
        turn.observe(ObservationType.ERROR, {"phase": "judge", "message": message})
        score = Score(criterion="overall", score=None, justification=f"judge output unusable: {message}", judge=model)
    else:
        score = Score(criterion="overall", score=float(grade.score), justification=grade.justification, judge=model)
    ctx.emit("score", f"judge: {score.score}", phase="judge", role="judge", scores=[score.model_dump()])
    return score


def a2a_result(tool_input: Any, task: A2ATask) -> ToolResult:
    if task.status == "completed":
        out = {
            "agent": task.agent,
            "answer": task.result,
            "run_id": task.run_id,
            "task_id": task.task_id,
            "stop_reason": task.stop_reason,
        }
        return ToolResult(
            tool="delegate",
            input=tool_input,
            status="success",
            output=out,
            text=f"{task.agent} answered: {task.result}",
        )
    return ToolResult(tool="delegate", input=tool_input, status="error", error=task.error or task.status)


def trim(history: list[dict[str, str]], limit: int) -> None:
    del history[: max(0, len(history) - limit)]


def guidance(goal: str) -> str:
    return f"Guidance on a good answer: {goal}\n" if goal.strip() else ""


def history_text(history: list[dict[str, str]]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in history) or "(no earlier messages)"


def round_text(index: int, plan: PlanningOutput, results: list[ToolResult], limit: int | None) -> str:
    """One round as the planner and the synthesizer read it: its plan and each call's result (cut to `limit`
    characters; None: whole)."""
    lines = [f"Round {index}: plan: {plan.plan}"]
    for r in results:
        lines.append(f"  - {r.tool}({json.dumps(r.input, ensure_ascii=False, default=str)}) -> {r.brief(limit)}")
    if not results:
        lines.append("  (no tool called)")
    return "\n".join(lines)


# Role prompts (override with config.prompts[role]; fields as in each template) ----------------------
PLANNER_PROMPT = """Plan the next round of work on the user's request.

Conversation so far:
{history}

User request:
{query}
{guidance}
Tools you can call:
{tools}

Delegation context:
{delegation}

Earlier rounds and their tool results (this is round {iteration} of at most {max_iterations}):
{steps}

Reply with a JSON object with these fields:
- "title": a short title for the conversation;
- "intent": what the user wants, in one sentence;
- "plan": the steps you will take;
- "thoughts": what you know already and what is still missing;
- "tool_calls": the tools to call now, as a list of {{"tool": <name>, "input": <object matching its \
input schema>}}.
Call a tool only for something you do not know yet. When a tool call failed, read its error and fix \
the call rather than repeating it. When the earlier results are enough, or no tool can help, give an \
empty "tool_calls" list: the answer is written next."""

SYNTHESIZER_PROMPT = """Write the final answer to the user's request.

Conversation so far:
{history}

User request:
{query}
{guidance}
What was done to answer it (tool calls and their results, by round):
{steps}

Reply with a JSON object: "content" (the answer for the user), and "metadata" with "sources" (the \
documents or tools the answer relies on) and "suggestions" (up to three useful follow-up questions)."""

JUDGE_PROMPT = """Grade an assistant's answer to a user's request.

Request:
{query}
{guidance}
Answer:
{answer}

Judge whether the answer is correct, complete and directly useful. Reply with a JSON object: \
"justification" (two or three sentences) and "score", an integer from 1 (useless or wrong) to 10 \
(correct, complete and clear)."""
