"""Tools an agent loop can call: the `Tool` value, its `ToolResult`, and a `ToolRegistry` by name.

A tool never raises into the loop that runs it: bad input (checked against the tool's JSON schema),
an unknown tool name, an exception inside the tool, or an output that is not JSON-safe all come back
as a `ToolResult` with `status="error"` and a message. Every result (input, output, text, error) goes through
`promptlab.sanitize.clean` before it can reach a record or a prompt: terminal control sequences are stripped and
the values of secret environment variables redacted.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, PromptlabError
from ..sanitize import clean

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class ToolError(PromptlabError):
    """A tool could not do what it was asked; the loop receives it as an error result."""


class ToolResult(BaseModel):
    """What one tool call gave back: an output on success, a message on error."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    """Name of the tool that was called (as the caller spelled it)."""
    input: Any = None
    """The input as given by the caller (an object, or a bare string)."""
    status: Literal["success", "error"]
    """Whether the tool ran and produced an output."""
    output: Any = None
    """The tool's JSON-safe output (None on error, except where the tool ran and its output says it failed:
    a shell command's non-zero exit code keeps its exit code, stdout and stderr)."""
    error: str | None = None
    """What went wrong, on error."""
    text: str = ""
    """The output as text, for prompts and `{step_N_output}` piping ('' on error)."""

    @property
    def ok(self) -> bool:
        """True when the tool succeeded."""
        return self.status == "success"

    def brief(self, limit: int | None = 1500) -> str:
        """A one-paragraph account for a prompt: the text on success, the error otherwise (cut to `limit`
        characters with a note of how many more there were; None: never cut)."""
        body = self.text if self.ok else f"ERROR: {self.error}"
        if limit is None or len(body) <= limit:
            return body
        return body[:limit] + f" ... [{len(body) - limit} more characters]"


def _default_render(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Tool:
    """A named function an agent can call with a JSON object.

    Give either `input_model` (a pydantic model: the schema is derived from it and the input is
    validated by it, defaults filled in) or `input_schema` (a JSON schema dict, checked with
    jsonschema). `execute` takes the validated dict and may be sync or async; it returns a
    JSON-safe value. `string_arg` names the field a bare string input fills (`"2+2"` for the
    calculator means `{"expression": "2+2"}`); `render` turns the output into text; `failure` tells an
    output that is a failure (the result is then an error, the output kept).
    """

    name: str
    description: str
    execute: Callable[[dict[str, Any]], Any]
    input_schema: dict[str, Any] = field(default_factory=dict)
    input_model: type[BaseModel] | None = None
    string_arg: str | None = None
    render: Callable[[Any], str] = _default_render
    failure: Callable[[Any], str | None] | None = None
    """Says from an output whether the tool failed (the message) or not (None): a shell command that exits
    non-zero ran, but its result is an error, with the output kept."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(
                f"tool name {self.name!r} must start with a letter or _ and hold only letters, "
                "digits, _, . or - (at most 64 characters)"
            )
        if self.input_model is not None and not self.input_schema:
            object.__setattr__(self, "input_schema", self.input_model.model_json_schema())
        if not self.input_schema:
            raise ConfigError(f"tool {self.name!r} needs an input_schema or an input_model")
        if self.input_model is None:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(self.input_schema)
            except SchemaError as e:
                raise ConfigError(f"tool {self.name!r}: input_schema is not a valid JSON schema: {e.message}") from e

    def spec(self) -> dict[str, Any]:
        """Name, description and input schema, as shown to a planning model."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def validate_input(self, raw: Any) -> dict[str, Any]:
        """The input as a validated dict (a bare string fills `string_arg`).

        Raises:
            ToolError: the input does not match the schema; the message names the fields.
        """
        if isinstance(raw, str):
            if self.string_arg is None:
                raise ToolError(
                    f"tool {self.name!r} takes an object input, not a bare string; "
                    f"schema: {json.dumps(self.input_schema, sort_keys=True)}"
                )
            raw = {self.string_arg: raw}
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ToolError(f"tool {self.name!r} takes an object input, got {type(raw).__name__}")
        if self.input_model is not None:
            try:
                return self.input_model.model_validate(raw).model_dump(mode="json")
            except ValidationError as e:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or '<input>'}: {err['msg']}" for err in e.errors()
                )
                raise ToolError(f"bad input for tool {self.name!r}: {problems}") from e
        from jsonschema import Draft202012Validator

        errors = sorted(Draft202012Validator(self.input_schema).iter_errors(raw), key=lambda e: list(e.path))
        if errors:
            problems = "; ".join(f"{'.'.join(str(p) for p in e.path) or '<input>'}: {e.message}" for e in errors)
            raise ToolError(f"bad input for tool {self.name!r}: {problems}")
        return dict(raw)

    async def run(self, raw: Any) -> ToolResult:
        """Validate the input, run the tool, and return its result; never raises an Exception."""
        try:
            args = self.validate_input(raw)
            value = self.execute(args)
            if inspect.isawaitable(value):
                value = await value
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise ToolError(f"tool {self.name!r} returned an output that is not JSON-safe: {e}") from e
            failed = self.failure(value) if self.failure is not None else None
            return ToolResult(
                tool=self.name,
                input=clean(_json_safe(raw)),
                status="error" if failed else "success",
                output=clean(value),
                error=clean(failed) if failed else None,
                text="" if failed else clean(self.render(value)),
            )
        except Exception as e:  # a tool failure is a result for the loop, never a crash
            message = str(e) if isinstance(e, ToolError) else f"{type(e).__name__}: {e}"
            return ToolResult(tool=self.name, input=clean(_json_safe(raw)), status="error", error=clean(message))


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return repr(value)


