"""#41 item 1: every number a provider sends is bounded before it reaches a record, a frame or the ledger. A usage
count out of range (10^30, negative, a fraction, NaN) is an invalid reply named with the model and the field, not
retried, charged as an estimate under a spending cap; a Retry-After out of range fails the call naming it; a
results directory an older version wrote with such a figure still loads, the figure nulled with a warning."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Raw, Reply, Status

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import ProviderError
from promptlab.llm.call.settings import Settings
from promptlab.llm.spending.cap import SpendingCap
from promptlab.llm.spending.ledger import LEDGER_NAME
from promptlab.results.store import load

HUGE = 10**30


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FaultServer:
    with FaultServer(
        default=Reply('{"score": 7}', prompt_tokens=HUGE, completion_tokens=HUGE), model="gpt-4o-mini"
    ) as s:
        monkeypatch.setenv("OPENAI_API_BASE", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-huge")
        yield s


@pytest.mark.parametrize("transport", ["auto", "litellm"])
@pytest.mark.parametrize(
    ("usage", "field", "shown"),
    [
        ({"prompt_tokens": HUGE, "completion_tokens": 5}, "prompt_tokens", "1e+30"),
        ({"prompt_tokens": 11, "completion_tokens": 2**53}, "completion_tokens", "9.01e+15"),
        ({"prompt_tokens": -1_000_000, "completion_tokens": 5}, "prompt_tokens", "-1000000"),
        ({"prompt_tokens": 10.5, "completion_tokens": 5}, "prompt_tokens", "10.5"),
    ],
)
def test_a_count_out_of_range_is_an_invalid_reply_named_with_the_model_and_the_field(
    server: FaultServer, usage: dict[str, Any], field: str, shown: str, transport: str
) -> None:
    server.default = Reply("hi", **usage)
    with pytest.raises(ProviderError) as err:
        pl.complete(server.model, "p", cache=False, settings=Settings(transport=transport))
    message = str(err.value)
    assert (
        message.startswith(f"{server.model} at ")
        and f": invalid reply: usage.{field} is {shown}, out of range" in message
    )
    assert err.value.attempts == 1 and server.requests == 1  # not retried: the server would count the same way


def test_a_nan_count_is_out_of_range_too(server: FaultServer) -> None:
    body = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}]}
    server.default = Raw(json.dumps({**body, "usage": {"prompt_tokens": math.nan, "completion_tokens": 1}}))
    with pytest.raises(ProviderError, match=r"usage\.prompt_tokens is nan, out of range"):
        pl.complete(server.model, "p", cache=False)


@pytest.mark.parametrize("value", ["inf", "nan", "1e30", "90000"])
def test_a_retry_after_out_of_range_fails_the_call_naming_it(server: FaultServer, value: str) -> None:
    server.script(Status(429, retry_after=value))
    settings = Settings(deadline_s=None, backoff_s=0.01)  # no deadline: an infinite wait would sleep for ever
    with pytest.raises(ProviderError, match=r"\(Retry-After\), out of range \(0 to 86400s\)"):
        pl.complete(server.model, "p", cache=False, settings=settings)
    assert server.requests == 1


def _experiment(tmp_path: Path) -> Path:
    return write_experiment(
        tmp_path,
        {
            "name": "huge",
            "loops": ["toy"],
            "config": {"model": "openai/gpt-4o-mini", "max_iterations": 1, "max_tokens": 50},
            "grid": {"style": ["a", "b", "c"]},
        },
        topics(2),
    )


@pytest.mark.parametrize("cap", [None, "0.5"])
def test_a_sweep_against_a_server_reporting_1e30_tokens_names_each_cell_and_reports(
    toy_dir: Path, server: FaultServer, tmp_path: Path, cap: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    exp, out = _experiment(tmp_path), tmp_path / "out"
    args = ["sweep", str(exp), "--out", str(out), "--workers", "1", "--no-progress", "--cache", str(tmp_path / "c")]
    code = main([*args, *(["--max-cost", cap] if cap else [])])
    assert code == 1  # cells failed (not 2, "refused before start"; no traceback)
    cells = load(out).cells
    assert len(cells) == 3 and set(cells["status"]) == {"failed"}
    for message in cells["error"]:
        assert (
            "openai/gpt-4o-mini" in message and "invalid reply: usage.prompt_tokens is 1e+30, out of range" in message
        )
    assert server.requests <= 12 and all("(after 1 attempt)" in m for m in cells["error"])  # never retried
    if cap:
        ledger = SpendingCap(out / LEDGER_NAME, float(cap)).ledger()
        assert ledger.estimated_requests == server.requests and 0 < ledger.spent_usd < float(cap)
    capsys.readouterr()
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0


def test_a_directory_written_with_a_huge_figure_still_loads_and_reports(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As an older version wrote it: a cell's status.json counting 10^30 tokens and 2^70 runs."""
    exp, out = _experiment(tmp_path), tmp_path / "out"
    with FaultServer(default=Reply('{"score": 7}'), model="gpt-4o-mini") as s:
        mp = pytest.MonkeyPatch()
        mp.setenv("OPENAI_API_BASE", s.url)
        mp.setenv("OPENAI_API_KEY", "sk-test-huge")
        try:
            assert main(["sweep", str(exp), "--out", str(out), "--no-progress", "--cache", str(tmp_path / "c")]) == 0
        finally:
            mp.undo()
    status_file = sorted((out / "cells").glob("*/status.json"))[0]
    status = json.loads(status_file.read_text())
    status.update(spent_tokens=HUGE, n_runs=2**70)
    status_file.write_text(json.dumps(status))
    with pytest.warns(RuntimeWarning, match=r"spent_tokens.*out of range"):
        cells = load(out).cells
    row = cells[cells["cell_id"] == status_file.parent.name].iloc[0]
    assert row["spent_tokens"] is pd_na() and row["n_runs"] is pd_na() and row["status"] == "ok"
    capsys.readouterr()
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0


def pd_na() -> Any:
    import pandas as pd

    return pd.NA
