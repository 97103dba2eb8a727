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
    assert req.key == call_key(req.resolved, messages, req.params, Verdict, 2)
    assert req.resolved.target == "gpt-4o-mini" and req.resolved.endpoint_id == "openai@127.0.0.1:9"
    assert reply_key(req.key, messages) == cache_key({"reply_of": req.key, "messages": messages})


BASE = {"api_base": "http://127.0.0.1:9/v1", "api_key": "sk-x"}
KEYS_BEFORE = [
    ("gpt-4o-mini", {}, False, "5191d7f1870774d1a040f4d6b577868999fdfb3dfa06938a38d2fdc18b14349b"),
    ("gpt-4o-mini", {}, True, "23f459bdc118fc4aa6cf374ecde19a0a022af9d880b312b4666433615824deb0"),
    ("gpt-4o-mini", BASE, False, "d5ccc249de4078d567bf5eb61d66ce95741299a86855e62ec19ce1faf79d9f29"),
    ("gpt-4o-mini", BASE, True, "02e8b320fb23f31f36df37f3169c6fc36ae23e4d3b67c7e3c5c3986680927f00"),
    ("keyjudge", {}, False, "359c56fef661dae345b1d1275d2216d11de2146c100420867855a0b8f056bef5"),
    ("keyjudge", {}, True, "769d80722cf3a6b95b230f9d07626c36c9652f661a974e41ae27c7a009905318"),
    ("fake/echo", {}, False, "e738a1270e4ce77a534f6c6f1d04a1d3d3962d24b5b3ff677eebaabd0b9ef80d"),
    ("fake/echo", {}, True, "cf6a1f9b1eb53021a1f4b76ba9ed4125c83fee0039871b59b1eede80523695a3"),
    ("local/smollm2", {"seed": 3}, False, "71b64970ef1ec649e1238fa09c135f667a181593fc5a4da5dff169566ef42b92"),
    ("local/smollm2", {"seed": 3}, True, "c74341b45c35722907ec36518bf2379b6fdb3e2552d18d1fc0ef2b3bc0241261"),
]
"""Cache keys computed on main before the model travelled as an object (19f5bcc): (model, params, structured,
key) of the request `test_cache_keys_are_those_written_before_the_model_became_an_object` makes."""


@pytest.mark.parametrize(("model", "params", "structured", "key"), KEYS_BEFORE)
def test_cache_keys_are_those_written_before_the_model_became_an_object(
    model: str, params: dict[str, Any], structured: bool, key: str
) -> None:
    """`call_key` takes the resolved model now; the keys are byte for byte those a cache made before holds (a
    plain name, one with an api_base, an alias with its api_base and params, the scripted and the local model)."""

    class Verdict(BaseModel):  # the schema the keys were computed with
        score: int
        reason: str

    pl.register_model("keyjudge", model="openai/qwen2.5-7b", api_base="http://127.0.0.1:8000/v1", params={"top_p": 0.9})
    try:
        req = build_request(
            model,
            [{"role": "user", "content": "hi"}],
            schema=Verdict if structured else None,
            system="Be brief.",
            temperature=0.2,
            max_tokens=64,
            sample=1,
            settings=None,
            params=dict(params),
        )
    finally:
        pl.unregister_model("keyjudge")
    assert req.key == key


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
