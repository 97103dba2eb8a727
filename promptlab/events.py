"""Live events a loop emits while it runs, and two ready consumers: a printed log and a list."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field

from .sanitize import clean

EventKind = Literal[
    "run_started",
    "phase",
    "model_call",
    "score",
    "decision",
    "tool_call",
    "tool_result",
    "observation",
    "error",
    "token",
    "run_finished",
]


class Event(BaseModel):
    """One thing that happened during a run, sent to the `on_event` callback as it happens."""

    model_config = ConfigDict(extra="forbid")

    kind: EventKind
    """What happened."""
    run_id: str
    """The run it belongs to."""
    loop: str
    """The loop's name."""
    iteration: int | None = None
    """Iteration number (0: the starting prompt scored as candidate 0), None outside iterations."""
    phase: str | None = None
    """Phase name."""
    role: str | None = None
    """Role, tool or agent concerned."""
    message: str = ""
    """A one-line human-readable account."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Details: scores, model call accounting, tool input/output, token text and its type, ..."""
    time: float = Field(default_factory=time.time)
    """Unix time of the event."""


EventHandler = Callable[[Event], None]
"""Receives every event of a run. `token` events (pieces of a reply as it streams) go only to a handler that
asks for them with a true `wants_tokens` attribute (`PrintLog(tokens=True)`, `EventList(tokens=True)`, or
`handler.wants_tokens = True` on a function): only then are replies streamed (see `wants_tokens`)."""


def wants_tokens(handler: EventHandler | None) -> bool:
    """Whether a handler asks for `token` events (its `wants_tokens` attribute is true). Streaming costs: a
    streamed request takes more client CPU and not every server streams, so a run streams its replies only
    for a handler that asks (a live view); sweeps pass none that does, so no sweep request is streamed."""
    return bool(getattr(handler, "wants_tokens", False))


class PrintLog:
    """An `on_event` handler that prints a readable line per event (`tokens=True`: the reply pieces too, and
    then replies are streamed); terminal control sequences are stripped and secret values redacted from what it
    prints."""

    def __init__(self, stream: TextIO | None = None, *, tokens: bool = False) -> None:
        self.stream = stream
        self.tokens = tokens
        self.wants_tokens = tokens

    def __call__(self, event: Event) -> None:
        if event.kind == "token" and not self.tokens:
            return
        where = f"it{event.iteration}" if event.iteration is not None else "--"
        who = f" {event.role}" if event.role else ""
        line = f"[{event.loop} {where}] {event.kind}{who}: {event.message}"
        print(clean(line), file=self.stream or sys.stdout, flush=True)  # a terminal obeys no model-written escape


class EventList(list[Event]):
    """An `on_event` handler that keeps every event (handy in tests and notebooks); `tokens=True` asks for the
    `token` events too (and so streams the replies)."""

    def __init__(self, *, tokens: bool = False) -> None:
        super().__init__()
        self.wants_tokens = tokens

    def __call__(self, event: Event) -> None:
        self.append(event)

    def kinds(self) -> list[str]:
        """The kinds of the events so far, in order."""
        return [e.kind for e in self]
