"""The batching engine's worker: one process owning one llama.cpp model, decoding many sequences together.

Run by `promptlab.llm.local.engine` in a child process (so a native crash of llama.cpp ends this process, never
the sweep's). Messages over the pipe: in, `("gen", id, messages, params)`, `("cancel", id)`, `("stats", id)`; out,
`("admitted", id)` (the request's prompt starts to be read: its timeout starts), `("piece", id, text)`
(streamed requests), `("done", id, reply)`, `("error", id, kind, message)`, `("stats", id, counts)` and
`("alive", 0)` (a heartbeat, at most every `HEARTBEAT_S` while sequences are decoded, sent by the decoding loop
itself, so a worker hung in native code falls silent).

Continuous batching, exact: a request joins as soon as a sequence slot is free and leaves when it stops; each
step decodes one token of every live sequence in one `llama_decode` (a few when some hold far more cells
than others: `decode_groups`). A sequence's reply is the one it gets
alone (and the instance pool's): each slot has its own KV stream (`engine_model`), a prompt is read in its own
`llama_decode` calls, never beside another prompt or a decoded token, in the chunks it is read in alone
(`chunks`), and the decode step lists the sequences by slot, so consecutive slots make one ubatch (the live
sequences are kept in the lowest slots: `Worker._compact`). A new prompt takes the lowest free slot and starts
from the longest prefix a slot holds that was read the way the new prompt would read it (in chunks of two
tokens or more, never a reply's tokens): the slot's own cells when it holds them, else a copy of another's
(`Model.copy_prefix`), so a candidate's instruction is read once for all of its examples. Each sequence has
its own sampler chain (grammar, top-k/top-p/min-p, temperature, seed), stop strings, token budget and timeout.
A request's timeout counts from its admission into the batch, as a server's per-request timeout does: its
wait in the queue (for a slot) is not its fault.
"""

from __future__ import annotations

import itertools
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

from .engine_model import Model
from .engine_plan import chunks, common_prefix, decode_groups

TEST_ABORT_ENV = "PROMPTLAB_ENGINE_TEST_ABORT"
"""Test hook: a worker whose model file name equals this variable aborts natively at its first decode
(how the tests simulate a llama.cpp crash such as the NaN-weights abort)."""

