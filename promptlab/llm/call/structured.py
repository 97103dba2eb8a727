"""Structured output: schemas for providers, JSON found in free text, re-ask messages."""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic import BaseModel, ValidationError


def schema_json(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a pydantic model (a fresh copy: the caller may change it)."""
    return json.loads(_schema_text(schema))  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=256)
def _schema_text(schema: type[BaseModel]) -> str:
    """A model's JSON schema as JSON text, made once per class (pydantic builds it anew on each call: ~0.3 ms, and
    every structured call needs it for its cache key and its request)."""
    return json.dumps(schema.model_json_schema())


def response_format(schema: type[BaseModel], form: str = "json_schema") -> dict[str, Any]:
    """The `response_format` that gives a provider the schema: OpenAI's json_schema form (litellm passes it
    on), or with `form="json_object"` the `{type: json_object, schema}` form of llama-cpp-python's server."""
    if form == "json_object":
        return {"type": "json_object", "schema": schema_json(schema)}
    return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": schema_json(schema)}}


def schema_instruction(schema: type[BaseModel]) -> str:
    """The instruction appended for providers that cannot be given the schema natively."""
    return "Reply with a single JSON object, and nothing else, that validates against this JSON schema:\n" + json.dumps(
        schema_json(schema), separators=(",", ":")
    )


MAX_JSON_CHARS = 200_000
"""The largest JSON object parsed out of a reply; a bigger span is skipped (and named in the error)."""
MAX_CANDIDATES = 64
"""How many JSON objects, counted from the end of a reply, are tried against the schema."""


def object_spans(text: str) -> list[tuple[int, int]]:
    """The outermost balanced {...} spans of `text`, in order, found in one pass (linear time).

    Braces inside JSON strings do not count. A span nested in a larger closed span is not returned (the
    larger one is), so the spans never overlap and parsing all of them stays linear in the text's length.
    """
    open_at: list[int] = []
    closed: list[tuple[int, int]] = []
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = bool(open_at)  # quotes in prose outside any brace are not strings
        elif ch == "{":
            open_at.append(i)
        elif ch == "}" and open_at:
            start = open_at.pop()
            while closed and closed[-1][0] > start:  # spans inside this one are not outermost
                closed.pop()
            closed.append((start, i + 1))
    return closed


def json_candidates(text: str) -> list[Any]:
    """Every JSON value a reply may mean, in reading order: the whole text if it is JSON, else each
    outermost {...} span that parses (fenced blocks are found the same way).

    Raises:
        ValueError: nothing parses; the message says what was tried (and any span over the size cap).
    """
    whole = text.strip()
    if whole and len(whole) <= MAX_JSON_CHARS:
        try:
            return [json.loads(whole, strict=False)]  # raw newlines inside strings are common
        except (json.JSONDecodeError, RecursionError):
            pass
    found: list[Any] = []
    too_big = 0
    for a, b in object_spans(text):
        if b - a > MAX_JSON_CHARS:
            too_big = max(too_big, b - a)
            continue
        try:
            found.append(json.loads(text[a:b], strict=False))
        except (json.JSONDecodeError, RecursionError):
            continue
    if found:
        return found
    if too_big:
        raise ValueError(f"the JSON object in the reply has {too_big} characters, over the cap of {MAX_JSON_CHARS}")
    raise ValueError("no JSON object found in the reply (tried the whole text and every {...} span)")


def extract_json(text: str) -> Any:
    """The last JSON value in a reply (see `json_candidates`).

    Raises:
        ValueError: no JSON could be found; the message says what was tried.
    """
    return json_candidates(text)[-1]


def _problems(schema: type[BaseModel], e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors())


def parse(text: str, schema: type[BaseModel]) -> BaseModel:
    """Validate the JSON found in `text` against `schema`, strictly: a bool is not a number, a string is
    not a number. Where the reply holds several JSON objects (an example, then the answer), the LAST one
    that validates wins.

    Raises:
        ValueError: no JSON found, or none of it validates (the message lists the last object's problems).
    """
    candidates = json_candidates(text)
    last_error: ValidationError | None = None
    for data in reversed(candidates[-MAX_CANDIDATES:]):
        try:
            return schema.model_validate_json(json.dumps(data), strict=True)
        except ValidationError as e:
            last_error = last_error or e
    assert last_error is not None
    raise ValueError(f"the JSON does not match {schema.__name__}: {_problems(schema, last_error)}") from last_error


def repair_message(error: str) -> dict[str, str]:
    """The user message that asks the model to correct an invalid reply."""
    return {
        "role": "user",
        "content": f"Your reply could not be used: {error}. Reply again with only the corrected JSON object.",
    }
