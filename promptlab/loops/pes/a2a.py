"""Agent-to-agent (A2A) delegation for PES, as the design document describes it: agents found by name or by
task type, delegated tasks started together on asyncio, their records persisted, and their completion
awaited by polling with a wait limit.

A delegated task runs the other agent in a thread of its own (`a2a:<caller>:<task_id>`), so delegated tasks
never see each other's history, one level deeper than its caller (it may delegate again, as the design
document sets no depth; `PESConfig.max_delegation_depth` bounds it). When a wait times out, the tasks still
running are cancelled, and a cancelled task cancels the delegations it is waiting for in turn. Each
`A2ATask` moves through submitted -> working -> completed | failed | timeout; every change is written to the
repository's JSON file (atomically) with wall-clock times and poll counts, while the copy kept on the Run
(`A2ATask.record()`) holds only what a cached replay reproduces (task ids hold the run id, which
`Run.comparable` masks).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from ...events import EventHandler
from ...llm.call.entry import CacheArg
from ...llm.call.settings import Settings
from ...record import Run, Task
from ...tools.registry import Tool, ToolError

Status = Literal["submitted", "working", "completed", "failed", "timeout"]
DEFAULT_A2A_DIR = Path(".promptlab") / "a2a"
"""Where task records are persisted when a config gives no `a2a_dir`."""


class Agent(Protocol):
    """What delegation needs of an agent (PESAgent is one)."""

    name: str
    task_types: list[str]
    directory: AgentDirectory | None

    async def arun_task(
        self,
        task: Task,
        *,
        thread_id: str = ...,
        sample: int = ...,
        on_event: EventHandler | None = ...,
        cache: CacheArg = ...,
        settings: Settings | None = ...,
        depth: int = ...,
    ) -> Run:
        """Run the agent on a task."""
        ...


class AgentDirectory:
    """Agents by name and by the task types they declare; an unknown name or type lists the known ones."""

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
        """The agent called `name` (ToolError listing the known ones if there is none)."""
        if name not in self._agents:
            raise ToolError(f"unknown agent {name!r}; known agents: {', '.join(self._agents) or '(none)'}")
        return self._agents[name]

    def discover(self, task_type: str, *, exclude: str | None = None) -> Agent:
        """The first registered agent (other than `exclude`) that declares `task_type`.

        Raises:
            ToolError: no agent declares it; the message lists the task types that are known.
        """
        for agent in self._agents.values():
            if agent.name != exclude and task_type in agent.task_types:
                return agent
        known = sorted({t for a in self._agents.values() if a.name != exclude for t in a.task_types})
        raise ToolError(f"no agent handles task type {task_type!r}; known task types: {', '.join(known) or '(none)'}")

    def summary(self, caller: str) -> str:
        """The delegation context shown to `caller`'s planner: each other agent and its task types."""
        lines = [
            f"- {a.name}" + (f" (task types: {', '.join(a.task_types)})" if a.task_types else "")
            for a in self._agents.values()
            if a.name != caller
        ]
        return "\n".join(lines) or "(no other agents)"


class A2ATask(BaseModel):
    """One delegated task and what became of it."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    """`<run_id>-<iteration>-<k>`: unique per delegation."""
    iteration: int
    """Planning iteration that asked for it."""
    task: str
    """The sub-task handed over."""
    agent: str | None = None
    """The agent that took it (None when none could be found)."""
    task_type: str | None = None
    """The task type it was discovered by, if any."""
    thread_id: str | None = None
    """The delegated agent's thread for this task."""
    status: Status = "submitted"
    """submitted, working, completed, failed or timeout."""
    run_id: str | None = None
    """The delegated run's id."""
    stop_reason: str | None = None
    """The delegated run's stop reason."""
    result: str | None = None
    """The delegated agent's answer."""
    error: str | None = None
    """Why it failed or timed out."""

    def record(self) -> dict[str, Any]:
        """The JSON kept on the Run."""
        return self.model_dump(mode="json")


class A2ATaskRepository:
    """Keeps a run's task records, persisted as one JSON file (atomic writes) when given a path."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.tasks: list[A2ATask] = []
        self.timing: dict[str, dict[str, Any]] = {}

    def save(self, task: A2ATask, *, polls: int | None = None) -> None:
        """Store the task's current state (adding it the first time) and write the file."""
        if task not in self.tasks:
            self.tasks.append(task)
        now = time.time()
        timing = self.timing.setdefault(task.task_id, {"submitted_at": now})
        timing["updated_at"] = now
        if polls is not None:
            timing["polls"] = polls
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data = [{**t.record(), **self.timing.get(t.task_id, {})} for t in self.tasks]
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".a2a-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)

    @staticmethod
    def load(path: str | Path) -> list[dict[str, Any]]:
        """The task records persisted at `path`."""
        data: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))
        return data


