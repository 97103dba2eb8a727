"""evaluate_prompt on the scripted model through the real call path: exact per-example outputs, the messages
sent, CI values, errors recorded per example, cached replays, a caller's `call` function, concurrency; and one
real local-model run checked against llama-cpp-python called directly."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from overlap import InFlight
from statsmodels.stats.proportion import proportion_confint

import promptlab as pl
from promptlab.eval.stats import bootstrap_ci
from promptlab.llm.call.settings import Settings
from promptlab.llm.providers import litellm_lazy as model_names
from promptlab.record import Example

NO_RETRY = Settings(retries=0)
LABELS = {"kind": "choice", "labels": ["positive", "negative"]}
REVIEWS = [
    Example(input="A wonderful, moving film.", target="positive", id="r0"),
    Example(input="Dull and far too long.", target="negative", id="r1"),
    Example(input="I loved every minute.", target="positive", id="r2"),
    Example(input="The plot made no sense.", target="negative", id="r3"),
]


def sentiment_bot(messages: list[dict[str, Any]]) -> str:
    """Right on r0-r2 ('loved'/'wonderful' -> positive, else negative), wrong on r3."""
    text = messages[-1]["content"]
    if "sense" in text:
        return "Positive."
    return "Positive" if ("loved" in text or "wonderful" in text) else "negative"


def test_per_example_outputs_scores_and_messages(tmp_path: Path) -> None:
    m = pl.scripted("eval-exact", respond=sentiment_bot)
    r = pl.evaluate_prompt(
        "Review: {input}\nSentiment:", REVIEWS, model=m.name, scorer=LABELS, cache=tmp_path / "c", max_tokens=8
    )
    assert [rec.output for rec in r.records] == ["Positive", "negative", "Positive", "Positive."]
    assert r.scores == [1.0, 1.0, 1.0, 0.0]
    assert [rec.index for rec in r.records] == [0, 1, 2, 3] and [rec.id for rec in r.records] == [
        "r0",
        "r1",
        "r2",
        "r3",
    ]
    assert (r.score, r.n, r.errors) == (0.75, 4, 0)
    assert [rec.detail for rec in r.records] == [
        "label: positive",
        "label: negative",
        "label: positive",
        "label: positive",
    ]
    sent = sorted((req["messages"] for req in m.requests), key=lambda msgs: msgs[0]["content"])
    assert all(len(msgs) == 1 and msgs[0]["role"] == "user" for msgs in sent)
    assert {msgs[0]["content"] for msgs in sent} == {f"Review: {ex.input}\nSentiment:" for ex in REVIEWS}
    assert all(req["params"]["max_tokens"] == 8 and req["params"]["temperature"] == 0.0 for req in m.requests)
    frame = r.per_example
    assert list(frame.columns) == ["input", "target", "output", "score", "error", "detail"]
    assert frame["output"].tolist() == ["Positive", "negative", "Positive", "Positive."]
    assert frame["target"].tolist() == [ex.target for ex in REVIEWS]


def test_system_message_only_when_given() -> None:
    m = pl.scripted("eval-system", respond=sentiment_bot)
    pl.evaluate_prompt(
        "Sentiment?", REVIEWS[:1], model=m.name, scorer=LABELS, system="Answer in one word.", cache=False
    )
    (req,) = m.requests
    assert req["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Sentiment?\n\nA wonderful, moving film."},
    ]


def test_wilson_interval_for_binary_scores() -> None:
    m = pl.scripted("eval-wilson", respond=sentiment_bot)
    r = pl.evaluate_prompt("{input}", REVIEWS, model=m.name, scorer=LABELS, cache=False)
    low, high = proportion_confint(3, 4, alpha=0.05, method="wilson")
    assert r.ci_low == pytest.approx(low) and r.ci_high == pytest.approx(high)
    g = r.grounded("dev")
    assert (g.split, g.score, g.n, g.errors, g.scores) == ("dev", 0.75, 4, 0, [1.0, 1.0, 1.0, 0.0])
    assert g.ci_low == r.ci_low and g.prompt_hash == r.prompt_hash and len(g.prompt_hash or "") == 16


def test_bootstrap_interval_for_graded_scores() -> None:
    m = pl.scripted("eval-boot", respond=lambda msgs: "12")
    examples = [Example(input=str(i), target=t) for i, t in enumerate([12, 13, 12, 20, 12.5])]
    r = pl.evaluate_prompt("{input}", examples, model=m.name, scorer={"kind": "numeric", "tolerance": 1}, cache=False)
    assert r.scores == [1.0, 1.0, 1.0, 0.0, 1.0] and r.score == 0.8
    judge_scores = [0.2, 0.9, 0.5]
    judge = pl.scripted("eval-boot-judge", [f'{{"reason": "r", "score": {round(v * 10)}}}' for v in judge_scores])
    r = pl.evaluate_prompt(
        "{input}", REVIEWS[:3], model=m.name, concurrency=1, cache=False, scorer={"kind": "judge", "model": judge.name}
    )
    assert r.scores == judge_scores
    assert (r.ci_low, r.ci_high) == pytest.approx(bootstrap_ci(judge_scores))
    assert r.ci_low < r.score < r.ci_high  # type: ignore[operator]
    assert r.usage.calls == 6 and r.usage.per_model == {m.name: 3, judge.name: 3}


@pytest.fixture
def flaky_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "flaky_scorer_mod.py").write_text(
        textwrap.dedent("""
        def score(output, target):
            if "crash" in output:
                raise KeyError("no such field")
            return float(output.strip() == target)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "flaky_scorer_mod:score"
    sys.modules.pop("flaky_scorer_mod", None)


