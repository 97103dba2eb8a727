"""#51 item 2: every figure is bounded where it is computed, not only where it arrives. A cost past the per-call
bound (`wire.MAX_COST_USD`) is an invalid reply whatever set the price: litellm's map or an alias's own price (the
bound was checked before the alias priced the reply: 5x10^8 tokens at 1,000/2,000 USD per million passed as
1.5x10^6 USD). An alias price, a price-map entry, and a cache record's tokens, cost and latency are bounded too."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Reply

import promptlab as pl
from promptlab.errors import ConfigError, ProviderError
from promptlab.llm.cache.backend import record_problem
from promptlab.llm.cache.disk import Cache
from promptlab.llm.call.settings import Settings
from promptlab.llm.call.wire import MAX_COST_USD
from promptlab.llm.providers.aliases import register_model
from promptlab.llm.providers.resolved import resolve_model
from promptlab.llm.spending.cap import SpendingCap, price_of, table_price

DEAR = {"input_per_million": 1000.0, "output_per_million": 2000.0}
"""A price an alias may set: 1,000 / 2,000 USD per million tokens."""
TOKENS = 5 * 10**8
"""Within wire.MAX_TOKENS; priced at DEAR: 0.5 x 1000 + 0.5 x 2000 = 1.5x10^6 USD, past MAX_COST_USD."""


@pytest.fixture
def server() -> FaultServer:
    with FaultServer(default=Reply("7", prompt_tokens=TOKENS, completion_tokens=TOKENS), model="gpt-4o-mini") as s:
        yield s


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_cost_past_the_bound_is_an_invalid_reply_when_an_alias_sets_the_price(
    server: FaultServer, transport: str
) -> None:
    register_model("dear", model="openai/gpt-4o-mini", api_base=server.url, price=DEAR)
    with pytest.raises(ProviderError) as err:
        pl.complete("dear", "p", cache=False, settings=Settings(transport=transport))
    assert f"invalid reply: cost is 1.5e+06 USD, out of range (at most {MAX_COST_USD:,.0f} USD)" in str(err.value)
    assert err.value.attempts == 1 and server.requests == 1  # not retried


def test_under_a_spending_cap_the_refused_reply_is_charged_as_an_estimate(server: FaultServer, tmp_path: Path) -> None:
    register_model("dear", model="openai/gpt-4o-mini", api_base=server.url, price=DEAR)
    cap = SpendingCap(tmp_path / "spending.json", cap=1e9)
    with cap.scope(), pytest.raises(ProviderError, match="cost is 1.5e\\+06 USD, out of range"):
        pl.complete("dear", "p", cache=False, max_tokens=10)
    ledger = cap.ledger()
    assert ledger.estimated_requests == 1 and 0 < ledger.spent_usd < MAX_COST_USD


@pytest.mark.parametrize(
    "price",
    [
        {"input_per_million": math.inf, "output_per_million": 1.0},
        {"input_per_million": 1.0, "output_per_million": math.nan},
        {"input_per_million": 1.0, "output_per_million": 2e6},
        {"input_per_million": -1.0, "output_per_million": 1.0},
    ],
)
def test_an_alias_price_out_of_range_is_refused_naming_the_field(price: dict[str, float]) -> None:
    field = "input_per_million" if price["input_per_million"] != 1.0 else "output_per_million"
    with pytest.raises(ConfigError, match=rf"model alias 'odd': price\.{field}"):
        register_model("odd", model="openai/gpt-4o-mini", price=price)


@pytest.mark.parametrize(("low", "high"), [(math.inf, 1e-6), (1e-6, math.nan), (-1e-6, 1e-6), (2.0, 1e-6), ("x", 1)])
def test_a_price_map_entry_out_of_range_is_unknown(low: Any, high: Any, caplog: pytest.LogCaptureFixture) -> None:
    assert table_price(resolve_model("openai/some-model"), low, high) is None
    assert "litellm's price map gives openai/some-model a price out of range" in caplog.text


def test_a_price_map_entry_in_range_is_the_price() -> None:
    price = table_price(resolve_model("openai/some-model"), 1.5e-7, 6e-7)
    assert price is not None and (price.input, price.output) == (1.5e-7, 6e-7)
    assert price_of(resolve_model("gpt-4o-mini")) == table_price(resolve_model("gpt-4o-mini"), 1.5e-7, 6e-7)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cost_usd", 5e6),
        ("latency_s", 1e308),
        ("latency_s", -1.0),
        ("input_tokens", 2 * 10**9),
    ],
)
def test_a_cache_record_with_a_figure_out_of_range_is_no_record(tmp_path: Path, field: str, value: Any) -> None:
    record = pl.Completion(model="fake/x", text="kept", key="k1", input_tokens=3, output_tokens=1, cost_usd=0.5)
    data = {**json.loads(json.dumps(record.stored())), field: value}
    raw = json.dumps(data)
    assert (record_problem("k1", raw) or "").startswith("bad record:")
    cache = Cache(tmp_path / "cache")
    cache.add("k1", record)
    assert cache.get("k1") is not None
    tampered = pl.Completion.model_construct(**{**record.model_dump(), field: value})
    cache.discard("k1")
    cache.add("k1", tampered)  # written as it is (a tampered or older record)
    assert cache.get("k1") is None  # read as no record: a miss, never a figure
    cache.close()


def test_a_nan_latency_in_a_record_is_no_record() -> None:
    raw = json.dumps({"version": 1, "model": "fake/x", "text": "t", "key": "k1"})[:-1] + ', "latency_s": NaN}'
    assert (record_problem("k1", raw) or "").startswith("bad record:")
