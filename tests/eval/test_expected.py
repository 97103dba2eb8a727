"""Expected scores (G-Eval) from token log-probabilities, on scripted replies whose answers are worked out
by hand, and once on the real local model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.eval.expected import ExpectedScore, expected_scores
from promptlab.llm.call.completion import TokenLogprob, TopLogprob
from promptlab.llm.providers.scripted import ScriptedReply


def tok(text: str, alternatives: dict[str, float] | None = None) -> TokenLogprob:
    """A token drawn from `alternatives` ({text: probability}; the token itself certain when None)."""
    alternatives = alternatives or {text: 1.0}
    return TokenLogprob(
        token=text,
        logprob=math.log(alternatives[text]),
        top_logprobs=[TopLogprob(token=k, logprob=math.log(v)) for k, v in alternatives.items()],
    )


def test_one_token_value_is_the_renormalised_mean_of_its_integer_alternatives() -> None:
    tokens = [tok('{"'), tok("score"), tok('":'), tok(" 7", {" 7": 0.5, " 8": 0.3, " six": 0.05, "7": 0.1}), tok("}")]
    [s] = expected_scores('{"score": 7}', tokens)
    # " 7" and "7" both read as 7 (0.6), " 8" as 8 (0.3); " six" is no integer: mass 0.9
    assert s.sampled == 7 and s.mass == pytest.approx(0.9) and s.reason is None
    assert s.distribution == pytest.approx({7: 2 / 3, 8: 1 / 3})
    assert s.expected == pytest.approx((7 * 0.6 + 8 * 0.3) / 0.9)
    assert s.offset == len('{"score": ')


def test_ten_written_as_two_tokens_follows_the_sampled_path() -> None:
    text = '{"score": 10}'
    tokens = [
        tok('{"score": '),
        tok("1", {"1": 0.6, "9": 0.3, "x": 0.1}),
        tok("0", {"0": 0.9, ",": 0.05, "5": 0.05}),
        tok("}"),
    ]
    [s] = expected_scores(text, tokens)
    # 9 leaves the path at the first digit (0.3); after "1": "0" gives 10 (0.6 * 0.9 = 0.54), "," ends the
    # number at 1 (0.6 * 0.05 = 0.03), "5" would make 15, outside [1, 10]
    assert s.sampled == 10
    assert s.distribution == pytest.approx({1: 0.03 / 0.87, 9: 0.3 / 0.87, 10: 0.54 / 0.87})
    assert s.mass == pytest.approx(0.87)
    assert s.expected == pytest.approx((1 * 0.03 + 9 * 0.3 + 10 * 0.54) / 0.87)


def test_the_token_after_a_one_digit_value_can_still_make_it_ten() -> None:
    tokens = [
        tok('{"score": '),
        tok("1", {"1": 0.5, "2": 0.5}),
        tok(",", {",": 0.7, "0": 0.2, " ": 0.1}),
        tok(' "reason": "x"}'),
    ]
    [s] = expected_scores('{"score": 1, "reason": "x"}', tokens)
    # 2: 0.5; 1 then "," or " " (the number ended): 0.5 * 0.8 = 0.4; 1 then "0": 10 with 0.5 * 0.2 = 0.1
    assert s.sampled == 1 and s.mass == pytest.approx(1.0)
    assert s.distribution == pytest.approx({1: 0.4, 2: 0.5, 10: 0.1}) and s.expected == pytest.approx(2.4)
    # a value token that also holds what follows ("1,") is read at its own position only
    [joined] = expected_scores(
        '{"score": 1,}', [tok('{"score": '), tok("1,", {"1,": 0.5, "3,": 0.5}), tok("}", {"}": 0.5, "0": 0.5})]
    )
    assert joined.distribution == pytest.approx({1: 0.5, 3: 0.5})


def test_every_occurrence_in_order_with_reasons_where_no_value_can_be_had() -> None:
    text = '{"criteria": [{"score": 3}, {"score": 12}, {"score": 7.5}], "reason": "said \\"score\\": 2"}'
    cut = [text.index("3"), text.index("12")]
    tokens = [
        tok(text[: cut[0]]),
        tok("3", {"3": 0.7, "4": 0.2, "11": 0.1}),
        tok(text[cut[0] + 1 : cut[1]]),
        tok("12", {"12": 0.8, "0": 0.2}),
        tok(text[cut[1] + 2 :]),
    ]
    assert "".join(t.token for t in tokens) == text
    first, second, third = expected_scores(text, tokens)  # the escaped "score" inside the string is no field
    assert first.expected == pytest.approx((3 * 0.7 + 4 * 0.2) / 0.9) and first.mass == pytest.approx(0.9)
    assert second.expected is None and second.sampled == 12 and "no alternative" in (second.reason or "")
    assert third.expected is None and third.sampled is None and "not an integer" in (third.reason or "")
    [wide] = expected_scores(
        '{"score": 12}', [tok('{"score": '), tok("12", {"12": 0.8, "0": 0.2}), tok("}")], low=0, high=20
    )
    assert wide.distribution == pytest.approx({0: 0.2, 12: 0.8}) and wide.expected == pytest.approx(9.6)


def test_missing_logprobs_field_or_position() -> None:
    assert expected_scores('{"verdict": "good"}', [tok('{"verdict": "good"}')]) == []
    [none] = expected_scores('{"score": 4}', None)
    assert none.expected is None and none.sampled == 4 and "no token log-probabilities" in (none.reason or "")
    [lost] = expected_scores('{"score": 4}', [tok('{"score": '), tok("?")])  # tokens that do not spell it
    assert lost.expected is None and "no token" in (lost.reason or "")
    custom = expected_scores(
        '{"rating": 2}', [tok('{"rating": '), tok("2", {"2": 0.5, "3": 0.5}), tok("}")], field="rating"
    )
    assert [c.expected for c in custom] == [pytest.approx(2.5)]


class Verdict(BaseModel):
    score: int = Field(ge=1, le=10)
    reason: str


def test_through_the_call_path_with_a_scripted_critic(tmp_path: Path) -> None:
    reply = ScriptedReply(
        '{"score": 6, "reason": "clear"}',
        [
            ('{"score":', -0.01),
            (" 6", math.log(0.5), {" 6": math.log(0.5), " 5": math.log(0.25), " 9": math.log(0.25)}),
            (', "reason": "clear"}', 0.0),
        ],
    )
    m = pl.scripted("critic-lp", [reply, '{"score": 4, "reason": "vague"}'])
    c = pl.complete(m.name, "Score this prompt.", schema=Verdict, logprobs=True, top_logprobs=5, cache=tmp_path)
    [s] = expected_scores(c.text, c.logprobs)
    assert s.sampled == c.parsed.score == 6 and s.expected == pytest.approx(6.5) and s.mass == pytest.approx(1.0)
    plain = pl.complete(m.name, "Score another.", schema=Verdict, logprobs=True, cache=tmp_path)
    [certain] = expected_scores(plain.text, plain.logprobs)  # unscripted: every token certain
    assert (certain.expected, certain.mass, certain.distribution) == (4.0, 1.0, {4: 1.0})
    again = ExpectedScore.model_validate(json.loads(s.model_dump_json()))
    assert again == s


@pytest.mark.local_model
def test_real_critic_call_gives_usable_expected_scores(tmp_path: Path) -> None:
    c = pl.complete(
        "local/smollm2",
        "Rate how clear this prompt is, from 1 (unclear) to 10 (very clear): 'Write a short poem about the sea "
        "for children.' Reply in JSON with a score and a one-sentence reason.",
        schema=Verdict,
        max_tokens=120,
        cache=tmp_path,
        logprobs=True,
        top_logprobs=20,
    )
    assert isinstance(c.parsed, Verdict) and c.logprobs
    [s] = expected_scores(c.text, c.logprobs)
    assert s.reason is None and s.sampled == c.parsed.score
    assert s.expected is not None and 1.0 <= s.expected <= 10.0 and 0.0 < s.mass <= 1.0 + 1e-9
    assert sum(s.distribution.values()) == pytest.approx(1.0) and len(s.distribution) > 1
    assert s.expected == pytest.approx(sum(v * p for v, p in s.distribution.items()))
    hit = pl.complete(
        "local/smollm2",
        "Rate how clear this prompt is, from 1 (unclear) to 10 (very clear): 'Write a short poem about the sea "
        "for children.' Reply in JSON with a score and a one-sentence reason.",
        schema=Verdict,
        max_tokens=120,
        cache=tmp_path,
        logprobs=True,
        top_logprobs=20,
    )
    assert hit.cache_hit and expected_scores(hit.text, hit.logprobs) == [s]
