"""PES: Plan-Execute-Synthesize, a ReAct-like agent loop with tools, threads and delegation.

Each iteration the planner (structured: title, intent, plan, thoughts, tool_calls) sees the system
prompt, the thread's history, the tools with their schemas and every earlier iteration's tool results
(errors included); the tools run; the loop ends when the planner calls no tool ("no_tool_calls") or
after `max_iterations` ("max_iterations"); a planning call that fails ends it with "error". The
synthesizer then writes the answer (content + metadata {sources, suggestions}). If synthesis fails the
run has no final output and stop_reason "error" (`info["planning_stop"]` keeps why planning ended).

Score trajectory: `Iteration.metrics` = {"tool_calls", "tool_successes", "tool_errors"} and
`Iteration.average` = 10 * tool_successes / tool_calls (None when the iteration called no tool).
With `judge=True` the critic model grades the answer 1-10 into `Run.final_scores` (score None, with the
error recorded, when its reply cannot be parsed).

Observations (`ObservationType`) are emitted as `observation` events (data {"type", "content"}) and
kept in `Run.info["observations"]`. Planning calls stream with token_type "planning", synthesis with
"synthesis"; `TOKEN_TYPES` maps them to the design's AGENT_THOUGHT_LLM_RESPONSE and
FINAL_SYNTHESIS_LLM_RESPONSE.

`PESAgent` is the agent form: a persona (planning and synthesis system prompts, resolved call ->
thread -> instance -> default), threads with a trimmed history, and delegation to the other agents of
an `AgentDirectory` through a virtual `delegate` tool (a delegated run cannot delegate further).
`arun_pes` is the loop-function form used by sweeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..call import CacheArg, Settings
from ..events import EventHandler
from ..record import Run, Score, Task
from ..tools import (
    Tool,
    ToolEnv,
    ToolResult,
    build_tools,
    check_tool_names,
    needs_workspace,
    run_tool_step,
)
from ..tools.delegate import AgentDirectory, delegate_tool
from ..workspace import Workspace
from ._base import LoopConfig, LoopSpec, RunContext, as_config, as_task, register_loop, run_sync
from ._pes_schemas import (
    JudgeGrade,
    PlanningOutput,
    SynthesisOutput,
    planning_schema,
)


class ObservationType(StrEnum):
    """Kinds of observation a PES run records."""

    INTENT = "INTENT"
    TITLE = "TITLE"
    PLAN = "PLAN"
    THOUGHTS = "THOUGHTS"
    TOOL_CALL = "TOOL_CALL"
    TOOL_EXECUTION = "TOOL_EXECUTION"
    SYNTHESIS = "SYNTHESIS"
    ERROR = "ERROR"
    FINAL_RESPONSE = "FINAL_RESPONSE"


TOKEN_TYPES = {"planning": "AGENT_THOUGHT_LLM_RESPONSE", "synthesis": "FINAL_SYNTHESIS_LLM_RESPONSE"}
"""The token_type PES passes for each kind of call -> the design's stream token kind."""


class PESConfig(LoopConfig):
    """Settings of a PES run."""

    ROLES: ClassVar[tuple[str, ...]] = ("planner", "synthesizer", "judge")
    CRITIC_ROLES: ClassVar[frozenset[str]] = frozenset({"judge"})

    max_iterations: int = Field(5, ge=1, le=100)
    """Most plan-and-execute iterations before synthesis."""
    tools: list[str] = Field(default_factory=lambda: ["calculator", "search_docs"])
    """Built-in tools enabled, by name."""
    history_limit: int = Field(10, ge=0)
    """Messages of thread history kept (and shown to the planner and synthesizer)."""
    delegate_timeout_s: float = Field(30.0, gt=0)
    """How long a delegated agent may take before its call is an error."""
    judge: bool = False
    """Have the critic model grade the final answer 1-10 (into Run.final_scores)."""
    docs_dir: str | None = None
    """Folder searched by search_docs (None: the repository's data/docs)."""
    workspace_base: str | None = None
    """Parent folder of run workspaces, made when a workspace tool is enabled (None: .promptlab/workspaces)."""
    shell_timeout_s: float = Field(10.0, gt=0)
    """Time limit of a shell tool command."""
    output_cap: int = Field(8192, ge=256)
    """Most bytes kept of a shell command's stdout and stderr (and characters of a file read)."""
    unsafe_shell: bool = False
    """Where bubblewrap is missing, run shell commands unsandboxed instead of refusing them (recorded in
    `Run.info["unsafe_shell"]`)."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        return check_tool_names(v)


class Persona(BaseModel):
    """An agent's identity and system prompts; a None prompt falls through to the next level."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    """Display name."""
    planning: str | None = None
    """System prompt of planning calls."""
    synthesis: str | None = None
    """System prompt of synthesis calls."""


