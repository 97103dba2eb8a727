"""PES's observations and stream token kinds, named as in the design document.

Observations (`ObservationType`, the design's list) are kept on the run (`Run.info["observations"]`) and
emitted as `observation` events. Streamed pieces of the planning and synthesis calls are emitted as
`token` events whose `token_type` is one of the design's four kinds (`TOKEN_KINDS`): text inside a
`<think>...</think>` block (how reasoning models stream their thinking) is THINKING, the rest RESPONSE.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from ...events import Event, EventHandler, wants_tokens


class ObservationType(StrEnum):
    """Kinds of observation a PES run records (the design document's list)."""

    INTENT = "INTENT"
    TITLE = "TITLE"
    PLAN = "PLAN"
    THOUGHTS = "THOUGHTS"
    TOOL_CALL = "TOOL_CALL"
    TOOL_EXECUTION = "TOOL_EXECUTION"
    SYNTHESIS = "SYNTHESIS"
    ERROR = "ERROR"
    FINAL_RESPONSE = "FINAL_RESPONSE"
    STATE_UPDATE = "STATE_UPDATE"
    LLM_STREAM_START = "LLM_STREAM_START"
    LLM_STREAM_METADATA = "LLM_STREAM_METADATA"
    LLM_STREAM_END = "LLM_STREAM_END"
    LLM_STREAM_ERROR = "LLM_STREAM_ERROR"


TOKEN_KINDS: dict[str, tuple[str, str]] = {
    "planning": ("AGENT_THOUGHT_LLM_THINKING", "AGENT_THOUGHT_LLM_RESPONSE"),
    "synthesis": ("FINAL_SYNTHESIS_LLM_THINKING", "FINAL_SYNTHESIS_LLM_RESPONSE"),
}
"""Stage of a streamed call -> (thinking kind, response kind)."""

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class Observer:
    """Records observations on a list and emits each as an `observation` event through `emit`."""

    def __init__(self, emit: Callable[..., None]) -> None:
        self.items: list[dict[str, Any]] = []
        self.emit = emit

    def __call__(self, kind: ObservationType, content: Any, iteration: int | None = None) -> None:
        self.items.append({"type": kind.value, "content": content, "iteration": iteration})
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        self.emit(
            "observation",
            f"{kind.value}: {text[:200]}",
            iteration=iteration,
            phase="observe",
            type=kind.value,
            content=content,
        )


class StreamTyper:
    """Wraps an event handler: `token` events of a PES stage get the design's token kind.

    A `<think>` tag may arrive split over pieces; its start is held back until the tag is complete (or the
    call ends: a `model_call` or `error` event flushes what is held)."""

    def __init__(self, handler: EventHandler) -> None:
        self.handler = handler
        self.wants_tokens = wants_tokens(handler)  # streams only for a handler that asks for tokens
        self.inside: dict[tuple[Any, ...], bool] = {}
        self.held: dict[tuple[Any, ...], str] = {}

    def __call__(self, event: Event) -> None:
        stage = event.data.get("token_type") if event.kind == "token" else None
        if stage in TOKEN_KINDS:
            key = (event.run_id, event.phase, event.iteration)
            for thinking, text in self.split(key, str(event.data.get("text", ""))):
                self.forward(event, stage, thinking, text)
            return
        if event.kind in ("model_call", "error"):
            self.flush((event.run_id, event.phase, event.iteration), event)
        self.handler(event)

    def forward(self, event: Event, stage: str, thinking: bool, text: str) -> None:
        kind = TOKEN_KINDS[stage][0 if thinking else 1]
        self.handler(
            event.model_copy(
                update={"message": text, "data": {**event.data, "token_type": kind, "stage": stage, "text": text}}
            )
        )

    def split(self, key: tuple[Any, ...], text: str) -> list[tuple[bool, str]]:
        """(inside a think block, text) segments of the next piece of one call's stream."""
        buf, inside, out = self.held.pop(key, "") + text, self.inside.get(key, False), []
        while buf:
            tag = THINK_CLOSE if inside else THINK_OPEN
            at = buf.find(tag)
            if at >= 0:
                if at:
                    out.append((inside, buf[:at]))
                buf, inside = buf[at + len(tag) :], not inside
                continue
            keep = next((k for k in range(min(len(tag) - 1, len(buf)), 0, -1) if tag.startswith(buf[-k:])), 0)
            if keep:
                self.held[key], buf = buf[-keep:], buf[:-keep]
            if buf:
                out.append((inside, buf))
            break
        self.inside[key] = inside
        return out

    def flush(self, key: tuple[Any, ...], event: Event) -> None:
        held, inside = self.held.pop(key, ""), self.inside.pop(key, False)
        stage = "synthesis" if event.phase == "synthesize" else "planning"
        if held:
            self.forward(event.model_copy(update={"kind": "token"}), stage, inside, held)


__all__ = ["ObservationType", "Observer", "StreamTyper", "THINK_CLOSE", "THINK_OPEN", "TOKEN_KINDS"]