def test_failed_call_and_failed_scorer_are_recorded_per_example(flaky_scorer: str) -> None:
    lm = model_names.litellm()

    def respond(messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        if text == "down":
            raise lm.BadRequestError("provider refused", model="fake/eval-fail", llm_provider="fake")
        return {"ok": "yes", "wrong": "no", "odd": "crash now"}[text]

    m = pl.scripted("eval-fail", respond=respond)
    examples = [Example(input=i, target="yes") for i in ("ok", "down", "odd", "wrong")]
    r = pl.evaluate_prompt(
        "{input}",
        examples,
        model=m.name,
        scorer={"kind": "python", "function": flaky_scorer},
        cache=False,
        settings=NO_RETRY,
    )
    assert r.scores == [1.0, None, None, 0.0]
    assert [rec.output for rec in r.records] == ["yes", None, "crash now", "no"]
    assert r.records[1].error is not None and r.records[1].error.startswith("ProviderError: ")
    assert "provider refused" in r.records[1].error
    assert r.records[2].error == "scorer: KeyError: 'no such field'"
    assert (r.score, r.n, r.errors) == (0.5, 2, 2)  # missing scores are left out, never counted as 0
    assert r.usage.failed_calls == 1 and r.usage.calls == 4
    assert r.per_example["error"].isna().tolist() == [True, False, False, True]


def test_everything_failing_gives_no_score() -> None:
    lm = model_names.litellm()
    m = pl.scripted(
        "eval-down",
        respond=lambda msgs: (_ for _ in ()).throw(
            lm.BadRequestError("nope", model="fake/eval-down", llm_provider="fake")
        ),
    )
    r = pl.evaluate_prompt("{input}", REVIEWS[:2], model=m.name, scorer=LABELS, cache=False, settings=NO_RETRY)
    assert (r.score, r.n, r.ci_low, r.ci_high, r.errors) == (None, 0, None, None, 2)


def test_cached_replay_makes_no_model_call(tmp_path: Path) -> None:
    m = pl.scripted("eval-cache", respond=sentiment_bot)
    first = pl.evaluate_prompt("{input}", REVIEWS, model=m.name, scorer=LABELS, cache=tmp_path / "c")
    assert len(m.requests) == 4 and first.usage.cache_hits == 0 and first.usage.output_tokens > 0
    again = pl.evaluate_prompt("{input}", REVIEWS, model=m.name, scorer=LABELS, cache=tmp_path / "c")
    assert len(m.requests) == 4
    assert again.usage.calls == 4 and again.usage.cache_hits == 4
    assert (again.usage.input_tokens, again.usage.output_tokens, again.usage.cost_usd) == (0, 0, 0.0)
    assert again.records == first.records
    other_sample = pl.evaluate_prompt("{input}", REVIEWS, model=m.name, scorer=LABELS, cache=tmp_path / "c", sample=1)
    assert len(m.requests) == 8 and other_sample.usage.cache_hits == 0


def test_a_callers_call_function_makes_the_calls() -> None:
    seen: list[tuple[int, str, str | None]] = []

    async def call(index: int, prompt: str, system: str | None) -> str:
        seen.append((index, prompt, system))
        if index == 1:
            raise RuntimeError("recorded by the loop")
        return "positive"

    r = pl.evaluate_prompt(
        "Say: {input}", REVIEWS[:3], model="fake/unused", scorer=LABELS, call=call, system="sys", split="test"
    )
    assert sorted(seen) == [
        (0, "Say: A wonderful, moving film.", "sys"),
        (1, "Say: Dull and far too long.", "sys"),
        (2, "Say: I loved every minute.", "sys"),
    ]
    assert r.scores == [1.0, None, 1.0] and r.records[1].error == "RuntimeError: recorded by the loop"
    assert r.split == "test" and r.usage.calls == 0


def test_concurrency_bounds_examples_in_flight() -> None:
    state = {"now": 0, "peak": 0}

    async def call(index: int, prompt: str, system: str | None) -> str:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return "positive"

    pl.evaluate_prompt("{input}", REVIEWS * 5, model="fake/unused", scorer=LABELS, call=call, concurrency=3)
    assert state["peak"] == 3


def counting_model(name: str, n: int) -> tuple[pl.ScriptedModel, InFlight]:
    """A scripted model that answers "positive" (in worker threads) once `n` of its calls are in flight at once,
    after 0.05 s more (so a call past the limit has time to enter), and its calls in flight."""
    calls = InFlight(n)

    def slow(messages: list[dict[str, Any]]) -> str:
        with calls.call():
            time.sleep(0.05)
        return "positive"

    return pl.scripted(name, respond=slow), calls


def test_model_limit_follows_each_calls_settings() -> None:
    """A first call with a limit of 1 must not pin the model's limit: evaluate_prompt(concurrency=5) then
    has 5 calls in flight (the scripted model runs in worker threads)."""
    m, calls = counting_model("eval-limit", 1)  # the first call goes alone
    examples = [Example(input=f"review {i}", target="positive") for i in range(10)]

    async def both() -> pl.EvalResult:
        await pl.acomplete(m.name, "warm", cache=False, settings=Settings(max_concurrency=1))
        calls.n = 5  # the evaluation's calls wait until 5 are in flight
        return await pl.aevaluate_prompt(
            "{input}",
            examples,
            model=m.name,
            scorer=LABELS,
            concurrency=5,
            cache=False,
            settings=Settings(max_concurrency=1),
        )

    r = asyncio.run(both())
    assert r.score == 1.0 and calls.peak == 5


def test_an_evaluation_never_lowers_the_models_limit() -> None:
    """Two evaluations of 2 examples at once each, on a model allowed 8 calls: 4 in flight, not 2 (an evaluation's
    concurrency raises the model's limit when lower and never cuts the calls other evaluations may make)."""
    m, calls = counting_model("eval-never-lower", 4)
    examples = [Example(input=f"review {i}", target="positive") for i in range(6)]
    eight = Settings(max_concurrency=8)

    async def both() -> list[pl.EvalResult]:
        return list(
            await asyncio.gather(
                *(
                    pl.aevaluate_prompt(
                        f"{{input}} ({k})",
                        examples,
                        model=m.name,
                        scorer=LABELS,
                        concurrency=2,
                        cache=False,
                        settings=eight,
                    )
                    for k in range(2)
                )
            )
        )

    assert [r.score for r in asyncio.run(both())] == [1.0, 1.0] and calls.peak == 4


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(pl.ConfigError, match="unknown scorer 'nope'"):
        pl.evaluate_prompt("{input}", REVIEWS, model="fake/auto", scorer="nope")
    with pytest.raises(pl.ConfigError, match=r"examples\[0\]"):
        pl.evaluate_prompt("{input}", [{"input": "x"}], model="fake/auto", scorer="exact")
    with pytest.raises(pl.ConfigError, match="concurrency"):
        pl.evaluate_prompt("{input}", REVIEWS, model="fake/auto", scorer="exact", concurrency=0)


def test_works_inside_a_running_event_loop() -> None:
    m = pl.scripted("eval-loop", respond=sentiment_bot)

    async def notebook_cell() -> pl.EvalResult:
        return pl.evaluate_prompt("{input}", REVIEWS, model=m.name, scorer=LABELS, cache=False)

    assert asyncio.run(notebook_cell()).score == 0.75


@pytest.mark.local_model
def test_local_model_outputs_equal_llama_cpp_called_directly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance pool is the exact path: its replies equal llama-cpp-python's own, reply for reply. (The
    batching engine, the default, may differ at near-ties whenever two sequences share a batch, as any batched
    server's do: docs/benchmarks.md measures how often, and its accuracy, in bench_local.)"""
    from promptlab.llm.local import pool as local

    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "pool")

    examples = [
        Example(input=text, target=label)
        for text, label in [
            ("The battery lasts all day and the screen is bright.", "positive"),
            ("It broke after two days and support never answered.", "negative"),
            ("Great value, I would buy it again.", "positive"),
        ]
    ]
    prompt = "Is this product review positive or negative? Answer with one word.\n\nReview: {input}"
    system = "You are a careful annotator."
    r = pl.evaluate_prompt(
        prompt,
        examples,
        model="local/smollm2",
        scorer=LABELS,
        system=system,
        max_tokens=12,
        cache=tmp_path / "c",
        concurrency=2,
    )
    llm, lock = local.load("smollm2")
    direct = []
    for ex in examples:
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": pl.format_prompt(prompt, ex.input)},
        ]
        with lock:
            out = llm.create_chat_completion(messages=messages, temperature=0.0, max_tokens=12, seed=0)
        direct.append(out["choices"][0]["message"]["content"] or "")
    assert [rec.output for rec in r.records] == direct
    assert all(rec.error is None for rec in r.records) and r.n == 3
    assert r.usage.calls == 3 and r.usage.cache_hits == 0 and r.usage.output_tokens > 0