@dataclass
class ThreadState:
    """A conversation thread: its settings and its history (user query, final answer, ...)."""

    persona: Persona | None = None
    history_limit: int | None = None
    history: list[dict[str, str]] = field(default_factory=list)


class PESAgent:
    """A Plan-Execute-Synthesize agent with a persona, tools, threads and delegation.

    Args:
        name: the agent's name (how other agents delegate to it).
        persona: instance-level system prompts (a thread's or a call's persona overrides them).
        tools: tool names (built-ins) and/or Tool objects; None uses `config.tools`.
        config: a PESConfig (or dict of its fields).
        directory: an AgentDirectory of agents this one may delegate to.
        on_event, cache, settings: defaults for every run of this agent.
    """

    def __init__(self, name: str, persona: Persona | None = None, tools: Sequence[str | Tool] | None = None,
                 config: PESConfig | dict[str, Any] | None = None, *, directory: AgentDirectory | None = None,
                 on_event: EventHandler | None = None, cache: CacheArg = None,
                 settings: Settings | None = None) -> None:
        self.name = name
        self.persona = persona or Persona()
        self.config = as_config(PESConfig, config)
        names = [t for t in tools if isinstance(t, str)] if tools is not None else list(self.config.tools)
        self.tool_names = check_tool_names(names)
        self.extra_tools = [t for t in tools or () if isinstance(t, Tool)]
        self.directory = directory
        self.on_event, self.cache, self.settings = on_event, cache, settings
        self._threads: dict[str, ThreadState] = {}

    def thread(self, thread_id: str) -> ThreadState:
        """The thread's state (created empty on first use)."""
        return self._threads.setdefault(thread_id, ThreadState())

    def set_thread(self, thread_id: str, *, persona: Persona | None = None, history_limit: int | None = None) -> None:
        """Set a thread's persona and/or history limit (None leaves a setting as it is)."""
        state = self.thread(thread_id)
        if persona is not None:
            state.persona = persona
        if history_limit is not None:
            if history_limit < 0:
                raise ValueError(f"history_limit must be >= 0, got {history_limit}")
            state.history_limit = history_limit
            _trim(state.history, history_limit)

    def history(self, thread_id: str) -> list[dict[str, str]]:
        """A copy of the thread's conversation history."""
        return [dict(m) for m in self.thread(thread_id).history]

    def process(self, query: str, thread_id: str = "default", persona: Persona | None = None, **kwargs: Any) -> Run:
        """Sync twin of `aprocess`."""
        return run_sync(self.aprocess(query, thread_id, persona, **kwargs))

    async def aprocess(self, query: str, thread_id: str = "default", persona: Persona | None = None, *,
                       goal: str = "", sample: int = 0, on_event: EventHandler | None = None,
                       cache: CacheArg = None, settings: Settings | None = None) -> Run:
        """Answer `query` in thread `thread_id` (its history goes into the prompts and is extended).

        Args:
            query: the user's request.
            thread_id: the conversation thread.
            persona: call-level system prompts (override the thread's and the agent's).
            goal: optional guidance on what a good answer achieves.
            sample, on_event, cache, settings: as for every loop (None: the agent's defaults).
        """
        task = Task(id=thread_id, prompt=query, goal=goal)
        return await self.arun_task(task, thread_id=thread_id, persona=persona, sample=sample,
                                    on_event=on_event, cache=cache, settings=settings)

    async def arun_task(self, task: Task, *, thread_id: str = "default", persona: Persona | None = None,
                        sample: int = 0, on_event: EventHandler | None = None, cache: CacheArg = None,
                        settings: Settings | None = None, depth: int = 0) -> Run:
        """Run the loop on a Task (its prompt is the query, its goal optional guidance)."""
        cfg = self.config
        ctx = RunContext("pes", task, cfg, sample=sample,
                         on_event=on_event if on_event is not None else self.on_event,
                         cache=cache if cache is not None else self.cache,
                         settings=settings if settings is not None else self.settings)
        state = self.thread(thread_id)
        limit = state.history_limit if state.history_limit is not None else cfg.history_limit
        history = state.history[-limit:] if limit else []
        planning_system, planning_src = self._system("planning", persona, state)
        synthesis_system, synthesis_src = self._system("synthesis", persona, state)
        ws = None
        if needs_workspace(self.tool_names):
            ws = Workspace.for_run(cfg.workspace_base, ctx.run.run_id, shell_timeout_s=cfg.shell_timeout_s,
                                   output_cap=cfg.output_cap, unsafe_shell=cfg.unsafe_shell)
        delegations: list[dict[str, Any]] = []
        extra = list(self.extra_tools)
        if self.directory is not None and depth == 0 and [n for n in self.directory.names() if n != self.name]:
            extra.append(delegate_tool(self.name, self.directory, cfg.delegate_timeout_s, delegations,
                                       sample=sample, on_event=ctx.on_event, cache=ctx.cache, settings=ctx.settings))
        tools = build_tools(self.tool_names, ToolEnv(Path(cfg.docs_dir) if cfg.docs_dir else None, ws), extra)
        run = ctx.run
        run.info.update(agent=self.name, thread_id=thread_id, tools=tools.names(),
                        system_prompt_source={"planning": planning_src, "synthesis": synthesis_src})
        if ws is not None:
            run.info.update(workspace=str(ws.root), unsafe_shell=cfg.unsafe_shell, shell_sandbox=ws.shell_mode)
        observations: list[dict[str, Any]] = []
        run.info["observations"] = observations

        def observe(kind: ObservationType, content: Any, iteration: int | None = None) -> None:
            observations.append({"type": kind.value, "content": content, "iteration": iteration})
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            ctx.emit("observation", f"{kind.value}: {text[:200]}", iteration=iteration, phase="observe",
                     type=kind.value, content=content)

        ctx.emit("run_started", f"PES agent {self.name!r}: {task.prompt[:80]}", tools=tools.names())
        fields = dict(query=task.prompt, guidance=_guidance(task.goal), history=_history_text(history),
                      tools=tools.describe(), max_iterations=cfg.max_iterations)
        rounds: list[str] = []
        schema = planning_schema(tools)
        stop_reason = "max_iterations"
        for _ in range(cfg.max_iterations):
            it = ctx.new_iteration()
            prompt = ctx.prompt("planner", PLANNER_PROMPT, **fields, iteration=it.index,
                                steps="\n".join(rounds) or "(none yet: this is the first round)")
            plan, step = await ctx.call("planner", "plan", prompt, schema=schema, iteration=it,
                                        system=planning_system, token_type="planning")
            if plan is None:
                message = step.error.message if step.error else "no planning output"
                observe(ObservationType.ERROR, {"phase": "plan", "message": message}, it.index)
                ctx.decide(it, "synthesize", f"the planning call failed: {message}")
                stop_reason = "error"
                break
            it.candidate = plan.plan
            observe(ObservationType.TITLE, plan.title, it.index)
            observe(ObservationType.INTENT, plan.intent, it.index)
            observe(ObservationType.PLAN, plan.plan, it.index)
            observe(ObservationType.THOUGHTS, plan.thoughts, it.index)
            results: list[ToolResult] = []
            for call in plan.tool_calls:
                observe(ObservationType.TOOL_CALL, call.model_dump(mode="json"), it.index)
                result, _ = await run_tool_step(ctx, tools, it, call.tool, call.input)
                results.append(result)
                observe(ObservationType.TOOL_EXECUTION, result.model_dump(mode="json"), it.index)
                if not result.ok:
                    observe(ObservationType.ERROR, {"phase": "tool", "tool": call.tool, "message": result.error},
                            it.index)
            ok = sum(r.ok for r in results)
            it.metrics = {"tool_calls": len(results), "tool_successes": ok, "tool_errors": len(results) - ok}
            rounds.append(_round_text(it.index, plan, results))
            if not results:
                ctx.decide(it, "synthesize", "the plan calls no tool")
                stop_reason = "no_tool_calls"
                break
            ctx.score(it, [], average=round(10 * ok / len(results), 4))
            if it.index == cfg.max_iterations:
                ctx.decide(it, "synthesize", f"reached max_iterations ({cfg.max_iterations})")
            else:
                ctx.decide(it, "continue", f"{ok} of {len(results)} tool calls succeeded; planning again")
        run.info["planning_stop"] = stop_reason
        prompt = ctx.prompt("synthesizer", SYNTHESIZER_PROMPT, **fields,
                            steps="\n".join(rounds) or "(no tool was run)")
        out, step = await ctx.call("synthesizer", "synthesize", prompt, schema=SynthesisOutput,
                                   system=synthesis_system, token_type="synthesis")
        final: str | None = None
        if out is None:
            message = step.error.message if step.error else "no synthesis output"
            observe(ObservationType.ERROR, {"phase": "synthesize", "message": message})
            stop_reason = "error"
        else:
            final = out.content
            run.info["metadata"] = out.metadata.model_dump(mode="json")
            observe(ObservationType.SYNTHESIS, out.model_dump(mode="json"))
            observe(ObservationType.FINAL_RESPONSE, final)
            state.history += [{"role": "user", "content": task.prompt}, {"role": "assistant", "content": final}]
            _trim(state.history, limit)
            if cfg.judge:
                run.final_scores = [await self._judge(ctx, task, final, observe)]
        if delegations:
            run.info["delegations"] = delegations
        return ctx.finish(stop_reason, final)

    def _system(self, stage: str, call: Persona | None, state: ThreadState) -> tuple[str, str]:
        """The system prompt of `stage` and the level it came from (call, thread, instance, default)."""
        for source, persona in (("call", call), ("thread", state.persona), ("instance", self.persona)):
            value = getattr(persona, stage) if persona is not None else None
            if value:
                return value, source
        return (PLANNING_SYSTEM if stage == "planning" else SYNTHESIS_SYSTEM), "default"

    async def _judge(self, ctx: RunContext, task: Task, answer: str, observe: Callable[..., None]) -> Score:
        prompt = ctx.prompt("judge", JUDGE_PROMPT, query=task.prompt, guidance=_guidance(task.goal), answer=answer)
        grade, step = await ctx.call("judge", "judge", prompt, schema=JudgeGrade)
        model = self.config.model_for("judge")
        if grade is None:
            message = step.error.message if step.error else "no judge output"
            observe(ObservationType.ERROR, {"phase": "judge", "message": message})
            score = Score(criterion="overall", score=None, justification=f"judge output unusable: {message}",
                          judge=model)
        else:
            score = Score(criterion="overall", score=float(grade.score), justification=grade.justification,
                          judge=model)
        ctx.emit("score", f"judge: {score.score}", phase="judge", role="judge", scores=[score.model_dump()])
        return score


