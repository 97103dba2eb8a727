"""A reply's log-probabilities out of range (round 5 of #41's item 1): a logprob of 5 (a probability over 1),
1e308, NaN, a string, a list, and top_logprobs that is not a list, on both transports. Each must end the call as
an invalid reply naming the field, after one request; minus infinity is read as the floor."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fault_server import FaultServer, Raw
from hardening_battery import Row

import promptlab as pl
from promptlab.errors import ProviderError
from promptlab.llm.call.settings import Settings

SHAPES: list[tuple[Any, Any, str]] = [
    (5.0, None, "logprobs.content[0].logprob"),
    (1e308, None, "logprobs.content[0].logprob"),
    ("NaN", None, "logprobs.content[0].logprob"),
    ("abc", None, "logprobs.content[0].logprob"),
    ([1], None, "logprobs.content[0].logprob"),
    (-0.5, 3, "logprobs.content[0].top_logprobs"),
]


def body(logprob: Any, top: Any) -> str:
    token = {"token": "7", "logprob": logprob, "top_logprobs": [] if top is None else top}
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "7"}}
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            "choices": [{**choice, "logprobs": {"content": [token]}}],
        }
    )


def _refused(transport: str, logprob: Any, top: Any, field: str) -> bool:
    with FaultServer(default=Raw(body(logprob, top))) as server:
        try:
            pl.complete(server.model, "p", api_base=server.url, api_key="sk-battery", logprobs=True,
                        top_logprobs=2, settings=Settings(transport=transport), cache=False)  # fmt: skip
        except ProviderError as e:
            return f"invalid reply: {field} is " in str(e) and server.requests == 1
    return False


def logprob_figures(base: Path) -> Row:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    checks = [_refused(t, lp, top, field) for t in ("auto", "litellm") for lp, top, field in SHAPES]
    return Row.of_checks(
        "log-probabilities out of range (5, 1e308, NaN, a string, a list; top_logprobs not a list), both transports",
        checks,
        "an invalid reply naming the field, after 1 request; test_logprobs_bounded",
    )


if __name__ == "__main__":  # run alone: python benchmarks/support/figures_battery.py
    print(logprob_figures(Path(".")))
