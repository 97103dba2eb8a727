"""PES's structured outputs: the planner's reply (narrowed to the available tools), synthesis and judge."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..tools import ToolRegistry

MAX_TOOL_CALLS = 3
"""Most tool calls one planning reply may ask for."""


class ToolCallRequest(BaseModel):
    """One tool call the planner asks for."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    """Tool name."""
    input: dict[str, Any] | str
    """The tool's input object (or a bare string for tools that take one)."""


class PlanningOutput(BaseModel):
    """The planner's reply for one iteration."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(max_length=80)
    """A short title for the conversation."""
    intent: str = Field(max_length=200)
    """What the user wants."""
    plan: str = Field(max_length=400)
    """The steps the agent will take."""
    thoughts: str = Field(max_length=400)
    """Reasoning about what is known and what is missing."""
    tool_calls: list[ToolCallRequest] = Field(max_length=MAX_TOOL_CALLS)
    """Tools to call now; empty when the answer can be written."""


def planning_schema(tools: ToolRegistry) -> type[PlanningOutput]:
    """PlanningOutput whose JSON schema only offers calls of `tools` with valid inputs.

    Only the schema is narrowed (a constrained decoder or a schema-following provider keeps to it);
    validation still accepts any call, and an unknown tool or a bad input comes back as a tool error.
    """
    return _planning_schema(json.dumps(tools.call_schemas("tool", "input")))


@lru_cache(maxsize=64)
def _planning_schema(branches_json: str) -> type[PlanningOutput]:
    branches = json.loads(branches_json)

    def known_calls(schema: dict[str, Any]) -> None:
        schema.clear()
        schema["anyOf"] = branches

    class ToolCall(ToolCallRequest):
        model_config = ConfigDict(extra="forbid", json_schema_extra=known_calls)

    return create_model("PlanningOutput", __base__=PlanningOutput, tool_calls=(
        list[ToolCall], Field(max_length=MAX_TOOL_CALLS, description="Tools to call now; empty to answer.")))


class SynthesisMetadata(BaseModel):
    """Extra information shown next to the answer."""

    model_config = ConfigDict(extra="forbid")

    sources: list[str] = Field(max_length=5)
    """Documents or tools the answer relies on."""
    suggestions: list[str] = Field(max_length=3)
    """Follow-up questions or actions for the user."""


class SynthesisOutput(BaseModel):
    """The synthesizer's reply: the answer and its metadata."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(max_length=2000)
    """The answer to the user."""
    metadata: SynthesisMetadata
    """Sources and suggestions."""


class JudgeGrade(BaseModel):
    """The judge's grade of the final answer."""

    model_config = ConfigDict(extra="forbid")

    justification: str = Field(max_length=600)
    """Why the answer earns the score."""
    score: int = Field(ge=1, le=10)
    """1 (useless) to 10 (complete and correct)."""