class ToolRegistry:
    """The tools available to one run, by name; an unknown name lists the known ones."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._aliases: dict[str, str] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Add a tool; a second tool of the same name is a ConfigError."""
        if tool.name in self._tools:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def alias(self, name: str, target: str) -> None:
        """Let `name` call the tool `target` (e.g. a design document's name for a tool that stands in for it);
        an alias is not listed by `names`, `specs`, `call_schemas` or `describe`: models are shown each tool
        once, by its own name."""
        if name in self._tools or name in self._aliases:
            raise ConfigError(f"a tool named {name!r} is already registered")
        self.get(target)
        self._aliases[name] = target

    def names(self) -> list[str]:
        """Tool names, in the order they were added (aliases not included)."""
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called `name` (or the tool an alias `name` stands for).

        Raises:
            ConfigError: no such tool; the message lists the known ones.
        """
        name = self._aliases.get(name, name)
        if name not in self._tools:
            raise ConfigError(self._unknown(name))
        return self._tools[name]

    def _unknown(self, name: str) -> str:
        return f"unknown tool {name!r}; known tools: {', '.join(self._tools) or '(none)'}"

    def specs(self) -> list[dict[str, Any]]:
        """Every tool's name, description and input schema."""
        return [t.spec() for t in self._tools.values()]

    def call_schemas(self, name_key: str = "tool", input_key: str = "input") -> list[dict[str, Any]]:
        """One JSON schema per tool for a call object {name_key: <tool name>, input_key: <its input>}.

        The input is the tool's own input schema (or a bare string, for tools that take one). A
        planner's response schema can offer these as `anyOf`, so that a constrained decoder (or a
        provider that follows schemas) can only write calls that name a real tool with a valid input.
        """
        out = []
        for t in self._tools.values():
            schema = {k: v for k, v in _compact_schema(t.input_schema).items() if k != "description"}
            given = {"anyOf": [{"type": "string"}, schema]} if t.string_arg else schema
            out.append(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [name_key, input_key],
                    "properties": {name_key: {"type": "string", "enum": [t.name]}, input_key: given},
                }
            )
        return out

    def describe(self) -> str:
        """The tools as text for a prompt: one paragraph per tool with its input schema."""
        lines = []
        for t in self._tools.values():
            bare = f" A bare string input fills '{t.string_arg}'." if t.string_arg else ""
            schema = {k: v for k, v in _compact_schema(t.input_schema).items() if k != "description"}
            lines.append(f"- {t.name}: {t.description}{bare}\n  input schema: {json.dumps(schema, sort_keys=True)}")
        return "\n".join(lines) if lines else "(no tools)"

    async def run(self, name: str, raw: Any) -> ToolResult:
        """Run tool `name` (or an alias of one) on `raw`; an unknown name is an error result listing the known
        tools. The result names the tool as the caller spelled it."""
        target = self._aliases.get(name, name)
        if target not in self._tools:
            return ToolResult(tool=name, input=clean(_json_safe(raw)), status="error", error=clean(self._unknown(name)))
        result = await self._tools[target].run(raw)
        return result if target == name else result.model_copy(update={"tool": name})

    def __contains__(self, name: object) -> bool:
        return name in self._tools or name in self._aliases

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def _compact_schema(node: Any) -> Any:
    """A schema without pydantic's titles, which only add tokens to a prompt (a property named
    'title' holds a dict, so only string-valued 'title' keys are dropped)."""
    if isinstance(node, dict):
        return {k: _compact_schema(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_compact_schema(v) for v in node]
    return node
