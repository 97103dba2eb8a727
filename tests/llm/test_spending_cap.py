"""The spending cap: a request that would pass it is never made, paid replies go to a ledger shared by
processes, cache hits and replays cost nothing, a model without a price is refused before any call."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fault_server import FaultServer, Reply

import promptlab as pl
from promptlab.errors import ConfigError, SpendingCapExceeded
from promptlab.llm.call.settings import Settings
from promptlab.llm.providers.resolved import resolve_model
from promptlab.llm.spending.cap import ENV_LEDGER_FILE, ENV_MAX_COST, SpendingCap, check_prices, gate, price_of
from promptlab.sweeps.experiment import Experiment

KEY = "sk-test-cap"
FAST = Settings(backoff_s=0.001, backoff_max_s=0.002, timeout_s=10, deadline_s=30, max_concurrency=8)
PAID = Reply("paid", prompt_tokens=10_000, completion_tokens=1_000)
"""What gpt-4o-mini charges 0.0015 + 0.0006 = 0.0021 USD for."""
EACH = 0.0021


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FaultServer:
    """A loopback server posing as gpt-4o-mini (a model litellm prices), reached through the environment."""
    with FaultServer(default=PAID, model="gpt-4o-mini") as s:
        monkeypatch.setenv("OPENAI_API_BASE", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield s


def ask(server: FaultServer, prompt: str, **kw: object) -> pl.Completion:
    return pl.complete(server.model, prompt, max_tokens=2000, **{"settings": FAST, **kw})  # type: ignore[arg-type]


def test_no_active_spending_cap_checks_nothing(server: FaultServer, tmp_path: Path) -> None:
    assert gate(resolve_model(server.model), {"messages": []}) is None
    ask(server, "one")
    assert server.requests == 1 and not list(tmp_path.glob("**/spending.json"))


def test_a_request_that_would_pass_the_cap_is_never_made(server: FaultServer, tmp_path: Path) -> None:
    spending_cap = SpendingCap(tmp_path / "spending.json", cap=0.005)
    with spending_cap.scope() as refused:
        first, second = ask(server, "one"), ask(server, "two")
        # spent 0.0042; the next request's max_tokens alone (2000 x 0.6 USD/M = 0.0012) would pass 0.005
        with pytest.raises(SpendingCapExceeded) as info:
            ask(server, "three")
    assert server.requests == 2
    assert first.cost_usd == pytest.approx(EACH) and second.cost_usd == pytest.approx(EACH)
    err = info.value
    assert (err.model, err.cap) == (server.model, 0.005) and err.spent == pytest.approx(2 * EACH)
    assert "cut by max_cost=0.005" in str(err) and "higher max_cost" in str(err)
    assert refused == [err]
    led = spending_cap.ledger()
    assert led.spent_usd == pytest.approx(2 * EACH) and led.requests == 2
    assert led.by_model == {server.model: pytest.approx(2 * EACH)}


def test_cache_hits_replays_and_free_models_pass_a_spent_spending_cap(server: FaultServer, tmp_path: Path) -> None:
    spending_cap = SpendingCap(tmp_path / "spending.json", cap=0.003)
    with spending_cap.scope() as refused:
        ask(server, "one")  # spent 0.0021: no further paid request fits
        hit = ask(server, "one")
        free = pl.complete("fake/auto", "anything", max_tokens=2000)
        with pytest.raises(SpendingCapExceeded):
            ask(server, "two")
    assert hit.cache_hit and hit.billed_cost_usd == 0.0 and free.cost_usd == 0.0
    assert server.requests == 1 and len(refused) == 1
    assert spending_cap.ledger().requests == 1  # neither the hit nor the free call was counted


def test_the_cap_counts_what_earlier_runs_spent(server: FaultServer, tmp_path: Path) -> None:
    with SpendingCap(tmp_path / "spending.json", cap=0.005).scope():
        ask(server, "one")
        ask(server, "two")
        with pytest.raises(SpendingCapExceeded):
            ask(server, "three")
    with SpendingCap(tmp_path / "spending.json", cap=0.005).scope():  # the same cap again: nothing more is spent
        with pytest.raises(SpendingCapExceeded):
            ask(server, "three")
    assert server.requests == 2
    with SpendingCap(tmp_path / "spending.json", cap=0.01).scope():  # a higher cap goes on
        assert ask(server, "three").text == "paid"
        assert ask(server, "one").cache_hit
    assert server.requests == 3
    assert SpendingCap(tmp_path / "spending.json", cap=1).spent() == pytest.approx(3 * EACH)


def test_a_refusal_is_not_retried_nor_read_as_a_provider_error(server: FaultServer, tmp_path: Path) -> None:
    spending_cap = SpendingCap(tmp_path / "spending.json", cap=0.0001)  # below one request's max_tokens
    with spending_cap.scope(), pytest.raises(SpendingCapExceeded):
        ask(server, "one", settings=Settings(retries=3, backoff_s=0.001))
    assert server.requests == 0 and spending_cap.spent() == 0.0


def test_concurrent_calls_overshoot_by_at_most_those_in_flight(server: FaultServer, tmp_path: Path) -> None:
    server.default = Reply("paid", prompt_tokens=10_000, completion_tokens=1_000, delay_s=0.05)
    spending_cap = SpendingCap(tmp_path / "spending.json", cap=0.005)
    in_flight = 4

    async def main() -> list[object]:
        settings = Settings(max_concurrency=in_flight, timeout_s=10, deadline_s=30)
        return await asyncio.gather(
            *(pl.acomplete(server.model, f"p{i}", max_tokens=2000, settings=settings) for i in range(12)),
            return_exceptions=True,
        )

    with spending_cap.scope() as refused:
        outcomes = asyncio.run(main())
    made = sum(isinstance(o, pl.Completion) for o in outcomes)
    cut = [o for o in outcomes if isinstance(o, SpendingCapExceeded)]
    assert made + len(cut) == 12 and made == server.requests and len(refused) == len(cut)
    assert 2 <= made <= 2 + in_flight  # at most the calls in flight when the cap was reached go over it
    assert spending_cap.spent() == pytest.approx(made * EACH) and spending_cap.spent() <= 0.005 + in_flight * EACH


@pytest.mark.slow
def test_the_ledger_adds_up_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "spending.json"
    code = (
        "import sys; from promptlab.llm.spending.cap import SpendingCap\n"
        "from promptlab.llm.providers.resolved import resolve_model\n"
        "b = SpendingCap(sys.argv[1], cap=100)\n"
        "for _ in range(50): b.charge(resolve_model('openai/gpt-4o-mini'), 0.001)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)]) for _ in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 4
    led = SpendingCap(path, cap=100).ledger()
    assert led.requests == 200 and led.spent_usd == pytest.approx(0.2)


def test_unknown_price_is_refused_before_any_call(server: FaultServer, tmp_path: Path) -> None:
    assert (
        price_of(resolve_model("fake/auto")) is not None and price_of(resolve_model("openai/gpt-4o-mini")) is not None
    )
    with pytest.raises(ConfigError, match=r"'openai/no-such-priced-model'.*price.*without max_cost"):
        check_prices(map(resolve_model, ["fake/auto", "openai/no-such-priced-model"]))
    with SpendingCap(tmp_path / "spending.json", cap=1).scope(), pytest.raises(ConfigError, match="price"):
        pl.complete("openai/no-such-priced-model", "hi", settings=FAST)
    assert server.requests == 0


def test_spending_cap_from_the_environment(tmp_path: Path) -> None:
    assert SpendingCap.from_env({}) is None
    b = SpendingCap(tmp_path / "spending.json", cap=2.5)
    again = SpendingCap.from_env(b.env())
    assert again is not None and (again.path, again.cap) == (b.path, 2.5)
    with pytest.raises(ConfigError, match=ENV_MAX_COST):
        SpendingCap.from_env({ENV_MAX_COST: "lots", ENV_LEDGER_FILE: str(b.path)})
    with pytest.raises(ConfigError, match=ENV_LEDGER_FILE):
        SpendingCap.from_env({ENV_MAX_COST: "1"})
    with pytest.raises(ConfigError, match="positive"):
        SpendingCap(b.path, cap=0)


def test_an_unreadable_ledger_says_how_to_recover(tmp_path: Path) -> None:
    (tmp_path / "spending.json").write_text("{not json")
    with pytest.raises(ConfigError, match="delete it"):
        SpendingCap(tmp_path / "spending.json", cap=1).spent()


def test_max_cost_in_the_experiment_file(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "p", "goal": "g"}) + "\n")
    base = {"name": "b", "loops": ["p3ro"], "tasks": "tasks.jsonl", "config": {"model": "fake/auto"}}
    assert Experiment.from_dict({**base, "max_cost": 2}, tmp_path).max_cost == 2.0
    for bad in (0, -1, "lots"):
        with pytest.raises(ConfigError, match="max_cost"):
            Experiment.from_dict({**base, "max_cost": bad}, tmp_path)


def test_a_model_alias_price_is_what_the_cap_counts(server: FaultServer, tmp_path: Path) -> None:
    """A served model litellm does not price can be capped through its alias's price; the ledger charges that
    price (10,000 x 150 + 1,000 x 600 USD per million tokens = 2.1 USD a reply)."""
    from promptlab.llm.providers.aliases import register_model, unregister_model

    register_model(
        "spending_cap-served",
        model="openai/served-model",
        api_base=server.url,
        price={"input_per_million": 150.0, "output_per_million": 600.0},
    )
    register_model("spending_cap-unpriced", model="openai/served-model", api_base=server.url)
    try:
        check_prices([resolve_model("spending_cap-served")])
        with pytest.raises(ConfigError, match="'spending_cap-unpriced'.*register_model"):
            check_prices(map(resolve_model, ["spending_cap-served", "spending_cap-unpriced"]))
        spending_cap = SpendingCap(tmp_path / "spending.json", cap=5.0)
        with spending_cap.scope():
            first = pl.complete("spending_cap-served", "one", max_tokens=2000, settings=FAST)
            pl.complete("spending_cap-served", "two", max_tokens=2000, settings=FAST)
            with pytest.raises(SpendingCapExceeded, match="spending_cap-served"):  # 4.2 spent + 2000 x 600 / 1e6 > 5
                pl.complete("spending_cap-served", "three", max_tokens=2000, settings=FAST)
    finally:
        unregister_model("spending_cap-served")
        unregister_model("spending_cap-unpriced")
    assert first.cost_usd == pytest.approx(2.1) and server.requests == 2
    assert spending_cap.ledger().by_model == {"spending_cap-served": pytest.approx(4.2)}


def test_the_old_public_names_of_the_spending_cap_still_work_and_say_they_are_deprecated() -> None:
    """`pl.Budget` and `pl.BudgetExceeded` were public: they stay, as the new classes, with a DeprecationWarning
    (so "budget" can mean only a loop's call/token budget)."""
    with pytest.warns(DeprecationWarning, match="use promptlab.SpendingCap$"):
        assert pl.Budget is SpendingCap
    with pytest.warns(DeprecationWarning, match="use promptlab.SpendingCapExceeded"):
        assert pl.BudgetExceeded is SpendingCapExceeded
    assert pl.SpendingCap is SpendingCap and pl.SpendingCapExceeded is SpendingCapExceeded
    assert "Budget" not in pl.__all__ and "SpendingCap" in pl.__all__


def test_a_ledger_under_its_former_name_is_renamed_and_still_counts(tmp_path: Path) -> None:
    """A results dir a sweep wrote before the ledger was called spending.json (budget.json) keeps what it paid."""
    from promptlab.llm.spending.ledger import FORMER_LEDGER_NAME, LEDGER_NAME, ledger_in

    SpendingCap(tmp_path / FORMER_LEDGER_NAME, cap=1.0).charge(resolve_model("gpt-4o-mini"), 0.25)
    path = ledger_in(tmp_path)
    assert path.name == LEDGER_NAME == "spending.json" and not (tmp_path / FORMER_LEDGER_NAME).exists()
    assert SpendingCap(path, cap=1.0).spent() == pytest.approx(0.25)
    assert ledger_in(tmp_path) == path and SpendingCap(path, cap=1.0).spent() == pytest.approx(0.25)  # once only
