"""A model name is resolved once, at the door of a call (`promptlab.llm.providers.resolved`): the alias, endpoint, key
variable, in-process flag and schema support are read from one `ResolvedModel`, and the call path does not go
back to the alias registry to ask again."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

import promptlab as pl
from promptlab.llm.cache.keys import cache_key, call_key, reply_key
from promptlab.llm.call.request import build_request
from promptlab.llm.providers import aliases
from promptlab.llm.providers.aliases import Price
from promptlab.llm.providers.resolved import resolve_model


class Verdict(BaseModel):
    score: int


def test_an_alias_resolves_into_everything_the_call_path_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    price = Price(input_per_million=1.0, output_per_million=2.0)
    pl.register_model(
        "served-door",
        model="openai/qwen",
        api_base="http://127.0.0.1:8011/v1",
        api_key_env="DOOR_KEY",
        rpm=60,
        tpm=6000,
        price=price,
        params={"top_p": 0.5, "seed": 3},
    )
    m = resolve_model("served-door", {"seed": 7, "api_key": "sk-door"})
    assert (m.name, m.target, m.alias is aliases.get_alias("served-door")) == ("served-door", "openai/qwen", True)
    assert m.params == {
        "top_p": 0.5,
        "seed": 7,
        "api_key": "sk-door",
        "api_base": "http://127.0.0.1:8011/v1",
    }  # the call wins
    assert (m.in_process, m.embedded, m.served, m.key_env, m.rates, m.price) == (
        False,
        False,
        True,
        "DOOR_KEY",
        (60, 6000),
        price,
    )
    assert (m.endpoint_id, m.endpoint) == ("openai@127.0.0.1:8011", "openai/qwen@openai@127.0.0.1:8011")
    assert m.host == "127.0.0.1:8011" and "sk-door" not in repr(m)  # the repr leaves the call's params out
    assert resolve_model("served-door", {"api_base": "http://10.0.0.2:9/v1"}).endpoint_id == "openai@10.0.0.2:9"

    local = resolve_model("local/smollm2")
    assert (local.in_process, local.embedded, local.served, local.endpoint, local.host) == (
        True,
        True,
        False,
        "local/smollm2",
        "in-process",
    )
    assert resolve_model("gpt-4o-mini", {"api_base": "http://127.0.0.1:9/v1"}).served is False  # not an alias's server


def test_both_cache_keys_are_made_in_cache_keys_from_what_they_always_held() -> None:
    """The keys are those the call path always wrote (a cache made before the refactor still answers)."""
    messages = [{"role": "user", "content": "hi"}]
    req = build_request(
        "gpt-4o-mini",
        "hi",
        schema=Verdict,
        system=None,
        temperature=0.0,
        max_tokens=None,
        sample=2,
        settings=None,
        params={"api_key": "sk-x", "api_base": "http://127.0.0.1:9/v1"},
    )
    payload = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "params": {"temperature": 0.0, "max_tokens": None},
        "schema": Verdict.model_json_schema(),
        "sample": 2,
        "endpoint": "openai@127.0.0.1:9",
    }
    assert req.key == cache_key(payload)
    assert req.key == call_key("gpt-4o-mini", messages, req.params, Verdict, 2, "openai@127.0.0.1:9")
    assert reply_key(req.key, messages) == cache_key({"reply_of": req.key, "messages": messages})


def count_alias_lookups(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count `get_alias(name)` by name, in every promptlab module that holds it."""
    looked: Counter[str] = Counter()
    real = aliases.get_alias

    def counting(name: str) -> Any:
        looked[name] += 1
        return real(name)

    for module in list(sys.modules.values()):
        if (module.__name__ or "").startswith("promptlab.") and getattr(module, "get_alias", None) is real:
            monkeypatch.setattr(module, "get_alias", counting)
    return looked


def test_a_call_looks_its_model_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pl.scripted("door-model", respond=lambda _: '{"score": 4}', native_schema=False)
    pl.register_model("door", model="fake/door-model")
    assert pl.complete("door", "rate it", schema=Verdict, cache=False).parsed == Verdict(score=4)  # name checked once
    looked = count_alias_lookups(monkeypatch)

    done = pl.complete("door", "rate it again", schema=Verdict, cache=False)
    assert done.parsed == Verdict(score=4) and done.model == "door"
    assert looked["door"] == 1
    asyncio.run(pl.acomplete("door", "and once more", schema=Verdict, cache=False))
    assert looked["door"] == 2


def test_a_call_to_a_plain_model_name_looks_nothing_up_after_the_door(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every alias lookup of a call, of any name, counted: only `resolve_model`'s (the limits, the schema choice
    and the in-process test read the ResolvedModel)."""
    pl.scripted("plain-door", respond=lambda _: '{"score": 5}', native_schema=True)
    assert pl.complete("fake/plain-door", "rate it", schema=Verdict, cache=False).parsed == Verdict(score=5)
    looked = count_alias_lookups(monkeypatch)

    asyncio.run(pl.acomplete("fake/plain-door", "rate it again", schema=Verdict, cache=False))
    assert dict(looked) == {"fake/plain-door": 1}