def _trim(history: list[dict[str, str]], limit: int) -> None:
    del history[: max(0, len(history) - limit)]


def _guidance(goal: str) -> str:
    return f"Guidance on a good answer: {goal}\n" if goal.strip() else ""


def _history_text(history: list[dict[str, str]]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in history) or "(no earlier messages)"


def _round_text(index: int, plan: PlanningOutput, results: list[ToolResult]) -> str:
    lines = [f"Round {index}: plan: {plan.plan}"]
    for r in results:
        lines.append(f"  - {r.tool}({json.dumps(r.input, ensure_ascii=False, default=str)}) -> {r.brief()}")
    if not results:
        lines.append("  (no tool called)")
    return "\n".join(lines)


async def arun_pes(task: Task | str | dict[str, Any], config: PESConfig | dict[str, Any] | None = None, *,
                   sample: int = 0, on_event: EventHandler | None = None, cache: CacheArg = None,
                   settings: Settings | None = None) -> Run:
    """Run PES once on a task with a fresh agent and the default persona.

    Args:
        task: a Task, a dict of its fields, or the user's query as a string (goal: optional guidance).
        config: a PESConfig, a dict of its fields, or None for the defaults.
        sample: replicate index (the cache's sample index).
        on_event: a callback receiving every Event.
        cache: None for the default cache, False for none, or a directory.
        settings: call settings (retries, timeouts, concurrency).
    """
    agent = PESAgent("pes", config=as_config(PESConfig, config))
    return await agent.arun_task(as_task(task), sample=sample, on_event=on_event, cache=cache, settings=settings)


def run_pes(task: Task | str | dict[str, Any], config: PESConfig | dict[str, Any] | None = None,
            **kwargs: Any) -> Run:
    """Sync twin of `arun_pes`."""
    return run_sync(arun_pes(task, config, **kwargs))


register_loop(LoopSpec("pes", PESConfig, arun_pes, "Plan-Execute-Synthesize agent: plan tool calls, run "
                       "them, iterate on their results, then synthesize an answer"))


PLANNING_SYSTEM = """You are a methodical assistant that plans before answering. You decide which tools \
to call to gather what the answer needs, and you stop calling tools as soon as you have enough."""

SYNTHESIS_SYSTEM = """You are a helpful assistant writing the final answer for the user. Base the answer \
on the tool results you are given, say plainly when something could not be found, and be concise."""

PLANNER_PROMPT = """Plan the next round of work on the user's request.

Conversation so far:
{history}

User request:
{query}
{guidance}
Tools you can call:
{tools}

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
