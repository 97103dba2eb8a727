"""PES's structured outputs: the planner's reply (narrowed to the available tools), synthesis and judge.

Validation is as lenient as the design document, which caps neither the number of tool calls nor the
length of a reply's fields: a longer valid reply from a capable model is accepted. The limits below are
written into the JSON SCHEMA only (`maxItems` / `maxLength`), where a constrained decoder (the local
model's grammar) uses them to keep a small model's reply short; they never reject a reply.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from ...tools.registry import ToolRegistry
from ..runtime.replies import reply_config

MAX_TOOL_CALLS = 3
"""Most tool calls the generation schema offers in one planning reply (validation accepts any number)."""


def schema_limit(**limits: int) -> Any:
    """A field annotation whose limit (maxLength=..., maxItems=...) is in the JSON schema only, not validated."""
    return Field(json_schema_extra=dict(limits))


class ToolCallRequest(BaseModel):
    """One tool call the planner asks for."""

    model_config = reply_config()

    tool: str
    """Tool name."""
    input: dict[str, Any] | str
    """The tool's input object (or a bare string for tools that take one)."""


PLANNING_FIELDS = ("title", "intent", "plan", "thoughts", "tool_calls")
"""The planner's fields: every one optional in the design document's `planningOutput` (`plan?: any`), every one
asked for by the generation schema."""


class PlanningOutput(BaseModel):
    """The planner's reply for one iteration, read as the design document's `planningOutput`: every field
    optional (a missing text is empty, missing tool calls none), `plan` any JSON value (a non-string plan is
    kept as its JSON text); the generation schema still asks for all of them."""

    model_config = reply_config(*PLANNING_FIELDS)

    title: str = Field("", json_schema_extra={"maxLength": 80})
    """A short title for the conversation."""
    intent: str = Field("", json_schema_extra={"maxLength": 200})
    """What the user wants."""
    plan: str = Field("", json_schema_extra={"maxLength": 400})
    """The steps the agent will take."""
    thoughts: str = Field("", json_schema_extra={"maxLength": 400})
    """Reasoning about what is known and what is missing."""
    tool_calls: list[ToolCallRequest] = Field(default_factory=list, json_schema_extra={"maxItems": MAX_TOOL_CALLS})
    """Tools to call now; empty when the answer can be written."""

    @field_validator("plan", mode="before")
    @classmethod
    def _any_plan(cls, value: Any) -> Any:
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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
        model_config = ConfigDict(extra="allow", json_schema_extra=known_calls)

    return create_model(
        "PlanningOutput",
        __base__=PlanningOutput,
        tool_calls=(
            list[ToolCall],
            Field(
                default_factory=list,
                json_schema_extra={"maxItems": MAX_TOOL_CALLS},
                description="Tools to call now; empty to answer.",
            ),
        ),
    )


class SynthesisMetadata(BaseModel):
    """Extra information shown next to the answer (each list optional: the design document extracts what the
    reply gives; the generation schema asks for both)."""

    model_config = reply_config("sources", "suggestions")

    sources: list[str] = Field(default_factory=list, json_schema_extra={"maxItems": 5})
    """Documents or tools the answer relies on."""
    suggestions: list[str] = Field(default_factory=list, json_schema_extra={"maxItems": 3})
    """Follow-up questions or actions for the user."""


class SynthesisOutput(BaseModel):
    """The synthesizer's reply: the answer and its metadata (optional: the design document extracts the UI
    metadata where the reply has it; the generation schema asks for it)."""

    model_config = reply_config("content", "metadata")

    content: str = schema_limit(maxLength=2000)
    """The answer to the user."""
    metadata: SynthesisMetadata = Field(default_factory=SynthesisMetadata)
    """Sources and suggestions."""


class JudgeGrade(BaseModel):
    """The judge's grade of the final answer."""

    model_config = reply_config()

    justification: str = schema_limit(maxLength=600)
    """Why the answer earns the score."""
    score: int = Field(ge=1, le=10)
    """1 (useless) to 10 (complete and correct)."""
