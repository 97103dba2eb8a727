"""How long one model call takes on this machine, measured now by a short timed probe (`probe_model`).

The probe sends the experiment's first task's prompt on its first examples (the requests a sweep starts with),
`at_once` calls in flight as the sweep runs them, after one untimed call that loads the model; the cache is not
used, so what is timed is the model. Its figure is throughput at that concurrency: wall time / calls. Only a
model that costs nothing to call is probed (the embedded `local/...` models and the scripted `fake/...` ones);
a hosted model's time is not measured, and the estimate says so.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..record import Task

PROBE_CALLS = 2
"""Timed calls per call slot (so a probe of a model taking 2 calls at once times 4)."""
MAX_AT_ONCE = 8
"""At most this many timed calls in flight (a batching engine takes more; its probe stays short)."""


@dataclass(frozen=True)
class Probe:
    """What a timed probe of a model measured."""

    model: str
    """The model probed."""
    calls: int
    """Timed calls."""
    at_once: int
    """Calls in flight at once."""
    seconds: float
    """Wall time of the timed calls."""
    max_tokens: int
    """Each probe call's reply cap."""

    @property
    def per_call(self) -> float:
        """Seconds per call at `at_once` calls in flight (wall time / calls)."""
        return self.seconds / self.calls


def probed(model: str) -> bool:
    """True for a model the probe may call: one that costs nothing (embedded or scripted)."""
    from ..llm.providers.resolved import resolve_model

    resolved = resolve_model(model)
    return resolved.in_process and resolved.makes_calls


def probe_messages(task: Task, n: int) -> list[list[dict[str, str]]]:
    """`n` requests a sweep of `task` makes first: its prompt on its first examples (the prompt alone, and
    numbered, when it has none)."""
    from ..eval.tasks import format_prompt

    if task.examples:
        inputs = [task.examples[i % len(task.examples)].input for i in range(n)]
        return [[{"role": "user", "content": format_prompt(task.prompt, x)}] for x in inputs]
    return [[{"role": "user", "content": f"{task.prompt}\n\n({i + 1})"}] for i in range(n)]


def probe_model(model: str, task: Task, max_tokens: int, at_once: int) -> Probe:
    """Time `PROBE_CALLS x at_once` calls of `model` (at most `MAX_AT_ONCE` in flight), after an untimed one."""
    from ..aio import run_sync
    from ..llm.call.entry import acomplete

    at_once = max(1, min(at_once, MAX_AT_ONCE))
    requests = probe_messages(task, 1 + PROBE_CALLS * at_once)

    async def timed() -> float:
        slots = asyncio.Semaphore(at_once)

        async def one(messages: list[dict[str, str]]) -> None:
            async with slots:
                await acomplete(model, messages, temperature=0.0, max_tokens=max_tokens, cache=False)

        await one(requests[0])  # loads the model: not timed
        t0 = time.perf_counter()
        await asyncio.gather(*(one(m) for m in requests[1:]))
        return time.perf_counter() - t0

    return Probe(model, len(requests) - 1, at_once, run_sync(timed()), max_tokens)


__all__ = ["MAX_AT_ONCE", "PROBE_CALLS", "Probe", "probe_messages", "probe_model", "probed"]
