"""#28 item 1: no server can switch the spending cap off. Usage that is not usage (none, zeros, strings) is unknown,
never counted as 0: an unknown cost counts against the cap as an estimate from the request's and the reply's tokens
at the model's price, on both transports; a ledger that went negative is refused. #41 item 1: a count that is a
number out of range (negative, a fraction, 10^30) makes the reply invalid, and it is charged as an estimate too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Reply

import promptlab as pl
from promptlab.errors import ConfigError, ProviderError, SpendingCapExceeded
from promptlab.llm.call.failures import InvalidReply
from promptlab.llm.call.settings import Settings
from promptlab.llm.call.wire import tokens_of
from promptlab.llm.providers.litellm_lazy import litellm
from promptlab.llm.providers.resolved import resolve_model
from promptlab.llm.spending.cap import SpendingCap, price_of

TEXT = '{"score": 7, "note": "' + "lorem ipsum dolor " * 600 + '"}'
"""A long reply (about 1,800 tokens): 0.0011 USD of gpt-4o-mini's output each."""
BAD_USAGE: dict[str, dict[str, Any]] = {
    "none": {"usage": False},
    "zero": {"prompt_tokens": 0, "completion_tokens": 0},
    "negative": {"prompt_tokens": -1_000_000, "completion_tokens": 5},
    "string": {"prompt_tokens": "10", "completion_tokens": "5"},
    "fraction": {"prompt_tokens": 10.5, "completion_tokens": 5},
    "huge": {"prompt_tokens": 10**30, "completion_tokens": 10**30},
}
OUT_OF_RANGE = {"negative", "fraction", "huge"}
"""Counts that are numbers out of range: an invalid reply (not retried), charged as an estimate."""


def true_cost(body: dict[str, Any], text: str) -> float:
    """What the provider charges for a request and its reply: their tokens at gpt-4o-mini's price."""
    price = price_of(resolve_model("openai/gpt-4o-mini"))
    assert price is not None
    lm = litellm()
    return (
        lm.token_counter(model="gpt-4o-mini", messages=body["messages"]) * price.input
        + lm.token_counter(model="gpt-4o-mini", text=text) * price.output
    )


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FaultServer:
    with FaultServer(model="gpt-4o-mini") as s:
        monkeypatch.setenv("OPENAI_API_BASE", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-usage")
        yield s


@pytest.mark.parametrize("transport", ["auto", "litellm"])
@pytest.mark.parametrize("kind", sorted(BAD_USAGE))
def test_usage_that_is_not_usage_counts_against_the_cap(
    server: FaultServer, tmp_path: Path, kind: str, transport: str
) -> None:
    server.default = Reply(TEXT, **BAD_USAGE[kind])
    cap, settings = 0.004, Settings(transport=transport, retries=0, timeout_s=10, deadline_s=30)
    spending_cap = SpendingCap(tmp_path / "spending.json", cap=cap)
    made: list[pl.Completion] = []
    refused: list[ProviderError] = []
    with spending_cap.scope(), pytest.raises(SpendingCapExceeded):
        for i in range(40):
            try:
                made.append(pl.complete(server.model, f"prompt {i}", max_tokens=100, settings=settings, cache=False))
            except ProviderError as e:
                refused.append(e)
    assert all(c.input_tokens is None and c.cost_usd is None for c in made)  # unknown, never 0 or negative
    if kind in OUT_OF_RANGE:
        assert not made and all("invalid reply: usage.prompt_tokens is" in str(e) for e in refused)
    else:
        assert not refused
    paid = sum(true_cost(b, TEXT) for b in server.bodies)
    led = spending_cap.ledger()
    assert led.requests == led.estimated_requests == server.requests == len(made) + len(refused)
    assert led.spent_usd == pytest.approx(led.estimated_usd) and led.spent_usd == pytest.approx(paid, rel=0.05)
    assert paid <= cap + true_cost(server.bodies[-1], TEXT) * 1.05  # one call in flight at a time


def test_tokens_of_takes_only_whole_non_negative_counts() -> None:
    assert tokens_of({"prompt_tokens": 3, "completion_tokens": 0}) == (3, 0)
    for kind, bad in BAD_USAGE.items():
        if kind in OUT_OF_RANGE:
            with pytest.raises(InvalidReply, match=r"usage\.prompt_tokens is .*, out of range"):
                tokens_of(bad)
        else:
            assert tokens_of(None if "usage" in bad else bad) is None
    assert tokens_of({"prompt_tokens": True, "completion_tokens": 1}) is None
    assert tokens_of({"prompt_tokens": 3}) is None


def test_a_ledger_that_went_negative_is_refused_not_a_cap_switched_off(tmp_path: Path) -> None:
    path = tmp_path / "spending.json"
    path.write_text(json.dumps({"version": 1, "spent_usd": -1584000.0, "requests": 3, "by_model": {}}))
    with pytest.raises(ConfigError, match="spending ledger .*unreadable.*delete it"):
        SpendingCap(path, cap=0.5).spent()
    with pytest.raises(ConfigError, match="spending ledger"):
        SpendingCap(path, cap=0.5).charge(resolve_model("openai/gpt-4o-mini"), 0.001, 10, 10)
