"""The malformed-output corpus (benchmarks/support/malformed_corpus.py) through `structured.parse`, and the parser's
other promises.

Each case is a reply and the score that must come out (or None: the reply must be refused, so the call
path re-asks and, in the end, records a ParseError instead of inventing a value)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from malformed_corpus import CORPUS, Verdict, v
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.llm.call.settings import Settings
from promptlab.llm.call.structured import MAX_JSON_CHARS, object_spans, parse, schema_json


class Rated(BaseModel):
    score: float
    tags: list[str] = []


@pytest.mark.parametrize("kind, text, expected", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_output_corpus(kind: str, text: str, expected: int | None) -> None:
    if expected is None:
        with pytest.raises(ValueError):
            parse(text, Verdict)
    else:
        got = parse(text, Verdict)
        assert isinstance(got, Verdict) and got.score == expected and type(got.score) is int


def test_the_corpus_has_at_least_twenty_kinds() -> None:
    assert len({kind for kind, _, _ in CORPUS}) >= 20


def test_a_float_field_takes_an_int_but_never_a_bool() -> None:
    assert parse('{"score": 7}', Rated).score == 7.0
    with pytest.raises(ValueError, match="score"):
        parse('{"score": true}', Rated)


def test_the_oversize_error_says_so() -> None:
    with pytest.raises(ValueError, match="over the cap"):
        parse("x " + '{"score": 7, "reason": "' + "y" * (MAX_JSON_CHARS + 1) + '"}', Verdict)


@pytest.mark.parametrize(
    "unit", [lambda n: "{" * n, lambda n: "{" * n + "}" * 3, lambda n: '{"a": ' * n, lambda n: "}{" * n]
)
def test_extraction_is_linear(unit: Callable[[int], str]) -> None:
    """Four times the text costs about four times the CPU (quadratic: sixteen; it was 19 s for 16,000 '{'). CPU
    time of this process, the best of three: another process's load does not count."""

    def cost(n: int) -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            with pytest.raises(ValueError):
                parse(unit(n), Verdict)
            best = min(best, time.process_time() - t0)
        return best

    small, large = cost(8_000), cost(32_000)
    assert large < 8 * max(small, 1e-3), (small, large)


def test_spans_are_outermost_and_in_order() -> None:
    text = 'a {"x": {"y": 1}} b {"z": "}"} c {'
    assert [text[a:b] for a, b in object_spans(text)] == ['{"x": {"y": 1}}', '{"z": "}"}']


def test_call_path_reasks_on_a_bool_score_and_takes_the_real_one() -> None:
    m = pl.scripted("strict-bool", [v(True), f"Example: {v(2)} Answer: {v(9)}"])
    c = pl.complete(m.name, "rate", schema=Verdict, cache=False, settings=Settings(parse_attempts=2))
    assert c.parsed.score == 9 and c.attempts == 2
    assert "score" in m.requests[1]["messages"][-1]["content"]  # the re-ask names the bad field


def test_a_schemas_json_is_made_once_and_each_caller_gets_its_own_copy() -> None:
    class Verdict(BaseModel):
        score: int = Field(ge=1, le=10)

    first = schema_json(Verdict)
    assert first == Verdict.model_json_schema()
    first["properties"]["score"]["maximum"] = 99  # a caller that changes its copy (e.g. to bound a local grammar)
    assert schema_json(Verdict)["properties"]["score"]["maximum"] == 10
