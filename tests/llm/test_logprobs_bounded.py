"""#41 item 1 for log-probabilities: a reported logprob is a number <= 0 (minus infinity read as the floor, a
rounding error above 0 by at most 1e-6 read as 0). Anything else (a probability over 1, NaN, a string, a bool, a
list where a number belongs) is an invalid reply naming the model and the field, on both transports, not retried;
an expected score was otherwise invented from it (exp(5) weighting a score) or crashed (exp(1e308) overflows). A
cached record holding such a figure is not a record: a miss, never served."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fault_server import FaultServer, Raw
from pydantic import ValidationError

import promptlab as pl
from promptlab.errors import ProviderError
from promptlab.eval.expected import expected_scores
from promptlab.llm.cache.disk import Cache
from promptlab.llm.call.completion import TokenLogprob, logprobs_of
from promptlab.llm.call.settings import Settings

TEXT = '{"score": 7}'


def _body(logprob: Any, top: Any = None) -> str:
    tokens = [
        {"token": '{"score": ', "logprob": -0.01, "top_logprobs": []},
        {"token": "7", "logprob": logprob, "top_logprobs": top if top is not None else [{"token": "3", "logprob": -2}]},
        {"token": "}", "logprob": -0.01, "top_logprobs": []},
    ]
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": TEXT}}
    usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "usage": usage,
                       "choices": [{**choice, "logprobs": {"content": tokens}}]})  # fmt: skip


@pytest.mark.parametrize("transport", ["auto", "litellm"])
@pytest.mark.parametrize(
    ("logprob", "top", "field", "shown"),
    [
        (5.0, None, "logprobs.content[1].logprob", "5"),
        (1e308, None, "logprobs.content[1].logprob", "1e+308"),
        ("abc", None, "logprobs.content[1].logprob", "'abc'"),
        ("NaN", None, "logprobs.content[1].logprob", "nan"),
        (-0.5, [{"token": "3", "logprob": 0.7}], "logprobs.content[1].top_logprobs[0].logprob", "0.7"),
        (-0.5, 3, "logprobs.content[1].top_logprobs", "int, not a list"),
    ],
)
def test_a_logprob_out_of_range_is_an_invalid_reply_named_with_the_field(
    transport: str, logprob: Any, top: Any, field: str, shown: str
) -> None:
    with FaultServer(default=Raw(_body(logprob, top))) as server:
        with pytest.raises(ProviderError) as err:
            pl.complete(server.model, "p", api_base=server.url, api_key="sk-t", logprobs=True, top_logprobs=2,
                        settings=Settings(transport=transport), cache=False)  # fmt: skip
        assert server.requests == 1 and err.value.attempts == 1  # not retried
    message = str(err.value)
    assert message.startswith(f"{server.model} at ") and "invalid reply: " in message
    assert f"{field} is {shown}" in message, message


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_minus_infinity_is_the_floor_and_rounding_above_zero_is_zero(transport: str) -> None:
    for logprob, expected in (("-Infinity", 3.0), (1e-9, None)):
        with FaultServer(default=Raw(_body(logprob))) as server:
            c = pl.complete(server.model, "p", api_base=server.url, api_key="sk-t", logprobs=True, top_logprobs=2,
                            settings=Settings(transport=transport), cache=False)  # fmt: skip
        assert c.logprobs is not None
        [score] = expected_scores(c.text, c.logprobs)
        if expected is None:  # 1e-9 read as 0: the sampled 7 is (nearly) certain beside 3's exp(-2)
            assert c.logprobs[1].logprob == 0.0 and score.expected is not None and 6 < score.expected < 7
        else:  # the sampled token had probability 0: all the mass is on the alternative
            assert score.expected == expected


def test_a_stored_record_with_a_logprob_out_of_range_is_not_a_record() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 0.000001"):
        TokenLogprob(token="7", logprob=5.0)
    with pytest.raises(ValidationError, match="finite number"):
        TokenLogprob(token="7", logprob=float("nan"))


def test_a_cached_reply_with_a_logprob_out_of_range_is_a_miss_never_served(tmp_path: Path) -> None:
    """An entry an older version stored with a logprob of 5 (a probability over 1) is not served: a miss, paid
    again, and the fresh reply replaces it."""
    model = pl.scripted("lp-stored", respond=lambda msgs: "fine")
    pl.complete(model.name, "p", cache=Cache(tmp_path), logprobs=True)
    con = sqlite3.connect(tmp_path / "cache.db")
    changed = con.execute("UPDATE Cache SET value = replace(value, '\"logprob\": 0.0', '\"logprob\": 5.0')").rowcount
    con.commit()
    con.close()
    assert changed == 1 and "5.0" in str(con_value(tmp_path))
    again = pl.complete(model.name, "p", cache=Cache(tmp_path), logprobs=True)
    assert not again.cache_hit and len(model.requests) == 2
    assert again.logprobs is not None and all(t.logprob <= 0 for t in again.logprobs)
    assert pl.complete(model.name, "p", cache=Cache(tmp_path), logprobs=True).cache_hit


def con_value(folder: Path) -> object:
    con = sqlite3.connect(folder / "cache.db")
    try:
        return con.execute("SELECT value FROM Cache").fetchone()[0]
    finally:
        con.close()


def test_numpy_logprobs_as_the_local_model_reports_them_are_numbers() -> None:
    """llama-cpp-python reports np.float32 log-probabilities: numbers, read as floats (a first version of this rule
    took them for non-numbers and refused every local reply with log-probabilities)."""
    tokens = logprobs_of(
        {
            "content": [
                {"token": "a", "logprob": np.float32(-0.5), "top_logprobs": [{"token": "b", "logprob": np.float64(-1)}]}
            ]
        }
    )
    assert tokens is not None and tokens[0].logprob == -0.5 and tokens[0].top_logprobs[0].logprob == -1.0
    assert isinstance(tokens[0].logprob, float)
