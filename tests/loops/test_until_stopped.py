"""Stop means now: a loop's task cancelled while a Stop is asked (`stop_scope`) returns its record at once, with
what it recorded, stop reason `interrupted`, and no phase after the loop; a cancellation without a Stop is
passed on."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from wording import TASK

import promptlab as pl
import promptlab.llm.providers.scripted as fake
from promptlab.events import Event
from promptlab.loops.registry import arun_loop
from promptlab.loops.runtime.interrupt import stop_scope

LOOPS = ["p3ro", "creator_critic", "opro", "resample", "gepa"]


def hanging_model(monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[threading.Event, threading.Event, dict]:
    """fake/<name>: fake/auto's replies, except that once `on["on"]` is set every call blocks until released."""
    auto_reply, started, release, on = fake.reply, threading.Event(), threading.Event(), {"on": False}

    def reply(id: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        if id == name and on["on"]:
            started.set()
            release.wait(60)
        return auto_reply("auto" if id == name else id, messages, params)

    pl.scripted(name, respond=lambda messages: "")
    monkeypatch.setattr(fake, "reply", reply)
    return started, release, on


async def stop_during_the_second_step(loop: str, on: dict, started: threading.Event) -> Any:
    """Run `loop`, make its calls hang once its first decision is recorded, then Stop and cancel."""
    flag = threading.Event()

    def handler(event: Event) -> None:
        if event.kind == "decision" and (event.iteration or 0) >= 1:
            on["on"] = True

    with stop_scope(flag):
        task = asyncio.ensure_future(
            arun_loop(loop, TASK, {"model": f"fake/hang-{loop}", "max_iterations": 5}, on_event=handler)
        )
    while not started.is_set():
        await asyncio.sleep(0.01)
    flag.set()
    task.cancel()
    return await task


@pytest.mark.parametrize("loop", LOOPS)
def test_a_stop_cancels_the_call_in_flight_and_keeps_the_iterations(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    started, release, on = hanging_model(monkeypatch, f"hang-{loop}")
    try:
        run = asyncio.run(stop_during_the_second_step(loop, on, started))
    finally:
        release.set()
    assert run.stop_reason == "interrupted" and run.info["stopped_at_once"]
    decided = [it for it in run.iterations if it.decision]
    assert decided and decided[0].index >= 0  # the decided iterations before the stop are kept
    assert run.final_test is None and run.baseline_test is None  # the test measurement was skipped
    assert not any(s.phase == "score_test" for s in run.final)
    assert run.final_output is not None  # its best prompt so far


def test_a_cancellation_without_a_stop_is_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release, on = hanging_model(monkeypatch, "hang-plain")
    on["on"] = True

    async def cancel() -> None:
        task = asyncio.ensure_future(arun_loop("p3ro", TASK, {"model": "fake/hang-plain"}))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        await task

    try:
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(cancel())
    finally:
        release.set()
