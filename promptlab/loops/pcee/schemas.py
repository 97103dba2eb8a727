"""PCEE's reply schemas and the controller's placeholder rules (`{step_N_output}`), kept apart from the loop.

Validation is as lenient as the design document, which limits neither a plan's steps nor an instruction's
length: those limits are written into the JSON schema only (`maxItems` / `maxLength`), where a constrained
decoder (the local model's grammar) keeps a small model's reply short. A plan needs one step or more, unique
step ids, and placeholders that name earlier steps (a plan breaking these is asked for again)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from ...errors import PromptlabError
from ...tools.registry import ToolRegistry
from ..runtime.replies import reply_config

PLACEHOLDER = re.compile(r"\{step_(\d+)_output\}")
"""A `{step_N_output}` placeholder; group 1 is N."""
MAX_PLAN_STEPS = 12
"""Most steps the generation schema offers a plan (validation accepts any number, as the seed)."""
MAX_FIX_STEPS = 3
"""Most steps the generation schema offers a fix plan (validation accepts any number)."""
MAX_INSTRUCTION = 300
"""Longest instruction the generation schema offers (validation accepts any length)."""


class PlanStep(BaseModel):
    """One step of a plan."""

    model_config = reply_config()

    step_id: int = Field(ge=1)
    """The step's number (placeholders name it as {step_N_output})."""
    instruction: str = Field(json_schema_extra={"maxLength": MAX_INSTRUCTION})
    """What the step must achieve (the evaluator judges against it)."""
    tool_name: str
    """The tool that carries it out."""
    tool_input: str | dict[str, Any]
    """The tool's input (an object, or a bare string); may hold {step_N_output} placeholders."""


class Plan(BaseModel):
    """The planner's plan."""

    model_config = reply_config()

    plan: list[PlanStep] = Field(min_length=1, json_schema_extra={"maxItems": MAX_PLAN_STEPS})
    """Steps in execution order."""

    @model_validator(mode="after")
    def _unique_ids(self) -> Plan:
        ids = [s.step_id for s in self.plan]
        if len(ids) != len(set(ids)):
            raise ValueError(f"step_id values must be unique, got {ids}")
        earlier: set[int] = set()
        for step in self.plan:
            later = sorted(n for n in placeholder_steps(step.tool_input) if n not in earlier)
            if later:
                names = ", ".join(f"{{step_{n}_output}}" for n in later)
                raise ValueError(
                    f"step {step.step_id} uses {names}, but a placeholder may only name a step "
                    f"that comes before it (steps before it: {sorted(earlier) or 'none'})"
                )
            earlier.add(step.step_id)
        return self


class FixPlan(BaseModel):
    """The corrector's short plan to repair a failed step before it is retried."""

    model_config = reply_config()

    plan: list[PlanStep] = Field(min_length=1, json_schema_extra={"maxItems": MAX_FIX_STEPS})
    """The fix steps (the generation schema asks for 1 to 3)."""


def plan_schemas(tools: ToolRegistry) -> tuple[type[Plan], type[FixPlan]]:
    """Plan and FixPlan whose JSON schemas only offer steps that call one of `tools` with a valid input.

    Only the schema is narrowed (a constrained decoder or a schema-following provider keeps to it);
    validation accepts any step, and an unknown tool or a bad input is a step failure when it runs.
    """
    return _plan_schemas(json.dumps(tools.call_schemas("tool_name", "tool_input")))


@lru_cache(maxsize=64)
def _plan_schemas(branches_json: str) -> tuple[type[Plan], type[FixPlan]]:
    head = {k: v for k, v in PlanStep.model_json_schema()["properties"].items() if k in ("step_id", "instruction")}
    branches = []
    for b in json.loads(branches_json):
        # the tool's name right after step_id: a constrained decoder then follows one branch only
        props = {
            "step_id": head["step_id"],
            "tool_name": b["properties"]["tool_name"],
            "instruction": head["instruction"],
            "tool_input": b["properties"]["tool_input"],
        }
        branches.append({**b, "properties": props, "required": list(props)})

    def known_steps(schema: dict[str, Any]) -> None:
        schema.clear()
        schema["anyOf"] = branches

    class Step(PlanStep):
        model_config = ConfigDict(extra="allow", json_schema_extra=known_steps)

    plan = create_model(
        "Plan", __base__=Plan, plan=(list[Step], Field(min_length=1, json_schema_extra={"maxItems": MAX_PLAN_STEPS}))
    )
    fix = create_model(
        "FixPlan",
        __base__=FixPlan,
        plan=(list[Step], Field(min_length=1, json_schema_extra={"maxItems": MAX_FIX_STEPS})),
    )
    return plan, fix


class Verdict(BaseModel):
    """The evaluator's judgement of one executed step."""

    model_config = reply_config()

    verdict: Literal["success", "failure"]
    """Whether the step achieved its instruction."""
    reason: str = Field(json_schema_extra={"maxLength": 300})
    """Why (the length is a generation hint: a longer reason is accepted)."""


class PlaceholderError(PromptlabError, KeyError):
    """A `{step_N_output}` placeholder names a step that has no output."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def placeholder_steps(tool_input: Any) -> set[int]:
    """The step numbers N of every `{step_N_output}` placeholder in `tool_input` (strings, dicts, lists)."""
    if isinstance(tool_input, str):
        return {int(m.group(1)) for m in PLACEHOLDER.finditer(tool_input)}
    if isinstance(tool_input, dict):
        return set().union(*(placeholder_steps(v) for v in tool_input.values()))
    if isinstance(tool_input, list):
        return set().union(*(placeholder_steps(v) for v in tool_input))
    return set()


def fill_placeholders(tool_input: Any, outputs: dict[int, str]) -> Any:
    """`tool_input` with every `{step_N_output}` replaced by step N's output (in strings, dicts, lists).

    Other braces are left alone. A pure function: the input is not changed.

    Raises:
        PlaceholderError: a placeholder names a step with no output; the message names it.
    """
    if isinstance(tool_input, str):

        def sub(m: re.Match[str]) -> str:
            n = int(m.group(1))
            if n not in outputs:
                have = ", ".join(str(k) for k in sorted(outputs)) or "none"
                raise PlaceholderError(
                    f"placeholder {m.group(0)} refers to step {n}, which has no output (steps with output: {have})"
                )
            return outputs[n]

        return PLACEHOLDER.sub(sub, tool_input)
    if isinstance(tool_input, dict):
        return {k: fill_placeholders(v, outputs) for k, v in tool_input.items()}
    if isinstance(tool_input, list):
        return [fill_placeholders(v, outputs) for v in tool_input]
    return tool_input


__all__ = [
    "FixPlan",
    "MAX_FIX_STEPS",
    "MAX_INSTRUCTION",
    "MAX_PLAN_STEPS",
    "PLACEHOLDER",
    "Plan",
    "PlaceholderError",
    "PlanStep",
    "Verdict",
    "fill_placeholders",
    "placeholder_steps",
    "plan_schemas",
]
