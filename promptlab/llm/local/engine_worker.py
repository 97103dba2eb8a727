"""The batching engine's worker: one process owning one llama.cpp model, decoding many sequences together.

Run by `promptlab.llm.local.engine` in a child process (so a native crash of llama.cpp ends this process, never
the sweep's). Messages over the pipe: in, `("gen", id, messages, params)`, `("cancel", id)`, `("stats", id)`; out,
`("admitted", id)` (the request's prompt starts to be read: its timeout starts), `("piece", id, text)`
(streamed requests), `("done", id, reply)`, `("error", id, kind, message)`, `("stats", id, counts)` and
`("alive", 0)` (a heartbeat, at most every `HEARTBEAT_S` while sequences are decoded, sent by the decoding loop
itself, so a worker hung in native code falls silent).

Continuous batching: a request joins the running batch as soon as a sequence slot and room in the KV cache
are free, and leaves it when it stops; each step decodes one token of every live sequence (and chunks of
new prompts) in one `llama_decode`. A new prompt starts from the longest prefix any slot holds: that slot's
cells are copied to the new sequence (`llama_memory_seq_cp`: the unified KV cache tags the same cells with
both ids), so a candidate's instruction is read once for all of its examples. Each sequence has its own
sampler chain (grammar, top-k/top-p/min-p, temperature, seed), stop strings, token budget and timeout. A
request's timeout counts from its admission into the batch, as a server's per-request timeout does: its wait
in the queue (for a slot or room in the KV cache) is not its fault.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from .engine_model import Model

TEST_ABORT_ENV = "PROMPTLAB_ENGINE_TEST_ABORT"
"""Test hook: a worker whose model file name equals this variable aborts natively at its first decode
(how the tests simulate a llama.cpp crash such as the NaN-weights abort)."""

IDLE_CELLS = 2048
"""The most KV cells kept for idle slots (prefixes for later requests to copy); older ones are dropped first.
Attention reads every cell up to the highest one in use, whether a sequence sees it or not (measured: 5.6
CPU-ms per decoded token with 2k cells in use, 6.9 with 8k), so a cache left full of old prefixes makes every
step dearer (docs/benchmarks.md)."""
HEARTBEAT_S = 1.0
"""The most seconds between two `alive` messages while the worker decodes."""
WAIT_FOR_PREFIX = 16
"""A request waits one step for a shared prefix that another sequence is still reading when that saves more
than this many tokens."""


def _said(e: BaseException) -> str:
    """An exception as one request's error message (a bare AssertionError or KeyError says little alone)."""
    return str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"


@dataclass
class Seq:
    """One request being decoded in a sequence slot."""

    id: int
    slot: int
    prompt: list[int]
    pending: list[int]
    """Prompt tokens not yet in the KV cache."""
    params: dict[str, Any]
    sampler: Any
    max_tokens: int
    deadline: float | None
    """When the sequence is cut short (monotonic clock): its admission plus the call's timeout."""
    stops: list[str]
    stream: bool
    reserved: int
    out: list[int] = field(default_factory=list)
    raw: bytearray = field(default_factory=bytearray)
    logprobs: list[dict[str, Any]] | None = None
    sent: int = 0
    """Characters of the reply already streamed."""


