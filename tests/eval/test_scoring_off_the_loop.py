"""#41 item 5: nothing CPU-bound on the event loop. A regex scorer that runs into its 1 s time limit (catastrophic
backtracking) used to match on the loop's own thread, stalling every call in flight (their timeouts counted the
stall); scoring now runs in a worker thread and the match lets go of the GIL. Shown by overlap: a heartbeat task on
the loop keeps ticking while the slow match runs (ticks are counted, not a stopwatch read)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from pydantic import BaseModel

import promptlab as pl
from promptlab.eval.scorers import Regex
from promptlab.eval.scoring import score_safely
from promptlab.llm.call import structured
from promptlab.llm.call.entry import HEAVY_REPLY_CHARS
from promptlab.record import Example


def test_a_heartbeat_keeps_ticking_while_a_slow_regex_scores() -> None:
    scorer = Regex(pattern=r"(a|aa)+$")  # exponential on "aaa...b" for a backtracking matcher: runs to its limit
    example = Example(input="x", target=None)

    async def run() -> tuple[int, str | None]:
        ticks, done = 0, asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(heartbeat())
        await asyncio.sleep(0)  # the heartbeat is running
        before = ticks
        scored = await score_safely(scorer, "a" * 60 + "b", example)
        during = ticks - before
        done.set()
        await beat
        return during, scored.error

    during, error = asyncio.run(run())
    assert error is not None and "took over 1 s" in error  # the match did run into its limit
    assert during >= 5, f"the loop ticked {during} time(s) while the regex ran"  # ~100 when the loop is free


class Long(BaseModel):
    score: int
    note: str


def test_a_large_structured_reply_is_parsed_off_the_loop_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps({"score": 7, "note": "x" * HEAVY_REPLY_CHARS})
    model = pl.scripted("long-structured-reply", respond=lambda m: text)
    threads: list[threading.Thread] = []
    real = structured.parse

    def parse(reply: str, schema: type[BaseModel]) -> BaseModel:
        threads.append(threading.current_thread())
        return real(reply, schema)

    monkeypatch.setattr(structured, "parse", parse)

    async def run() -> tuple[pl.Completion, threading.Thread]:
        return await pl.acomplete(model.name, "Rate.", schema=Long, cache=False), threading.current_thread()

    c, loop_thread = asyncio.run(run())
    assert c.parsed is not None and c.parsed.score == 7
    assert threads and all(t is not loop_thread for t in threads)
