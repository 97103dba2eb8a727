"""PES: Plan-Execute-Synthesize, a ReAct-like agent loop with tools, threads and delegation.

More in docs/loops.md, section "promptlab.loops.pes.agent".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...aio import run_sync
from ...events import EventHandler
from ...llm.call.entry import CacheArg
from ...llm.call.settings import Settings
from ...record import Run, Task
from ...tools.builtin import ToolEnv, build_tools, check_tool_names, needs_workspace
from ...tools.registry import Tool, ToolRegistry
from ...tools.workspace import Workspace
from ..runtime.config import as_config
from ..runtime.context import RunContext
from ..runtime.define import RunArgs, define_loop_runner
from ..runtime.provenance import text_hash
from .a2a import AgentDirectory, delegate_tool
from .config import PROVIDER_FIELDS, Persona, PESConfig, ThreadState, with_provider
from .observe import Observer, StreamTyper
from .router import run_stop_reason
from .run import Turn, finalize, judge, plan_and_execute, synthesize, trim


class PESAgent:
    """A Plan-Execute-Synthesize agent with a persona, tools, threads and delegation.

    Args:
        name: the agent's name (how other agents delegate to it).
        persona: instance-level system prompts (a thread's or a call's persona overrides them).
        tools: tool names (built-ins) and/or Tool objects; None uses `config.tools`.
        config: a PESConfig (or dict of its fields).
        directory: an AgentDirectory of agents this one may delegate to.
        task_types: the kinds of task this agent takes when others delegate by task type.
        on_event, cache, settings: defaults for every run of this agent.
    """

    def __init__(
        self,
        name: str,
        persona: Persona | None = None,
        tools: Sequence[str | Tool] | None = None,
        config: PESConfig | dict[str, Any] | None = None,
        *,
        directory: AgentDirectory | None = None,
        task_types: Sequence[str] = (),
        on_event: EventHandler | None = None,
        cache: CacheArg = None,
        settings: Settings | None = None,
    ) -> None:
        self.name = name
        self.persona = persona or Persona()
        self.config = as_config(PESConfig, config)
        names = [t for t in tools if isinstance(t, str)] if tools is not None else list(self.config.tools)
        self.tool_names = check_tool_names(names)
        self.extra_tools = [t for t in tools or () if isinstance(t, Tool)]
        self.task_types = list(task_types)
        self.directory = directory
        self.on_event, self.cache, self.settings = on_event, cache, settings
        self._threads: dict[str, ThreadState] = {}

    # threads ------------------------------------------------------------------------------------
    def thread(self, thread_id: str) -> ThreadState:
        """The thread's state (created empty on first use)."""
        return self._threads.setdefault(thread_id, ThreadState())

    def set_thread(
        self,
        thread_id: str,
        *,
        persona: Persona | None = None,
        history_limit: int | None = None,
        enabled_tools: Sequence[str] | None = None,
        provider_config: dict[str, Any] | None = None,
    ) -> None:
        """Set a thread's persona, history limit, enabled tools and/or provider config (None leaves a setting
        as it is).

        `enabled_tools` names the agent's tools (and `delegate`) the thread may use; `provider_config` sets
        config fields of the thread's runs (model, generator_model, critic_model, role_models, temperature,
        max_tokens).

        Raises:
            ValueError: a negative history limit, a tool the agent does not have, or a provider field that is
                not one of those above or whose value is invalid.
        """
        state = self.thread(thread_id)
        if persona is not None:
            state.persona = persona
        if history_limit is not None:
            if history_limit < 0:
                raise ValueError(f"history_limit must be >= 0, got {history_limit}")
            state.history_limit = history_limit
            trim(state.history, history_limit)
        if enabled_tools is not None:
            known = [*self.tool_names, *(t.name for t in self.extra_tools), "delegate"]
            unknown = [t for t in enabled_tools if t not in known]
            if unknown:
                raise ValueError(f"enabled_tools: {unknown} not among this agent's tools {known}")
            state.enabled_tools = list(enabled_tools)
        if provider_config is not None:
            bad = sorted(set(provider_config) - PROVIDER_FIELDS)
            if bad:
                raise ValueError(f"provider_config: unknown field(s) {bad}; allowed: {sorted(PROVIDER_FIELDS)}")
            with_provider(self.config, provider_config)  # validates now, not at the next run
            state.provider_config = dict(provider_config)

    def history(self, thread_id: str) -> list[dict[str, str]]:
        """A copy of the thread's conversation history."""
        return [dict(m) for m in self.thread(thread_id).history]

    # running ------------------------------------------------------------------------------------
    def process(self, query: str, thread_id: str = "default", persona: Persona | None = None, **kwargs: Any) -> Run:
        """Sync twin of `aprocess`."""
        return run_sync(self.aprocess(query, thread_id, persona, **kwargs))

    async def aprocess(
        self,
        query: str,
        thread_id: str = "default",
        persona: Persona | None = None,
        *,
        goal: str = "",
        sample: int = 0,
        on_event: EventHandler | None = None,
        cache: CacheArg = None,
        settings: Settings | None = None,
    ) -> Run:
        """Answer `query` in thread `thread_id` (its history goes into the prompts and is extended).

        Args:
            query: the user's request.
            thread_id: the conversation thread.
            persona: call-level system prompts (override the thread's and the agent's).
            goal: optional guidance on what a good answer achieves.
            sample, on_event, cache, settings: as for every loop (None: the agent's defaults).
        """
        task = Task(id=thread_id, prompt=query, goal=goal)
        return await self.arun_task(
            task, thread_id=thread_id, persona=persona, sample=sample, on_event=on_event, cache=cache, settings=settings
        )

    async def arun_task(
        self,
        task: Task,
        *,
        thread_id: str = "default",
        persona: Persona | None = None,
        sample: int = 0,
        on_event: EventHandler | None = None,
        cache: CacheArg = None,
        settings: Settings | None = None,
        depth: int = 0,
        provenance: dict[str, Any] | None = None,
    ) -> Run:
        """Run the loop on a Task (its prompt is the query, its goal optional guidance); `provenance` adds
        entries to `Run.provenance`."""
        turn = self._begin(
            task,
            thread_id,
            persona,
            sample=sample,
            depth=depth,
            on_event=on_event if on_event is not None else self.on_event,
            cache=cache if cache is not None else self.cache,
            settings=settings if settings is not None else self.settings,
            provenance=provenance,
        )
        planning_stop = await plan_and_execute(turn)
        turn.ctx.run.info["planning_stop"] = planning_stop
        final = await synthesize(turn)
        if final is not None and turn.cfg.judge:
            turn.ctx.run.final_scores = [await judge(turn, final)]
        finalize(turn, final)
        return turn.ctx.finish(run_stop_reason(planning_stop, final is not None), final)

    def _begin(
        self,
        task: Task,
        thread_id: str,
        persona: Persona | None,
        *,
        sample: int,
        depth: int,
        on_event: EventHandler | None,
        cache: CacheArg,
        settings: Settings | None,
        provenance: dict[str, Any] | None = None,
    ) -> Turn:
        """Load the thread's configuration (persona, tools, provider config, workspace) and open the run."""
        state = self.thread(thread_id)
        cfg = with_provider(self.config, state.provider_config)
        systems, sources = {}, {}
        for stage in ("planning", "synthesis"):
            systems[stage], sources[stage] = self._system(stage, persona, state)
        typed = StreamTyper(on_event) if on_event is not None else None
        ctx = RunContext(
            "pes", task, cfg, sample=sample, on_event=typed, cache=cache, settings=settings, provenance=provenance
        )
        limit = state.history_limit if state.history_limit is not None else cfg.history_limit
        tools = self._tools(cfg, state, thread_id, depth)
        run = ctx.run
        run.info.update(
            agent=self.name,
            thread_id=thread_id,
            turn=state.turns + 1,
            delegation_depth=depth,
            tools=tools.names(),
            system_prompt_source=sources,
            system_prompt_hashes={stage: text_hash(text) for stage, text in systems.items()},
        )
        if state.workspace is not None:
            run.info.update(
                workspace=str(state.workspace.root),
                unsafe_shell=cfg.unsafe_shell,
                shell_sandbox=state.workspace.shell_mode,
            )
        observe = Observer(ctx.emit)
        run.info["observations"] = observe.items
        ctx.emit("run_started", f"PES agent {self.name!r}: {task.prompt[:80]}", tools=tools.names())
        return Turn(
            ctx=ctx,
            cfg=cfg,
            task=task,
            thread_id=thread_id,
            state=state,
            tools=tools,
            systems=systems,
            history=state.history[-limit:] if limit else [],
            observe=observe,
            depth=depth,
            agent=self.name,
            directory=self.directory,
        )

    def _tools(self, cfg: PESConfig, state: ThreadState, thread_id: str, depth: int) -> ToolRegistry:
        """The thread's tools: the agent's, narrowed to the thread's enabled ones, plus `delegate`."""
        allowed = state.enabled_tools
        names = [n for n in self.tool_names if allowed is None or n in allowed]
        if needs_workspace(names) and state.workspace is None:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.name}-{thread_id}")[:48]
            state.workspace = Workspace.claim(
                cfg.workspace_base,
                stem,
                shell_timeout_s=cfg.shell_timeout_s,
                output_cap=cfg.output_cap,
                unsafe_shell=cfg.unsafe_shell,
            )
        extra = [t for t in self.extra_tools if allowed is None or t.name in allowed]
        others = [n for n in self.directory.names() if n != self.name] if self.directory is not None else []
        deeper = cfg.max_delegation_depth is None or depth < cfg.max_delegation_depth
        if others and deeper and (allowed is None or "delegate" in allowed):
            assert self.directory is not None
            extra.append(delegate_tool(self.name, self.directory))
        env = ToolEnv(Path(cfg.docs_dir) if cfg.docs_dir else None, state.workspace)
        return build_tools(names, env, extra)

    def _system(self, stage: str, call: Persona | None, state: ThreadState) -> tuple[str, str]:
        """The system prompt of `stage` and the level it came from (call, thread, instance, default)."""
        for source, persona in (("call", call), ("thread", state.persona), ("instance", self.persona)):
            value = getattr(persona, stage) if persona is not None else None
            if value:
                return value, source
        return (PLANNING_SYSTEM if stage == "planning" else SYNTHESIS_SYSTEM), "default"


@define_loop_runner(
    "pes",
    PESConfig,
    "Plan-Execute-Synthesize agent: plan tool calls, run them, iterate on their results, then synthesize an answer",
)
async def arun_pes(task: Task, cfg: PESConfig, args: RunArgs) -> Run:
    """Run PES once on a task (its prompt is the user's query, its goal optional guidance) with a fresh agent
    and the default persona.

    Returns:
        The Run: `final_output` is the answer; `stop_reason` 'no_tool_calls', 'max_iterations', 'budget',
        'planning_error' (an answer after a failed planning call) or 'error' (no answer); see the module.
    """
    return await PESAgent("pes", config=cfg).arun_task(task, **args.options())


run_pes = arun_pes.sync

__all__ = ["PLANNING_SYSTEM", "SYNTHESIS_SYSTEM", "PESAgent", "arun_pes", "run_pes"]


PLANNING_SYSTEM = """You are a methodical assistant that plans before answering. You decide which tools \
to call to gather what the answer needs, and you stop calling tools as soon as you have enough."""

SYNTHESIS_SYSTEM = """You are a helpful assistant writing the final answer for the user. Base the answer \
on the tool results you are given, say plainly when something could not be found, and be concise."""
