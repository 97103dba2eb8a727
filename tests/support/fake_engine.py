"""A scripted model for the batching engine: the real worker loop (`promptlab.llm.local.engine_worker.Worker`:
admission, sequence slots, timeouts, heartbeats) over a model whose decode is Python, served from a thread of
the test's process in place of the worker process (`promptlab.llm.local.engine.spawn_worker`)."""

from __future__ import annotations

import io
import multiprocessing
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from promptlab.llm.local.engine_model import Model
from promptlab.llm.local.engine_worker import Worker

WORD = 7
"""The token every reply is made of (its text is `w `)."""


class FakeLib:
    """The llama.cpp calls the worker makes, over a `FakeModel`."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model

    def llama_memory_seq_rm(self, *args: Any) -> bool:
        return True

    def llama_memory_seq_cp(self, *args: Any) -> None:
        pass

    def llama_decode(self, ctx: Any, batch: Any) -> int:
        return self.model.decode()

    def llama_sampler_sample(self, sampler: Any, ctx: Any, row: int) -> int:
        return WORD

    def llama_vocab_is_eog(self, vocab: Any, token: int) -> bool:
        return False

    def llama_sampler_free(self, sampler: Any) -> None:
        pass


@dataclass
class FakeModel:
    """A model of `n_seq` slots whose every decode step takes at least `step_s` seconds. `gate` cleared: the
    worker holds at its first request's prompt (busy, sending nothing) until the test sets it. `hang` set: every
    decode blocks until `freed` is set (a worker hung in native code)."""

    path: Path
    n_seq: int = 2
    step_s: float = 0.0
    n_ctx: int = 1 << 16
    n_batch: int = 512
    gate: threading.Event = field(default_factory=threading.Event)
    hang: threading.Event = field(default_factory=threading.Event)
    freed: threading.Event = field(default_factory=threading.Event)
    steps: int = 0
    copies: int = 0
    """Prefixes copied from one slot to another."""
    batches: list[tuple[int, ...]] = field(default_factory=list)
    """The sequence ids (slots) of each decode's rows, in row order."""
    rows: list[int] = field(default_factory=list)
    lib: Any = None
    batch: Any = field(default_factory=lambda: SimpleNamespace(n_tokens=0))
    ctx: Any = None
    mem: Any = None
    vocab: Any = None

    def __post_init__(self) -> None:
        self.lib = FakeLib(self)
        self.gate.set()

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        self.gate.wait()
        return [10 + ord(c) % 50 for c in str(messages[-1]["content"])]

    def budget(self, prompt: int, params: dict[str, Any]) -> int:
        return int(params.get("max_tokens") or 16)

    def add(self, n: int, token: int, pos: int, seq: int, logits: bool) -> int:
        self.rows[n:] = [seq]
        return n + 1

    def piece(self, token: int) -> bytes:
        return b"w "

    def sampler(self, params: dict[str, Any]) -> Any:
        return object()

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        self.copies += 1

    def decode(self) -> int:
        if self.hang.is_set():
            self.freed.wait()
        time.sleep(self.step_s)
        self.steps += 1
        self.batches.append(tuple(self.rows))
        return 0


class ThreadProc:
    """The worker thread, seen as the worker process `promptlab.llm.local.engine.Engine` watches."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self.stderr = io.BytesIO(b"")

    def wait(self, timeout: float | None = None) -> int:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise subprocess.TimeoutExpired("fake engine worker", timeout or 0)
        return 0

    def kill(self) -> None:
        pass  # a thread cannot be killed: the test frees a hung fake model at its end


def spawner(model: FakeModel) -> Any:
    """An `engine.spawn_worker` that serves `model` from a thread."""

    def spawn(path: Path, opts: dict[str, Any]) -> tuple[ThreadProc, Any]:
        ours, theirs = multiprocessing.Pipe()

        def serve() -> None:
            theirs.send(("ready", {"n_seq": model.n_seq}))
            Worker(theirs, cast(Model, model)).run()  # the scripted stand-in has the methods the loop uses
            theirs.close()

        thread = threading.Thread(target=serve, daemon=True, name="fake-engine-worker")
        thread.start()
        return ThreadProc(thread), ours

    return spawn
