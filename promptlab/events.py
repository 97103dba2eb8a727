"""Live events a loop emits while it runs, and two ready consumers: a printed log and a list."""

from __future__ import annotations

import json
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


LABELS = {
    "prompt_text": "prompt",
    "summary": "reflection",
    "qualitative_feedback": "feedback",
    "content": "answer",
    "text": "reply",
    "tool_calls": "tool calls",
}
"""How `describe_output` names a reply's keys (others go by their own name)."""
ITEM_VIEWS: dict[frozenset[str], Callable[[dict[str, Any]], str]] = {
    frozenset({"criterion", "score"}): lambda e: (
        f"{e['criterion']}: {_flat(e['score'])} ({e.get('justification', '')})"
    ),
    frozenset({"step_id", "tool_name"}): lambda e: (
        f"step {e['step_id']}: {e['tool_name']}({_flat(e.get('tool_input'))}): {e.get('instruction', '')}"
    ),
    frozenset({"tool", "input"}): lambda e: f"{e['tool']}({_flat(e['input'])})",
}
"""One-line views of a reply's list entries, by the keys that identify them (P³RO's score entries, PCEE's
plan steps, PES's tool calls); other entries are shown as compact JSON."""


def _flat(value: Any, limit: int | None = None) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _item(value: Any, limit: int) -> str:
    view = next((f for keys, f in ITEM_VIEWS.items() if isinstance(value, dict) and keys <= set(value)), None)
    return _flat(view(value) if view else value, limit)


def describe_output(output: dict[str, Any], limit: int = 600) -> list[str]:
    """A role's reply as readable lines: each key (named as `LABELS` says) with its text, its list entries one
    per line (numbered), nested objects by their keys; every text cut to `limit` characters."""
    lines: list[str] = []
    for key, value in output.items():
        label = LABELS.get(key, key)
        if isinstance(value, list):
            lines.append(f"{label}:" + ("" if value else " (none)"))
            lines += [f"  {k}. {_item(v, limit)}" for k, v in enumerate(value, 1)]
        elif isinstance(value, dict):
            lines.append(f"{label}:")
            lines += [f"  {line}" for line in describe_output(value, limit)]
        else:
            text = _flat(value, limit)
            lines += [f"{label}:", *(f"  {t}" for t in text.splitlines())] if "\n" in text else [f"{label}: {text}"]
    return lines


class PrintLog:
    """An `on_event` handler that prints a readable line per event, and under each model call the reply it
    gave, readably (the criteria, the plan, the prompt, the scores, the reflection...: `describe_output`;
    `outputs=False` leaves them out); `tokens=True` prints the reply pieces too (and then replies are streamed).
    Terminal control sequences are stripped and secret values redacted from what it prints."""

    def __init__(self, stream: TextIO | None = None, *, tokens: bool = False, outputs: bool = True) -> None:
        self.stream = stream
        self.tokens = tokens
        self.outputs = outputs
        self.wants_tokens = tokens

    def __call__(self, event: Event) -> None:
        if event.kind == "token" and not self.tokens:
            return
        where = f"it{event.iteration}" if event.iteration is not None else "--"
        who = f" {event.role}" if event.role else ""
        lines = [f"[{event.loop} {where}] {event.kind}{who}: {event.message}"]
        output = event.data.get("output")
        if self.outputs and event.kind == "model_call" and isinstance(output, dict):
            lines += [f"    {line}" for line in describe_output(output)]
        text = "\n".join(clean(line) for line in lines)  # a terminal obeys no model-written escape
        print(text, file=self.stream or sys.stdout, flush=True)


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
