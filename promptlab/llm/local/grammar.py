"""The JSON grammar of a structured call to a local model, compiled before the call reaches a model.

llama-cpp-python's JSON-schema converter (`llama_grammar.json_schema_to_gbnf`) raises whatever it meets on a schema
it cannot follow: an AssertionError for a pydantic `pattern` without `^...$`, a KeyError for a recursive model's
`$ref`, a RecursionError, and more. Compiled in the batching engine's worker, one such schema used to end the worker
and every call decoding beside it. So the grammar is compiled here, in the caller, before the request is admitted
anywhere (the engine's batch, an instance of the pool): any exception is that request's own `UnservableSchema`,
naming the cause, and the other calls go on.

`bound_schema` caps every string and array a constrained reply may hold (so decoding cannot run away on a small
model) and refuses, by the field's path, what no bounded reply can satisfy or what is not a length at all: a
`minItems` or `minLength` past the caps (a schema asking for 10^7 items compiled a 180 MB grammar, three times, for
half a minute before failing to parse), a length that is not a whole number ("abc", 1e400). A grammar longer than
`MAX_GRAMMAR_CHARS` (an enum of 100,000 values: 1.5 MB, minutes of decoding) is refused the same way.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

MAX_STRING = 600
"""Longest string a constrained local reply may hold (characters)."""
MAX_ITEMS = 6
"""Longest array a constrained local reply may hold."""
MAX_GRAMMAR_CHARS = 512 * 1024
"""Longest grammar compiled (promptlab's own models' schemas make at most about 110,000 characters)."""
SMALL_RANGE = 20
"""An integer range at most this wide is written as an enum."""
LENGTHS = ("minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum")


class UnservableSchema(ValueError):
    """A structured call whose JSON schema cannot be made into a grammar: the request's own error (not retried)."""


def _whole(node: dict[str, Any], key: str, where: str) -> int:
    value = node[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UnservableSchema(f"the JSON schema's {where}.{key} is {str(value)[:40]!r}, not a number")
    return math.floor(value) if key.startswith("max") else math.ceil(value)


def _bound(node: dict[str, Any], where: str) -> None:
    """Bound one schema node in place (see `bound_schema`)."""
    for key in LENGTHS:
        if key in node:
            whole = _whole(node, key, where)  # checked a number; a "number" field's bound keeps its fraction
            if key.endswith(("Length", "Items")) or node.get("type") == "integer":
                node[key] = whole
    kind = node.get("type")
    caps = {"string": ("Length", MAX_STRING, "MAX_STRING"), "array": ("Items", MAX_ITEMS, "MAX_ITEMS")}
    if kind in caps and not (kind == "string" and "enum" in node):
        word, cap, name = caps[kind]
        if node.get(f"min{word}", 0) > cap:
            raise UnservableSchema(
                f"the JSON schema's {where}.min{word} is {node[f'min{word}']:,}, past the {cap} a local model's "
                f"structured reply may hold (promptlab.llm.local.grammar.{name})"
            )
        node[f"max{word}"] = min(node.get(f"max{word}", cap), cap)
    elif kind == "integer" and "minimum" in node and "maximum" in node:
        low, high = node["minimum"], node["maximum"]
        if high - low <= SMALL_RANGE:
            for k in ("minimum", "maximum", "type"):
                node.pop(k)
            node["enum"] = list(range(low, high + 1))


def bound_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a JSON schema with every string and array length capped, and small integer ranges written as
    enums, so constrained decoding cannot run away on a small model.

    Raises:
        UnservableSchema: a length or bound that is not a number, or a minimum count past the caps (naming the
            field's path: `properties.xs.minItems`).
    """
    out = copy.deepcopy(schema)

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            _bound(node, where)
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    walk(out, "")
    return out


def schema_grammar(schema: dict[str, Any] | None) -> str:
    """The GBNF grammar of a JSON schema (any JSON object when there is none).

    Raises:
        UnservableSchema: the converter failed on this schema (whatever it raised), naming the cause.
    """
    from llama_cpp import llama_grammar

    if not schema:
        return str(llama_grammar.JSON_GBNF)
    try:
        grammar = str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
    except Exception as e:  # noqa: BLE001 -- the converter raises AssertionError, KeyError, RecursionError...
        detail = str(e) or repr(e)
        raise UnservableSchema(
            f"the JSON schema cannot be made into a grammar for the local model ({type(e).__name__}: "
            f"{detail[:200]}); simplify the schema (e.g. anchor a `pattern` with ^...$, avoid recursive models)"
        ) from None
    if len(grammar) > MAX_GRAMMAR_CHARS:
        raise UnservableSchema(
            f"the JSON schema's grammar for the local model is {len(grammar):,} characters, over the limit of "
            f"{MAX_GRAMMAR_CHARS:,} (MAX_GRAMMAR_CHARS: a long enum, or many fields?); simplify the schema"
        )
    return grammar


__all__ = ["MAX_GRAMMAR_CHARS", "MAX_ITEMS", "MAX_STRING", "UnservableSchema", "bound_schema", "schema_grammar"]
