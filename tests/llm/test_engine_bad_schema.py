"""#41 item 2: a request that cannot be served fails alone. A schema llama-cpp-python's converter cannot make into a
grammar (a pydantic `pattern` without ^...$ raises AssertionError, a recursive model KeyError) is the request's own
error, named, found before the request is admitted into the engine's batch (or takes an instance of the pool); the
worker and the other calls go on. Before, the worker caught only ValueError: it died, and every call decoding
beside it failed as "crashed natively"."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.llm.local import engine
from promptlab.llm.local import pool as local
from promptlab.llm.local.grammar import UnservableSchema, schema_grammar


class Unanchored(BaseModel):
    code: str = Field(pattern=r"[A-Z]{3}")


class Node(BaseModel):
    name: str
    children: list[Node] = []


BAD: dict[str, type[BaseModel]] = {"pattern without ^$": Unanchored, "recursive model": Node}


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_unservable_schema_is_named_before_any_model(name: str) -> None:
    schema = local.bound_schema(BAD[name].model_json_schema())
    with pytest.raises(UnservableSchema, match=r"cannot be made into a grammar for the local model \((Assertion|Key)"):
        schema_grammar(schema)
    with pytest.raises(UnservableSchema):
        local.engine_params({"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})


@pytest.mark.local_model
@pytest.mark.slow
def test_the_worker_survives_a_schema_it_cannot_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request reaching the worker uncompiled (as every structured request did before) fails alone."""
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "batch")
    eng = engine.engine_for(local.resolve_model_path("smollm2"), local.N_CTX)
    messages = [{"role": "user", "content": "Say yes."}]
    bad, good = engine.Pending(), engine.Pending()
    raw = {**local.engine_params({"max_tokens": 4}), "response_format": {"schema": Unanchored.model_json_schema()}}
    eng.submit(messages, raw, bad)
    eng.submit(messages, local.engine_params({"max_tokens": 4}), good)
    failed = bad.last(timeout=120)
    assert failed[0] == "error" and failed[2] == "bad_request" and "Pattern must start with" in failed[3]
    assert good.last(timeout=120)[0] == "done" and eng.alive
    assert engine.engine_for(local.resolve_model_path("smollm2"), local.N_CTX) is eng  # the same worker


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["batch", "pool"])
def test_concurrent_calls_lose_only_the_unservable_ones(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", mode)

    async def run() -> list[Any]:
        ordinary = [pl.acomplete("local/smollm2", f"Say {i}.", max_tokens=3, cache=False) for i in range(6)]
        bad = [pl.acomplete("local/smollm2", "Answer.", schema=m, cache=False) for m in BAD.values()]
        return list(await asyncio.gather(*ordinary, *bad, return_exceptions=True))

    *ordinary, unanchored, recursive = asyncio.run(run())
    assert all(isinstance(c, pl.Completion) and c.output_tokens for c in ordinary), ordinary
    for e in (unanchored, recursive):
        assert isinstance(e, pl.ProviderError) and not e.retryable and e.attempts == 1
        assert "local/smollm2" in str(e) and "cannot be made into a grammar" in str(e)
    assert "Pattern must start" in str(unanchored) and "KeyError" in str(recursive)
    if mode == "batch":
        assert all(eng.alive for eng in engine.running().values())


@pytest.mark.parametrize(
    ("node", "match"),
    [
        (
            {"type": "array", "items": {"type": "integer"}, "minItems": 10**7},
            r"properties\.x\.minItems is 10,000,000, past",
        ),
        ({"type": "string", "minLength": 10**7}, r"properties\.x\.minLength is 10,000,000, past the 600"),
        ({"type": "string", "maxLength": "abc"}, r"properties\.x\.maxLength is 'abc', not a number"),
        (
            {"type": "array", "items": {"type": "integer"}, "maxItems": 1e400},
            r"properties\.x\.maxItems is 'inf', not a",
        ),
        ({"enum": [f"v{i}" for i in range(100_000)]}, r"grammar for the local model is 1,488,9\d\d characters, over"),
    ],
)
def test_a_schema_no_bounded_reply_can_satisfy_is_refused_at_once_by_its_field(
    node: dict[str, Any], match: str
) -> None:
    """Round 5 of item 2: minItems 10^7 compiled a 180 MB grammar three times (33 s) before a ParseError,
    minLength 10^7 took 177 s, an enum of 100,000 values 167 s of decoding; "abc" or 1e400 as a length was a bare
    ValueError or OverflowError. Each is now refused before any model, naming the field."""
    schema = {"type": "object", "properties": {"x": node}, "required": ["x"]}
    with pytest.raises(UnservableSchema, match=match):
        schema_grammar(local.bound_schema(schema))
    with pytest.raises(UnservableSchema, match=match):
        local.engine_params({"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})


def test_a_number_fields_bounds_keep_their_fraction_and_an_integers_are_made_whole() -> None:
    schema = {"properties": {"p": {"type": "number", "minimum": 0.5, "maximum": 9.5},
                             "n": {"type": "integer", "minimum": 0.5, "maximum": 3.7}}}  # fmt: skip
    bounded = local.bound_schema(schema)["properties"]
    assert bounded["p"] == {"type": "number", "minimum": 0.5, "maximum": 9.5}
    assert bounded["n"] == {"enum": [1, 2, 3]}


@pytest.mark.local_model
@pytest.mark.slow
def test_a_local_call_whose_schema_asks_past_the_caps_fails_alone_without_a_model_call() -> None:
    class Many(BaseModel):
        xs: list[int] = Field(min_length=10**7)

    with pytest.raises(pl.ProviderError) as err:
        pl.complete("local/smollm2", "List numbers.", schema=Many, cache=False)
    assert err.value.attempts == 1 and "properties.xs.minItems is 10,000,000" in str(err.value)
    assert pl.complete("local/smollm2", "Say hi.", max_tokens=3, cache=False).output_tokens
