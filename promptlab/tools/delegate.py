"""Delegation between agents: an `AgentDirectory` by name and the virtual `delegate` tool.

The `delegate` tool runs another agent on a sub-task as an asyncio task and waits for it at most
`timeout_s` (`asyncio.wait_for`, which cancels it on timeout); its answer, or a timeout error, comes
back to the calling agent like any tool result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from ..call import CacheArg, Settings
from ..events import EventHandler
from ..record import Run, Task
from ._base import Tool, ToolError


class Agent(Protocol):
    """What the directory needs of an agent (PESAgent is one)."""

    name: str
    directory: AgentDirectory | None

    async def arun_task(self, task: Task, *, thread_id: str = ..., sample: int = ...,
                        on_event: EventHandler | None = ..., cache: CacheArg = ..., settings: Settings | None = ...,
                        depth: int = ...) -> Run:
        """Run the agent on a task."""
        ...


class AgentDirectory:
    """Agents by name, for delegation; an unknown name lists the known ones."""

    def __init__(self, agents: Sequence[Agent] = ()) -> None:
        self._agents: dict[str, Agent] = {}
        for a in agents:
            self.register(a)

    def register(self, agent: Any) -> Any:
        """Add an agent (and point its `directory` here); returns the agent."""
        self._agents[agent.name] = agent
        agent.directory = self
        return agent

    def names(self) -> list[str]:
        """Registered agent names."""
        return list(self._agents)

    def get(self, name: str) -> Agent:
        """The agent called `name`.

        Raises:
            ToolError: no such agent; the message lists the known ones.
        """
        if name not in self._agents:
            raise ToolError(f"unknown agent {name!r}; known agents: {', '.join(self._agents) or '(none)'}")
        return self._agents[name]


def delegate_tool(caller: str, directory: AgentDirectory, timeout_s: float, log: list[dict[str, Any]], *,
                  sample: int = 0, on_event: EventHandler | None = None, cache: CacheArg = None,
                  settings: Settings | None = None) -> Tool:
    """The virtual `delegate` tool of agent `caller`: {"agent", "task"} -> the other agent's answer.

    The delegated run uses thread `delegated-by-<caller>` and depth 1 (so it cannot delegate again);
    each delegation is appended to `log` ({"agent", "task", "status", "answer" or "error", "run_id"}).
    """
    others = [n for n in directory.names() if n != caller]

    async def delegate(args: dict[str, Any]) -> dict[str, Any]:
        agent = directory.get(args["agent"])
        entry: dict[str, Any] = {"agent": agent.name, "task": args["task"]}
        log.append(entry)
        thread = f"delegated-by-{caller}"
        job = asyncio.ensure_future(agent.arun_task(
            Task(id=thread, prompt=args["task"]), thread_id=thread, sample=sample, on_event=on_event, cache=cache,
            settings=settings, depth=1))
        try:
            sub = await asyncio.wait_for(job, timeout_s)
        except TimeoutError:
            entry.update(status="error", error=f"timed out after {timeout_s:g} s")
            raise ToolError(f"agent {agent.name!r} did not finish within {timeout_s:g} s") from None
        entry.update(status="success" if sub.final_output is not None else "error", run_id=sub.run_id,
                     stop_reason=sub.stop_reason, answer=sub.final_output)
        if sub.final_output is None:
            raise ToolError(f"agent {agent.name!r} gave no answer (stop reason {sub.stop_reason!r})")
        return {"agent": agent.name, "answer": sub.final_output, "run_id": sub.run_id, "stop_reason": sub.stop_reason}

    schema = {"type": "object", "additionalProperties": False, "required": ["agent", "task"],
              "properties": {"agent": {"type": "string", "enum": others}, "task": {"type": "string", "minLength": 1}}}
    return Tool("delegate", "Hand a self-contained sub-task to another agent and get its answer back. "
                f"Agents: {', '.join(others)}.", delegate, input_schema=schema,
                render=lambda o: f"{o['agent']} answered: {o['answer']}")