class Worker:
    """The batching loop of one model (see the module docstring)."""

    def __init__(self, conn: Any, model: Model) -> None:
        self.conn = conn
        self.m = model
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.waiting: deque[tuple[int, list[dict[str, Any]], dict[str, Any]]] = deque()
        self.live: dict[int, Seq] = {}
        self.held: list[list[int]] = [[] for _ in range(model.n_seq)]
        """The tokens each slot's KV cells hold (kept after a sequence ends, for prefix reuse)."""
        self.busy: list[bool] = [False] * model.n_seq
        self.idle: dict[int, None] = {}
        """The idle slots holding cells, oldest first."""
        self.abort = os.environ.get(TEST_ABORT_ENV) == model.path.name
        self.beat = time.monotonic()
        self.counts = {"prompt_tokens": 0, "prompt_tokens_read": 0, "steps": 0, "max_batch": 0}
        """Prompt tokens asked for and actually decoded (the rest came from a copied prefix), decode steps,
        the most sequences in one step."""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                self.inbox.put(self.conn.recv())
            except (EOFError, OSError):
                self.inbox.put(None)
                return

    def run(self) -> None:
        """Serve requests until the parent closes the pipe."""
        while True:
            idle = not self.live and not self.waiting
            try:
                msg = self.inbox.get(block=idle, timeout=None)
                while msg is not None:
                    self._take(msg)
                    msg = self.inbox.get_nowait()
                return  # the parent went away
            except queue.Empty:
                pass
            self._admit()
            if self.live:
                self._step()

    def _take(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "gen":
            self.waiting.append((msg[1], msg[2], msg[3]))
        elif msg[0] == "stats":
            self._send("stats", msg[1], {**self.counts, "idle_cells": sum(len(self.held[s]) for s in self.idle)})
        elif msg[0] == "cancel":
            self.waiting = deque(w for w in self.waiting if w[0] != msg[1])
            if msg[1] in self.live:
                self._end(self.live[msg[1]], ("cancelled", "cancelled by the caller"))

    def _send(self, *msg: Any) -> None:
        try:
            self.conn.send(msg)
        except (BrokenPipeError, OSError):
            pass  # the parent is gone; the reader thread ends the loop

    # -- admission ---------------------------------------------------------------------------------------

    def _admit(self) -> None:
        """Start waiting requests while a slot and room in the KV cache are free (in arrival order)."""
        while self.waiting and not all(self.busy):
            rid, messages, params = self.waiting[0]
            try:
                prompt = self.m.prompt_tokens(messages)
                budget = self.m.budget(len(prompt), params)
            except Exception as e:  # noqa: BLE001 -- whatever it is, this request's own error: the batch goes on
                self.waiting.popleft()
                self._send("error", rid, "bad_request", _said(e))
                continue
            src, shared, ready = self._best_prefix(prompt)
            if not ready:
                return  # a live sequence is reading this prompt's prefix: copy it after this step
            need = len(prompt) - shared + budget
            if not self._room(need, keep=src):
                return  # wait for room
            self.waiting.popleft()
            try:
                sampler = self.m.sampler(params)
            except Exception as e:  # noqa: BLE001 -- whatever it is, this request's own error: the batch goes on
                self._send("error", rid, "bad_request", _said(e))
                continue
            self._start(rid, prompt, params, sampler, budget, src, shared, need)

    def _room(self, need: int, keep: int) -> bool:
        """Whether `need` more cells fit in the KV cache, dropping the kept cells of idle slots (least first,
        never `keep`, the prefix the request reuses) until they do."""
        used = sum(s.reserved for s in self.live.values())
        idle = sorted(
            (s for s in range(self.m.n_seq) if not self.busy[s] and s != keep), key=lambda s: len(self.held[s])
        )
        kept = sum(len(self.held[s]) for s in idle) + (len(self.held[keep]) if keep >= 0 and not self.busy[keep] else 0)
        while used + kept + need > self.m.n_ctx and idle:
            slot = idle.pop(0)
            kept -= len(self.held[slot])
            self.m.lib.llama_memory_seq_rm(self.m.mem, slot, -1, -1)
            self.held[slot] = []
        return used + kept + need <= self.m.n_ctx or not self.live

    def _best_prefix(self, prompt: list[int]) -> tuple[int, int, bool]:
        """(slot, length, ready) of the longest prefix of `prompt` some slot holds or is reading (at most all
        but its last token, which is decoded for the first reply token's logits). Not `ready` when more than
        `WAIT_FOR_PREFIX` of those tokens are still being read by a live sequence: the request then waits a step
        and copies them, as the examples of one candidate arriving together do from the first of them."""
        reading = {seq.slot: seq.pending for seq in self.live.values()}
        best, length, have = -1, 0, 0
        for slot, held in enumerate(self.held):
            n = _common(held + reading.get(slot, []), prompt)
            if n > length:
                best, length, have = slot, n, min(n, len(held))
        length = min(length, len(prompt) - 1)
        if length - have > WAIT_FOR_PREFIX:
            return best, length, False
        return best, min(have, length), True

    def _start(
        self,
        rid: int,
        prompt: list[int],
        params: dict[str, Any],
        sampler: Any,
        budget: int,
        src: int,
        shared: int,
        need: int,
    ) -> None:
        free = [s for s in range(self.m.n_seq) if not self.busy[s]]
        # reuse the source slot itself when free, else the free slot whose cells are worth least
        slot = src if src in free else min(free, key=lambda s: len(self.held[s]))
        mem = self.m.mem
        if slot != src:
            self.m.lib.llama_memory_seq_rm(mem, slot, -1, -1)
            if shared > 0:
                self.m.lib.llama_memory_seq_cp(mem, src, slot, 0, shared)
        else:
            self.m.lib.llama_memory_seq_rm(mem, slot, shared, -1)
        self.held[slot] = prompt[:shared]
        self.busy[slot] = True
        self.idle.pop(slot, None)
        self.counts["prompt_tokens"] += len(prompt)
        self.counts["prompt_tokens_read"] += len(prompt) - shared
        timeout = params.get("timeout")
        self._send("admitted", rid)
        self.live[rid] = Seq(
            id=rid,
            slot=slot,
            prompt=prompt,
            pending=prompt[shared:],
            params=params,
            sampler=sampler,
            max_tokens=budget,
            deadline=time.monotonic() + float(timeout) if timeout is not None else None,
            stops=[s for s in (params.get("stop") or []) if s],
            stream=bool(params.get("stream")),
            reserved=need,
            logprobs=[] if params.get("logprobs") else None,
        )

    # -- decoding ----------------------------------------------------------------------------------------

    def _step(self) -> None:
        """One llama_decode: a token of every decoding sequence, then prompt chunks up to the batch size."""
        now = time.monotonic()
        if now - self.beat >= HEARTBEAT_S:
            self.beat = now
            self._send("alive", 0)
        for seq in [s for s in self.live.values() if s.deadline is not None and now >= s.deadline]:
            why = f"the local model passed the call's deadline (its timeout, {seq.params['timeout']:g}s from admission)"
            self._end(seq, ("timeout", f"{why} after {len(seq.out)} tokens"))
        m = self.m
        rows: list[tuple[Seq, bool]] = []  # (sequence, whether its row's logits are sampled)
        n = 0
        batch = m.batch
        for seq in self.live.values():
            if not seq.pending:
                n = m.add(n, seq.out[-1], len(self.held[seq.slot]), seq.slot, True)
                self.held[seq.slot].append(seq.out[-1])
                rows.append((seq, True))
        for seq in self.live.values():
            take, seq.pending = seq.pending[: m.n_batch - n], seq.pending[m.n_batch - n :]
            for k, token in enumerate(take):
                last = not seq.pending and k == len(take) - 1
                n = m.add(n, token, len(self.held[seq.slot]), seq.slot, last)
                self.held[seq.slot].append(token)
                rows.append((seq, last))
        if n == 0:  # every sequence just passed its deadline
            return
        if self.abort:
            os.abort()
        batch.n_tokens = n
        self.counts["steps"] += 1
        self.counts["max_batch"] = max(self.counts["max_batch"], len({seq.id for seq, _ in rows}))
        rc = m.lib.llama_decode(m.ctx, batch)
        if rc != 0:
            self._fail_all(f"llama_decode returned {rc} (the KV cache is full or the batch is invalid)")
            return
        for i, (seq, sampled) in enumerate(rows):
            if sampled and seq.id in self.live:
                self._sample(seq, i)

    def _sample(self, seq: Seq, row: int) -> None:
        m = self.m
        token = int(m.lib.llama_sampler_sample(seq.sampler, m.ctx, row))
        if seq.logprobs is not None:
            seq.logprobs.append(m.logprob_entry(row, token, int(seq.params.get("top_logprobs") or 0)))
        if m.lib.llama_vocab_is_eog(m.vocab, token):
            if seq.logprobs:
                seq.logprobs.pop()
            self._end(seq, None, finish="stop")
            return
        seq.out.append(token)
        seq.raw += m.piece(token)
        text = seq.raw.decode("utf-8", errors="ignore")
        for stop in seq.stops:
            at = text.find(stop)
            if at >= 0:
                self._end(seq, None, finish="stop", text=text[:at])
                return
        if seq.stream:
            hold = max((len(s) for s in seq.stops), default=1) - 1
            safe = len(text) - hold  # an unfinished UTF-8 character is left out until it is whole
            if safe > seq.sent:
                self._send("piece", seq.id, text[seq.sent : safe])
                seq.sent = safe
        if len(seq.out) >= seq.max_tokens:
            self._end(seq, None, finish="length")

    def _end(self, seq: Seq, error: tuple[str, str] | None, *, finish: str = "stop", text: str | None = None) -> None:
        """Take a sequence out of the batch: reply (or error) sent, slot freed, its cells kept for reuse."""
        self.live.pop(seq.id, None)
        self.busy[seq.slot] = False
        self.idle[seq.slot] = None
        self.m.lib.llama_sampler_free(seq.sampler)
        if seq.pending:  # its prompt was not fully read: the slot holds only what was decoded
            self.m.lib.llama_memory_seq_rm(self.m.mem, seq.slot, len(self.held[seq.slot]), -1)
        self._forget_old()
        if error is not None:
            self._send("error", seq.id, *error)
            return
        body = seq.raw.decode("utf-8", errors="ignore") if text is None else text
        if seq.stream and len(body) > seq.sent:
            self._send("piece", seq.id, body[seq.sent :])
        logprobs = seq.logprobs
        if logprobs is not None and text is not None:
            logprobs = _trim(logprobs, len(text))
        self._send(
            "done",
            seq.id,
            {"text": body, "usage": (len(seq.prompt), len(seq.out)), "finish_reason": finish, "logprobs": logprobs},
        )

    def _forget_old(self) -> None:
        """Drop the cells of the oldest idle slots while the idle slots hold more than `IDLE_CELLS`."""
        kept = sum(len(self.held[s]) for s in self.idle)
        for slot in list(self.idle):
            if kept <= IDLE_CELLS:
                return
            kept -= len(self.held[slot])
            self.m.lib.llama_memory_seq_rm(self.m.mem, slot, -1, -1)
            self.held[slot] = []
            del self.idle[slot]

    def _fail_all(self, message: str) -> None:
        for seq in list(self.live.values()):
            self._end(seq, ("engine", message))
        for s in range(self.m.n_seq):
            self.m.lib.llama_memory_seq_rm(self.m.mem, s, -1, -1)
            self.held[s] = []


def _common(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x, y = np.asarray(a[:n]), np.asarray(b[:n])
    diff = np.flatnonzero(x != y)
    return int(diff[0]) if diff.size else n


def _trim(logprobs: list[dict[str, Any]], length: int) -> list[dict[str, Any]]:
    """The token entries whose text makes up the first `length` characters (a reply cut at a stop string)."""
    kept, seen = [], 0
    for entry in logprobs:
        if seen >= length:
            break
        kept.append(entry)
        seen += len(entry["token"])
    return kept


def main(conn: Any, path: str, options: dict[str, Any]) -> None:
    """Load the model, say ready (or why not), serve until the pipe closes."""
    try:
        model = Model.load(path, options)
    except Exception as e:  # reported to the parent, which fails the calls waiting for this model
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", model.describe()))
    Worker(conn, model).run()


if __name__ == "__main__":  # python -m promptlab.llm.local.engine_worker <fd> <model path> <options as JSON>
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    main(Connection(int(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3]))