def test_extra_model_parameters_reach_the_call() -> None:
    m = pl.scripted("eval-params", respond=sentiment_bot)
    pl.evaluate_prompt("{input}", REVIEWS[:2], model=m.name, scorer=LABELS, cache=False, top_p=0.5)
    assert [req["params"].get("top_p") for req in m.requests] == [0.5, 0.5]

    async def call(index: int, prompt: str, system: str | None) -> str:
        return "positive"

    with pytest.raises(pl.ConfigError, match="top_p: model parameters have no effect"):
        pl.evaluate_prompt("{input}", REVIEWS[:2], model=m.name, scorer=LABELS, call=call, top_p=0.5)


def test_a_local_model_on_the_engine_gets_as_many_examples_in_flight_as_it_decodes_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batching engine's cost per example falls as its batch grows, so an evaluation on it keeps as many
    examples in flight as it decodes at once; other models, and the instance pool, keep the default of 8."""
    from promptlab.eval.evaluate import DEFAULT_CONCURRENCY, default_concurrency

    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "batch")
    monkeypatch.setenv("PROMPTLAB_ENGINE_SEQS", "24")
    assert default_concurrency("local/smollm2") == 24
    assert default_concurrency("fake/unused") == DEFAULT_CONCURRENCY == 8
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", "pool")
    assert default_concurrency("local/smollm2") == DEFAULT_CONCURRENCY
