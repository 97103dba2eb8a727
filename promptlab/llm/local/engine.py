"""The batching engine: each local model file served by a worker process that decodes its calls together.

More in docs/servers.md, section "promptlab.llm.local.engine".
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..call.failures import InvalidReply
from .cpu import extra_bufts_safe

MODES = ("batch", "pool")
DEFAULT_MODE = "batch"
"""How local models run when PROMPTLAB_LOCAL_ENGINE is unset: the batching engine, whose greedy replies are the
same alone or batched, in any order and with any prefix shared, and the same as the instance pool's
(tests/llm/test_reference.py; docs/reproducibility.md, "Why the engine is exact")."""
DEFAULT_THREADS = min(2, os.cpu_count() or 1)
"""Threads of a worker when PROMPTLAB_LOCAL_THREADS is unset. Measured on 2 shared cores (docs/benchmarks.md):
two threads cost the same CPU per example as one (0.284 against 0.289 CPU-s) and finish 1.3x sooner; the
worker waits passively (OMP_WAIT_POLICY), so llama.cpp's barrier does not spin against the caller's threads.
More than two is not measured, so not assumed."""
DEFAULT_SEQS = 16
"""Sequence slots of a worker when PROMPTLAB_ENGINE_SEQS is unset: each has its own KV stream of the pool's
context (`pool.N_CTX` cells, 94 MB for SmolLM2-135M at 4,096)."""
N_BATCH = 512
"""The engine's prompt chunk, the pool's (`Llama`'s n_batch): a prompt is read in the chunks the pool reads it in."""


PASSING = frozenset({"piece", "admitted", "alive"})
"""The worker's messages that do not end a call."""


class LocalModelCrashed(InvalidReply):
    """The local model's worker process died (a native crash): an infrastructure failure, not retried."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, retryable=False)
        self.args = (detail,)

    def __str__(self) -> str:
        return self.detail


def mode() -> str:
    """How local models run: env PROMPTLAB_LOCAL_ENGINE, `batch` (default) or `pool`."""
    value = (os.environ.get("PROMPTLAB_LOCAL_ENGINE") or DEFAULT_MODE).strip().lower()
    if value not in MODES:
        raise ConfigError(f"PROMPTLAB_LOCAL_ENGINE must be one of {', '.join(MODES)}, got {value!r}")
    return value


def capacity() -> int:
    """How many calls to one local model are decoded at once: the engine's sequence slots
    (PROMPTLAB_ENGINE_SEQS), or with the instance pool its instances (PROMPTLAB_LOCAL_INSTANCES)."""
    from .pool import instances

    return _whole("PROMPTLAB_ENGINE_SEQS", DEFAULT_SEQS) if mode() == "batch" else instances()


def _whole(env: str, default: int) -> int:
    text = os.environ.get(env) or str(default)
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{env} must be a whole number >= 1, got {text!r}")
    return int(text)


def options(n_ctx_seq: int) -> dict[str, Any]:
    """The worker's load options: threads, sequence slots, KV cells, batch size, extra buffer types."""
    seqs = _whole("PROMPTLAB_ENGINE_SEQS", DEFAULT_SEQS)
    return {
        "threads": _whole("PROMPTLAB_LOCAL_THREADS", DEFAULT_THREADS),
        "n_seq": seqs,
        "n_ctx": seqs * n_ctx_seq,
        "n_ctx_seq": n_ctx_seq,
        "n_batch": N_BATCH,
        "extra_bufts": extra_bufts_safe(),
    }


def spawn_worker(path: Path, opts: dict[str, Any]) -> tuple[Any, Connection]:
    """Start the worker process of a model file: the process (its stderr piped) and our end of its pipe."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "promptlab.llm.local.engine_worker", str(theirs.fileno()), str(path), json.dumps(opts)],
        pass_fds=[theirs.fileno()],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    theirs.close()
    return proc, Connection(ours.detach())


@dataclass
class Pending:
    """A call in flight on a worker: its events (`piece`, `done`, `error`) arrive in `events`."""

    events: queue.Queue[tuple[Any, ...]] = field(default_factory=queue.Queue)
    notify: Callable[[], None] | None = None
    """Called (from the reader thread) after each event, for an async waiter."""

    def last(self, timeout: float | None = None) -> tuple[Any, ...]:
        """The call's final event (`done` or `error`), past its `admitted` and `piece` events (blocking)."""
        while (event := self.events.get(timeout=timeout))[0] in PASSING:
            pass
        return event

    def put(self, event: tuple[Any, ...]) -> None:
        self.events.put(event)
        if self.notify is not None:
            self.notify()


class Engine:
    """One worker process serving one model file, and the calls in flight on it."""

    def __init__(self, path: Path, n_ctx_seq: int) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.pending: dict[int, Pending] = {}
        self.ids = itertools.count(1)
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.alive = True
        self.heard = time.monotonic()
        """When the worker last sent anything (the monotonic clock): how a caller tells a hung worker."""
        self.proc, self.conn = spawn_worker(path, options(n_ctx_seq))
        threading.Thread(target=self._errors, daemon=True).start()
        first = self._recv()
        if first is None or first[0] != "ready":
            self.close()
            why = first[1] if first else self._death()
            raise ConfigError(f"local model {path.name}: {why}")
        self.info: dict[str, Any] = first[1]
        threading.Thread(target=self._read, daemon=True).start()

    def _recv(self) -> tuple[Any, ...] | None:
        try:
            return tuple(self.conn.recv())
        except (EOFError, OSError, TypeError):  # TypeError: the pipe was closed (`close`) while we read it
            return None

    def _errors(self) -> None:
        """Keep the worker's last lines of stderr (llama.cpp's own words when it aborts)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode("utf-8", errors="replace").rstrip()
            if text:
                self.tail.append(text)

    def _death(self) -> str:
        """Why the worker ended: its exit signal or code and its last line of stderr."""
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        time.sleep(0.05)  # the stderr reader's last lines
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc}"
        said = next((t for t in reversed(self.tail) if "what()" in t or "error" in t.lower()), None)
        said = said or (self.tail[-1] if self.tail else "")
        return f"its worker process {how}" + (f": {said[:300]}" if said else "")

    def _read(self) -> None:
        while (msg := self._recv()) is not None:
            self.heard = time.monotonic()
            with self.lock:
                call = self.pending.get(msg[1])
                if call is not None and msg[0] not in PASSING:
                    del self.pending[msg[1]]
            if call is not None:
                call.put(msg)
        with self.lock:
            self.alive = False
            calls, self.pending = list(self.pending.values()), {}
        why = f"the local model {self.path.name} crashed natively: {self._death()}"
        for call in calls:
            call.put(("crash", 0, why))

    def submit(self, messages: list[dict[str, Any]], params: dict[str, Any], call: Pending) -> int:
        """Send one request; its events arrive in `call`. Raises LocalModelCrashed when the worker is gone."""
        with self.lock:
            if not self.alive:
                raise LocalModelCrashed(f"the local model {self.path.name}'s worker process has ended")
            rid = next(self.ids)
            self.pending[rid] = call
            try:
                self.conn.send(("gen", rid, messages, params))
            except OSError as e:
                del self.pending[rid]
                raise LocalModelCrashed(f"the local model {self.path.name}'s worker process has ended ({e})") from e
        return rid

    def stats(self) -> dict[str, int]:
        """The worker's counters: prompt tokens asked for and read (the rest were reused prefixes), `llama_decode`
        calls (`steps`), decode steps and the tokens they decoded, the most sequences in one step, and the KV
        cells idle slots keep for prefix reuse."""
        call = Pending()
        with self.lock:
            rid = next(self.ids)
            self.pending[rid] = call
            self.conn.send(("stats", rid))
        event = call.events.get(timeout=60)
        if event[0] != "stats":
            raise LocalModelCrashed(str(event[-1]))
        return dict(event[2])

    def cancel(self, rid: int) -> None:
        """Take a request out of the batch (a caller that stopped waiting)."""
        with self.lock:
            if self.pending.pop(rid, None) is not None and self.alive:
                try:
                    self.conn.send(("cancel", rid))
                except OSError:
                    pass

    def close(self) -> None:
        self.conn.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)  # reaped, so its CPU counts in this process's children (benchmarks)


_engines: dict[Path, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(path: Path, n_ctx_seq: int) -> Engine:
    """The running engine of a model file (a fresh worker when there is none or the last one died)."""
    with _engines_lock:
        engine = _engines.get(path)
        if engine is None or not engine.alive:
            engine = _engines[path] = Engine(path, n_ctx_seq)
        return engine


def running() -> dict[Path, Engine]:
    """The engines of this process, by model file."""
    with _engines_lock:
        return dict(_engines)


@atexit.register
def close_all() -> None:
    """Stop every worker (each also stops by itself when this process's end of the pipe closes)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.close()
        _engines.clear()


__all__ = [
    "DEFAULT_THREADS",
    "capacity",
    "Engine",
    "LocalModelCrashed",
    "Pending",
    "close_all",
    "engine_for",
    "mode",
    "running",
    "spawn_worker",
]
