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
from promptlab.llm import engine, local
from promptlab.llm.grammar import UnservableSchema, schema_grammar


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
