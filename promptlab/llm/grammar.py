"""The JSON grammar of a structured call to a local model, compiled before the call reaches a model.

llama-cpp-python's JSON-schema converter (`llama_grammar.json_schema_to_gbnf`) raises whatever it meets on a schema
it cannot follow: an AssertionError for a pydantic `pattern` without `^...$`, a KeyError for a recursive model's
`$ref`, a RecursionError, and more. Compiled in the batching engine's worker, one such schema used to end the worker
and every call decoding beside it. So the grammar is compiled here, in the caller, before the request is admitted
anywhere (the engine's batch, an instance of the pool): any exception is that request's own `UnservableSchema`,
naming the cause, and the other calls go on.
"""

from __future__ import annotations

import json
from typing import Any


class UnservableSchema(ValueError):
    """A structured call whose JSON schema cannot be made into a grammar: the request's own error (not retried)."""


def schema_grammar(schema: dict[str, Any] | None) -> str:
    """The GBNF grammar of a JSON schema (any JSON object when there is none).

    Raises:
        UnservableSchema: the converter failed on this schema (whatever it raised), naming the cause.
    """
    from llama_cpp import llama_grammar

    if not schema:
        return str(llama_grammar.JSON_GBNF)
    try:
        return str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
    except Exception as e:  # noqa: BLE001 -- the converter raises AssertionError, KeyError, RecursionError...
        detail = str(e) or repr(e)
        raise UnservableSchema(
            f"the JSON schema cannot be made into a grammar for the local model ({type(e).__name__}: "
            f"{detail[:200]}); simplify the schema (e.g. anchor a `pattern` with ^...$, avoid recursive models)"
        ) from None


__all__ = ["UnservableSchema", "schema_grammar"]
