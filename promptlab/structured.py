"""Structured output: schemas for providers, JSON found in free text, re-ask messages."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def schema_json(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a pydantic model."""
    return schema.model_json_schema()


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI-style `response_format` litellm passes on to providers that take a schema."""
    return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": schema_json(schema)}}


def schema_instruction(schema: type[BaseModel]) -> str:
    """The instruction appended for providers that cannot be given the schema natively."""
    return (
        "Reply with a single JSON object, and nothing else, that validates against this JSON schema:\n"
        + json.dumps(schema_json(schema), separators=(",", ":"))
    )


def _balanced_object(text: str) -> str | None:
    """The first balanced {...} span of text, respecting strings; None if there is none."""
    start = text.find("{")
    while start != -1:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced block, or the first {...} in prose.

    Raises:
        ValueError: no JSON could be found; the message says what was tried.
    """
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    obj = _balanced_object(text)
    if obj is not None:
        candidates.append(obj)
    for c in candidates:
        if not c:
            continue
        try:
            return json.loads(c, strict=False)  # raw newlines inside strings are common
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON object found in the reply (tried the whole text, code fences and {...} spans)")


def parse(text: str, schema: type[BaseModel]) -> BaseModel:
    """Validate the JSON found in `text` against `schema`.

    Raises:
        ValueError: no JSON found, or the JSON does not validate (the message lists the problems).
    """
    data = extract_json(text)
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()
        )
        raise ValueError(f"the JSON does not match {schema.__name__}: {problems}") from e


def repair_message(error: str) -> dict[str, str]:
    """The user message that asks the model to correct an invalid reply."""
    return {
        "role": "user",
        "content": f"Your reply could not be used: {error}. Reply again with only the corrected JSON object.",
    }