def delegate_tool(caller: str, directory: AgentDirectory) -> Tool:
    """The virtual `delegate` tool as the planner sees it: {"task", "agent" or "task_type"}.

    PES carries out these calls itself (`delegate_all`), before its local tools; calling the tool directly is
    an error."""
    others = [n for n in directory.names() if n != caller]
    types = sorted({t for n in others for t in directory.get(n).task_types})

    def not_here(args: dict[str, Any]) -> Any:
        raise ToolError("delegate calls are carried out by the PES agent, not run as a local tool")

    props: dict[str, Any] = {"task": {"type": "string", "minLength": 1}, "agent": {"type": "string", "enum": others}}
    if types:
        props["task_type"] = {"type": "string", "enum": types}
    schema = {"type": "object", "additionalProperties": False, "required": ["task"], "properties": props}
    how = f"Agents: {', '.join(others)}." + (f" Task types: {', '.join(types)}." if types else "")
    return Tool(
        "delegate",
        "Hand a self-contained sub-task to another agent (name it by 'agent', or give a "
        f"'task_type' to let it be found) and get its answer back. {how}",
        not_here,
        input_schema=schema,
    )


async def delegate_all(
    calls: list[dict[str, Any]],
    *,
    caller: str,
    directory: AgentDirectory,
    repo: A2ATaskRepository,
    run_id: str,
    iteration: int,
    timeout_s: float,
    poll_s: float,
    sample: int = 0,
    on_event: EventHandler | None = None,
    cache: CacheArg = None,
    settings: Settings | None = None,
    depth: int = 1,
) -> list[A2ATask]:
    """Start every delegation of one planning round, then wait for them together.

    Each call is {"task", "agent"} or {"task", "task_type"}. The tasks run concurrently; their status is
    polled every `poll_s` seconds (a finished task is noticed at once) until all are done or `timeout_s` has
    passed, when the rest are cancelled and marked "timeout". The delegated runs are at `depth` (the caller's
    depth + 1). Returns the tasks in call order.
    """
    tasks: list[A2ATask] = []
    jobs: dict[asyncio.Future[Run], A2ATask] = {}
    for k, args in enumerate(calls, start=1):
        task_id = f"{run_id}-{iteration}-{k}"
        text = args.get("task") if isinstance(args, dict) else None
        record = A2ATask(
            task_id=task_id,
            iteration=iteration,
            task=str(text or ""),
            task_type=args.get("task_type") if isinstance(args, dict) else None,
        )
        tasks.append(record)
        try:
            agent = _resolve(args, caller, directory)
        except ToolError as e:
            record.status, record.error = "failed", str(e)
            repo.save(record)
            continue
        record.agent, record.thread_id, record.status = agent.name, f"a2a:{caller}:{task_id}", "working"
        jobs[
            asyncio.ensure_future(
                agent.arun_task(
                    Task(id=record.thread_id, prompt=record.task),
                    thread_id=record.thread_id,
                    sample=sample,
                    on_event=on_event,
                    cache=cache,
                    settings=settings,
                    depth=depth,
                )
            )
        ] = record
        repo.save(record)
    await _wait(jobs, repo, timeout_s, poll_s)
    return tasks


def _resolve(args: Any, caller: str, directory: AgentDirectory) -> Agent:
    if not isinstance(args, dict) or not str(args.get("task") or "").strip():
        raise ToolError("a delegation needs a non-empty 'task'")
    if args.get("agent"):
        if args["agent"] == caller:
            raise ToolError(f"agent {caller!r} cannot delegate to itself")
        return directory.get(str(args["agent"]))
    if args.get("task_type"):
        return directory.discover(str(args["task_type"]), exclude=caller)
    raise ToolError("a delegation names an 'agent' or a 'task_type'")


async def _wait(
    jobs: dict[asyncio.Future[Run], A2ATask], repo: A2ATaskRepository, timeout_s: float, poll_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    pending, polls = set(jobs), 0
    try:
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            done, pending = await asyncio.wait(
                pending, timeout=min(poll_s, remaining), return_when=asyncio.FIRST_COMPLETED
            )
            polls += 1
            for job in done:
                _settle(jobs[job], job)
                repo.save(jobs[job], polls=polls)
    finally:  # timed out, or this wait was cancelled (its own run timed out): nothing it started runs on
        for job in pending:
            job.cancel()
    for job in pending:
        record = jobs[job]
        record.status, record.error = "timeout", f"agent {record.agent!r} did not finish within {timeout_s:g} s"
        repo.save(record, polls=polls)
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


def _settle(record: A2ATask, job: asyncio.Future[Run]) -> None:
    exc = job.exception()
    if exc is not None:
        record.status, record.error = "failed", f"{type(exc).__name__}: {exc}"
        return
    sub = job.result()
    record.run_id, record.stop_reason, record.result = sub.run_id, sub.stop_reason, sub.final_output
    if sub.final_output is None:
        record.status = "failed"
        record.error = f"agent {record.agent!r} gave no answer (stop reason {sub.stop_reason!r})"
    else:
        record.status = "completed"


__all__ = [
    "A2ATask",
    "A2ATaskRepository",
    "Agent",
    "AgentDirectory",
    "DEFAULT_A2A_DIR",
    "delegate_all",
    "delegate_tool",
]