HEARTBEAT_S = 1.0
"""The most seconds between two `alive` messages while the worker decodes."""
WAIT_FOR_PREFIX = 16
"""A request waits one step for a shared prefix that another sequence is still reading when that saves more
than this many tokens."""
MIN_COPY = 16
"""The fewest prefix tokens worth copying from another slot (a copy costs about what reading a few tokens does)."""


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
    sizes: list[int]
    """The chunks `pending` is read in (`chunks`)."""
    params: dict[str, Any]
    sampler: Any
    max_tokens: int
    deadline: float | None
    """When the sequence is cut short (monotonic clock): its admission plus the call's timeout."""
    stops: list[str]
    stream: bool
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
        self.exact: list[int] = [0] * model.n_seq
        """How many of `held` were read as any longer prompt reads them (in chunks of two tokens or more):
        the prefix a later prompt may reuse."""
        self.busy: list[bool] = [False] * model.n_seq
        self.abort = os.environ.get(TEST_ABORT_ENV) == model.path.name
        self.beat = time.monotonic()
        self.counts = {
            "prompt_tokens": 0,
            "prompt_tokens_read": 0,
            "steps": 0,
            "decode_steps": 0,
            "decoded": 0,
            "max_batch": 0,
            "ubatches": 0,
            "moves": 0,
        }
        """Prompt tokens asked for and actually read (the rest came from a reused prefix), `llama_decode` calls,
        decode steps (a token of every decoding sequence) and the tokens they decoded, the most sequences in one
        step, the ubatches llama.cpp split the decode steps into (a run of consecutive slots each), and the
        sequences `_compact` moved."""
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
                self._compact()
                self._step()

    def _take(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "gen":
            self.waiting.append((msg[1], msg[2], msg[3]))
        elif msg[0] == "stats":
            idle = sum(len(self.held[s]) for s in range(self.m.n_seq) if not self.busy[s])
            self._send("stats", msg[1], {**self.counts, "idle_cells": idle})
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
        """Start waiting requests while a slot is free (in arrival order)."""
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
            self.waiting.popleft()
            try:
                sampler = self.m.sampler(params)
            except Exception as e:  # noqa: BLE001 -- whatever it is, this request's own error: the batch goes on
                self._send("error", rid, "bad_request", _said(e))
                continue
            self._start(rid, prompt, params, sampler, budget, src, shared)

    def _best_prefix(self, prompt: list[int]) -> tuple[int, int, bool]:
        """(slot, length, ready) of the longest prefix of `prompt` some slot holds exactly or is reading (at most
        all but its last token, which is read for the first reply token's logits). Not `ready` when more than
        `WAIT_FOR_PREFIX` of those tokens are still being read by a live sequence: the request then waits a step
        and copies them, as the examples of one candidate arriving together do from the first of them."""
        reading = {seq.slot: seq.pending for seq in self.live.values()}
        best, length, have = -1, 0, 0
        for slot, held in enumerate(self.held):
            exact = held[: self.exact[slot]] + reading.get(slot, [])
            n = common_prefix(exact, prompt)
            if n > length:
                best, length, have = slot, n, min(n, self.exact[slot])
        length = min(length, len(prompt) - 1)
        if length - have > WAIT_FOR_PREFIX:
            return best, length, False
        return best, min(have, length), True

    def _start(
        self, rid: int, prompt: list[int], params: dict[str, Any], sampler: Any, budget: int, src: int, shared: int
    ) -> None:
        # the lowest free slot (live slots kept together: `_compact`), the prefix copied there when held elsewhere
        slot = self.busy.index(False)
        if slot != src and shared < MIN_COPY:
            shared = 0
        shared, sizes = chunks(shared, len(prompt), self.m.n_batch)
        if slot != src and shared > 0:
            self.m.copy_prefix(src, slot, shared)
        else:
            self.m.lib.llama_memory_seq_rm(self.m.mem, slot, shared, -1)
        self.held[slot], self.exact[slot] = prompt[:shared], shared
        self.busy[slot] = True
        self.counts["prompt_tokens"] += len(prompt)
        self.counts["prompt_tokens_read"] += len(prompt) - shared
        timeout = params.get("timeout")
        self._send("admitted", rid)
        self.live[rid] = Seq(
            id=rid,
            slot=slot,
            prompt=prompt,
            pending=prompt[shared:],
            sizes=sizes,
            params=params,
            sampler=sampler,
            max_tokens=budget,
            deadline=time.monotonic() + float(timeout) if timeout is not None else None,
            stops=[s for s in (params.get("stop") or []) if s],
            stream=bool(params.get("stream")),
            logprobs=[] if params.get("logprobs") else None,
        )

    # -- decoding ----------------------------------------------------------------------------------------

    def _compact(self) -> None:
        """Keep the live sequences in the lowest slots: while a free slot lies below a live one, the highest live
        sequence moves down into it (its cells copied bit for bit, `Model.copy_prefix`). llama.cpp puts only
        consecutive sequence ids of a non-unified cache in one ubatch, so a step over slots 0, 2 and 5 is three
        passes over the weights: 8 sequences a step in slots 0, 2, ..., 14 cost 1.57x the CPU of the same 8 in
        slots 0-7 (docs/benchmarks.md, "What a decode step costs"). The slot left keeps its cells for prefix
        reuse, like an ended sequence's."""
        while True:
            live = sorted(self.live.values(), key=lambda q: q.slot)
            free = self.busy.index(False) if not all(self.busy) else self.m.n_seq
            if not live or live[-1].slot < free:
                return
            seq, src = live[-1], live[-1].slot
            self.m.copy_prefix(src, free, len(self.held[src]))
            self.held[free], self.exact[free] = list(self.held[src]), self.exact[src]
            self.busy[free], self.busy[src] = True, False
            seq.slot = free
            self.counts["moves"] += 1

    def _step(self) -> None:
        """The next chunk of every prompt being read, each alone in its `llama_decode`, then a token of every
        decoding sequence, by slot, in the `llama_decode` calls `decode_groups` finds cheapest."""
        self._beat()
        now = time.monotonic()
        for seq in [s for s in self.live.values() if s.deadline is not None and now >= s.deadline]:
            why = f"the local model passed the call's deadline (its timeout, {seq.params['timeout']:g}s from admission)"
            self._end(seq, ("timeout", f"{why} after {len(seq.out)} tokens"))
        for seq in [s for s in self.live.values() if s.pending]:
            self._read_chunk(seq)
            self._beat()
        decoding = sorted((s for s in self.live.values() if not s.pending), key=lambda s: s.slot)
        if decoding:
            self.counts["max_batch"] = max(self.counts["max_batch"], len(decoding))
            self.counts["decode_steps"] += 1
        for start, end in decode_groups([len(self.held[s.slot]) + 1 for s in decoding]):
            if not self._decode_group(decoding[start:end]):
                return

    def _decode_group(self, group: list[Seq]) -> bool:
        """One `llama_decode` of the next token of each sequence of `group` (by slot), then each one's sample;
        False when the decode failed (every live sequence has failed with it)."""
        n = 0
        for seq in group:
            n = self.m.add(n, seq.out[-1], len(self.held[seq.slot]), seq.slot, True)
            self.held[seq.slot].append(seq.out[-1])
        self.counts["decoded"] += n
        self.counts["ubatches"] += 1 + sum(b.slot != a.slot + 1 for a, b in itertools.pairwise(group))
        if not self._decode(n):
            return False
        for i, seq in enumerate(group):
            if seq.id in self.live:
                self._sample(seq, i)
        return True

    def _read_chunk(self, seq: Seq) -> None:
        """Read the next chunk of a sequence's prompt; after its last, sample the first reply token."""
        m = self.m
        size = seq.sizes.pop(0)
        take, seq.pending = seq.pending[:size], seq.pending[size:]
        held = self.held[seq.slot]
        for k, token in enumerate(take):
            m.add(k, token, len(held), seq.slot, not seq.pending and k == size - 1)
            held.append(token)
        if size > 1:  # read as any longer prompt reads these tokens (a prompt's lone last token is not)
            self.exact[seq.slot] = len(held)
        if self._decode(size) and not seq.pending:
            self._sample(seq, size - 1)

    def _decode(self, n: int) -> bool:
        """`llama_decode` of the batch's first `n` rows; False (every live sequence failed) when it fails."""
        if self.abort:
            os.abort()
        self.m.batch.n_tokens = n
        self.counts["steps"] += 1
        rc = self.m.lib.llama_decode(self.m.ctx, self.m.batch)
        if rc != 0:
            self._fail_all(f"llama_decode returned {rc} (the KV cache is full or the batch is invalid)")
        return rc == 0

    def _beat(self) -> None:
        now = time.monotonic()
        if now - self.beat >= HEARTBEAT_S:
            self.beat = now
            self._send("alive", 0)

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
        self.m.lib.llama_sampler_free(seq.sampler)
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

    def _fail_all(self, message: str) -> None:
        for seq in list(self.live.values()):
            self._end(seq, ("engine", message))
        for s in range(self.m.n_seq):
            self.m.lib.llama_memory_seq_rm(self.m.mem, s, -1, -1)
            self.held[s], self.exact[s] = [], 0


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
