"""Outage and kill scenarios of a sweep, run against the loopback fault server; each returns its measurements.

tests/test_reliability.py asserts on them and benchmarks/reliability.py prints them as a table. Offline:
every model call goes to `FaultServer` on 127.0.0.1 (`openai/test-model` through OPENAI_API_BASE), every
run is the "toy" loop of toyloop.py (beside this file) (a writer and a structured judge).

"Paid calls repeated" counts request bodies the server answered with a reply more than once: a call whose
reply promptlab received and stored is never sent again. What a kill -9 costs is measured apart: a request in
flight at the kill has no stored reply, so the resumed sweep sends it again, and a provider bills it twice
("sent again after the kill"). `kill_and_resume` times its kill right after a run finished an iteration's
calls (the toy loop's `marks` file), so nothing is in flight; `kill_mid_call` kills while replies are on their
way and counts what was sent again against what was in flight.
Every scenario takes the api key to send (`key`), so a caller can plant a recognisable value and look for it
on disk afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import experiment_files
import pandas as pd
import toyloop  # noqa: F401 -- registers the "toy" loop
from fault_server import FaultServer, Reply

from promptlab.llm.call.settings import Settings
from promptlab.results.store import Results, load
from promptlab.sweeps.plan import SweepResult
from promptlab.sweeps.run import sweep

SUPPORT = Path(__file__).resolve().parent
"""This folder: a sweep's subprocess imports the toy loop from it."""
ROOT = SUPPORT.parent.parent
"""The repository, on the subprocess's path too (a source tree that was never installed)."""
REPLY = Reply('{"score": 7}')
"""Every role's reply: the writer's text and a judge grade that validates."""
VOLATILE = frozenset({"run_id", "wall_time_s", "finished_at", "cache_hits", "spent_tokens", "spent_cost_usd"})
"""Columns that differ between an uninterrupted sweep and a resumed one by design: each run's own id,
wall-clock time, and what the replay from the cache saved (the recorded tokens and cost of each call stay
equal)."""
KEY = "sk-test-not-a-secret"
"""The api key the scenarios send by default (the fault server accepts any)."""
FAST = Settings(retries=2, backoff_s=0.01, backoff_max_s=0.05, timeout_s=1.0, deadline_s=20.0)
"""Call settings of the fault scenarios: quick retries, a 1 s request timeout (a hung request fails fast)."""


@dataclass
class Measured:
    """What one scenario measured."""

    name: str
    faults_injected: int = 0
    faults_survived: int = 0
    cells: int = 0
    cells_lost: int = 0
    paid_repeated: int = 0
    sweeps: int = 0
    frames_equal: bool | None = None
    finished_before_kill: int | None = None
    in_flight_at_kill: int = 0
    """Requests received and not yet answered by the server when the sweep was killed."""
    sent_again: int = 0
    """Requests of the resumed sweep whose body had been received before the kill (no reply was stored)."""
    calls_at_once: int = 0
    """The most calls the killed sweep could have had in flight (workers x cell concurrency; a toy run makes
    one call at a time)."""
    keys: set[str] = field(default_factory=set)
    """The api keys the fault server received."""
    notes: list[str] = field(default_factory=list)


def write_experiment(
    d: Path, *, styles: tuple[str, ...] = ("a", "b", "c"), tasks: int = 4, max_iterations: int = 2, **config: Any
) -> Path:
    """A toy experiment on the fault server's model: one cell per writer style."""
    data = {
        "name": "reliability",
        "loops": ["toy"],
        "config": {"model": "openai/test-model", "max_iterations": max_iterations, **config},
        "grid": {"style": list(styles)},
        "replicates": 1,
    }
    return experiment_files.write_experiment(d, data, experiment_files.topics(tasks))


@contextlib.contextmanager
def routed(server: FaultServer, key: str = KEY) -> Iterator[dict[str, str]]:
    """Point `openai/` models at the server (with api key `key`) for this process; yields the variables."""
    env = {"OPENAI_API_BASE": server.url, "OPENAI_API_KEY": key}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def paid_repeated(server: FaultServer) -> int:
    """Request bodies answered with a reply more than once."""
    answered = Counter(
        json.dumps(b, sort_keys=True) for b, s in zip(server.bodies, server.served, strict=True) if s == "ok"
    )
    return sum(n - 1 for n in answered.values())


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame without the volatile columns, in a stable row order."""
    keep = [c for c in frame.columns if c not in VOLATILE]
    keys = [c for c in ("cell_id", "task_id", "sample", "iteration", "criterion", "judge") if c in keep]
    return frame[keep].sort_values(keys).reset_index(drop=True)


def frames_equal(a: Results, b: Results) -> bool:
    """Runs and trajectories equal, volatile columns aside."""
    try:
        pd.testing.assert_frame_equal(comparable(a.runs), comparable(b.runs))
        pd.testing.assert_frame_equal(comparable(a.trajectories), comparable(b.trajectories))
    except AssertionError:
        return False
    return True


def reference(path: Path, d: Path, key: str = KEY) -> Results:
    """The frames of an uninterrupted sweep of the same experiment on a healthy server (its own cache)."""
    with FaultServer(default=REPLY) as server, routed(server, key):
        sweep(path, d / "out", progress=False, cache=d / "cache", settings=FAST)
    return load(d / "out")


def sweep_until_complete(path: Path, out: Path, cache: Path, *, limit: int = 6) -> list[SweepResult]:
    """Sweep again while cells fail (each pass retries only the failed cells)."""
    passes: list[SweepResult] = []
    while len(passes) < limit:
        passes.append(sweep(path, out, progress=False, cache=cache, settings=FAST))
        if passes[-1].failed == 0:
            break
    return passes


def outage(d: Path, *, key: str = KEY) -> Measured:
    """The provider answers a few calls, then fails every request: cells end failed ("infrastructure"),
    nothing is reported; the provider comes back and one more sweep completes them."""
    m = Measured("outage, then recovery")
    d.mkdir(parents=True, exist_ok=True)
    path = write_experiment(d)
    with FaultServer([REPLY] * 3, default="503") as server, routed(server, key):
        first = sweep(path, d / "out", progress=False, cache=d / "cache", settings=FAST)
        statuses = [json.loads((d / "out" / "cells" / c.cell_id / "status.json").read_text()) for c in first.cells]
        m.notes.append(
            f"first pass: {first.failed} of {len(first.cells)} cells failed "
            f"({sorted({s['error']['kind'] for s in statuses if s['error']})}), "
            f"{len(load(d / 'out').runs)} runs reported"
        )
        server.default = REPLY
        passes = [first, *sweep_until_complete(path, d / "out", d / "cache")]
        m.faults_injected = sum(s != "ok" for s in server.served)
        m.paid_repeated, m.keys = paid_repeated(server), server.keys
    m.sweeps, m.cells = len(passes), len(first.cells)
    final = load(d / "out")
    m.cells_lost = int((final.cells["status"] != "ok").sum())
    m.faults_survived = m.faults_injected if m.cells_lost == 0 else 0
    m.frames_equal = frames_equal(final, reference(path, d / "ref", key))
    return m


SCHEDULE = ("429", "500", "503", "hang", "drop")
"""The fault kinds, injected in turn between replies."""


def fault_schedule(d: Path, *, rounds: int = 3, key: str = KEY) -> Measured:
    """429/500/503/hang/dropped connection on a schedule, some back to back (more than the retries):
    the sweep is re-run until complete; no cell may be lost, no answered call repeated."""
    m = Measured("429/500/503/hang/drop schedule")
    d.mkdir(parents=True, exist_ok=True)
    path = write_experiment(d)
    schedule: list[Any] = []
    for r in range(rounds):
        for i, fault in enumerate(SCHEDULE):
            schedule += [REPLY, fault]
            if (r + i) % 2 == 0:  # every other fault comes three times in a row: the call fails for good
                schedule += [fault, fault]
    with FaultServer(schedule, default=REPLY) as server, routed(server, key):
        passes = sweep_until_complete(path, d / "out", d / "cache")
        m.faults_injected = sum(s != "ok" for s in server.served)
        m.paid_repeated, m.keys = paid_repeated(server), server.keys
    m.sweeps, m.cells = len(passes), len(passes[0].cells)
    final = load(d / "out")
    m.cells_lost = int((final.cells["status"] != "ok").sum())
    m.faults_survived = m.faults_injected if m.cells_lost == 0 else 0
    m.frames_equal = frames_equal(final, reference(path, d / "ref", key))
    m.notes.append(f"cells failed per pass: {[p.failed for p in passes]}")
    return m


def sweep_process(
    path: Path, out: Path, cache: Path, env: dict[str, str], *, workers: int = 1, cell_concurrency: int = 1
) -> subprocess.Popen[bytes]:
    """`promptlab sweep` of `path` in a subprocess (one cell at a time by default), with `env` added to its
    environment."""
    code = "import sys, toyloop; from promptlab.cli import main; sys.exit(main(sys.argv[1:]))"
    args = [
        "sweep",
        str(path),
        "--out",
        str(out),
        "--cache",
        str(cache),
        "--workers",
        str(workers),
        "--cell-concurrency",
        str(cell_concurrency),
        "--no-progress",
    ]
    child_env = {
        **os.environ,
        **env,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=child_env,
        cwd=str(path.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def kill_and_resume(d: Path, *, after_marks: int = 11, key: str = KEY) -> Measured:
    """`promptlab sweep` in a subprocess, killed with SIGKILL mid-sweep (after `after_marks` iterations),
    then the same sweep again: frames equal to an uninterrupted sweep, no answered call repeated."""
    m = Measured("kill -9 mid-sweep, resume")
    d.mkdir(parents=True, exist_ok=True)
    marks = d / "marks.txt"
    path = write_experiment(d, delay_s=0.3, marks=str(marks))
    out, cache = d / "out", d / "cache"
    with FaultServer(default=REPLY) as server, routed(server, key) as env:
        proc = sweep_process(path, out, cache, env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if marks.exists() and len(marks.read_text().splitlines()) >= after_marks:
                break
            time.sleep(0.01)
        killed = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        before, m.calls_at_once = server.requests, 1  # one cell at a time, its runs' calls one after another
        done_before = m.finished_before_kill = len(list((out / "cells").glob("*/status.json")))
        m.notes.append(
            f"killed: {killed} after {len(marks.read_text().splitlines()) if marks.exists() else 0} "
            f"iterations, {done_before} cells finished, {server.requests} requests made"
            + ("" if killed else f"; the sweep had ended: {err.decode()[-300:]}")
        )
        passes = sweep_until_complete(path, out, cache)
        m.sent_again, m.paid_repeated = split_repeats(server, before)
        m.keys = server.keys
    m.sweeps, m.cells = 1 + len(passes), len(passes[0].cells)
    final = load(out)
    m.cells_lost = int((final.cells["status"] != "ok").sum())
    m.faults_injected = m.faults_survived = 1 if killed and m.cells_lost == 0 else 0
    m.frames_equal = frames_equal(final, reference(path, d / "ref", key))
    m.notes.append(f"sent again after the kill: {m.sent_again} (at most the {m.calls_at_once} call(s) in flight)")
    return m


def split_repeats(server: FaultServer, before: int) -> tuple[int, int]:
    """(requests after index `before` whose body came before it: sent again after the kill; bodies answered
    more than once apart from those)."""
    early = Counter(json.dumps(b, sort_keys=True) for b in server.bodies[:before])
    late = [json.dumps(b, sort_keys=True) for b in server.bodies[before:]]
    again = sum(1 for b in late if b in early)
    answered = Counter(
        json.dumps(b, sort_keys=True) for b, s in zip(server.bodies, server.served, strict=True) if s == "ok"
    )
    resent = Counter(b for b in late if b in early)
    return again, sum(max(n - 1 - resent.get(b, 0), 0) for b, n in answered.items())


def kill_mid_call(d: Path, *, after_requests: int = 9, key: str = KEY) -> Measured:
    """`promptlab sweep` (2 cells at once, 2 runs per cell) killed with SIGKILL while replies are on their way
    (each takes 0.4 s), then resumed: the calls in flight at the kill (sent, their reply not stored yet) are
    sent again; nothing else is."""
    m = Measured("kill -9 mid-call, resume")
    d.mkdir(parents=True, exist_ok=True)
    path = write_experiment(d)
    out, cache = d / "out", d / "cache"
    with FaultServer(default=Reply(REPLY.text, delay_s=0.4)) as server, routed(server, key) as env:
        proc = sweep_process(path, out, cache, env, workers=2, cell_concurrency=2)
        m.calls_at_once = 2 * 2
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if server.requests >= after_requests and sum(server.in_flight.values()) > 0:
                break
            time.sleep(0.005)
        killed = proc.poll() is None
        m.in_flight_at_kill = sum(server.in_flight.values())  # replies not yet sent, read as the kill is sent
        proc.send_signal(signal.SIGKILL)  # (read after the kill, a busy machine had answered them into a dead socket)
        proc.communicate()
        before = server.requests
        server.default = REPLY
        passes = sweep_until_complete(path, out, cache)
        m.sent_again, m.paid_repeated = split_repeats(server, before)
        m.keys = server.keys
    m.sweeps, m.cells = 1 + len(passes), len(passes[0].cells)
    final = load(out)
    m.cells_lost = int((final.cells["status"] != "ok").sum())
    m.faults_injected = m.faults_survived = 1 if killed and m.cells_lost == 0 else 0
    m.frames_equal = frames_equal(final, reference(path, d / "ref", key))
    m.notes.append(
        f"killed: {killed} after {before} requests, {m.in_flight_at_kill} unanswered; sent again after "
        f"the kill: {m.sent_again} (calls whose reply was not stored yet; at most {m.calls_at_once})"
    )
    return m


def two_processes(d: Path, *, key: str = KEY) -> Measured:
    """Two `promptlab sweep` processes on one cache at the same time (each its own results folder), then a
    third sweep on that cache: all three give the frames of an uninterrupted sweep, the third sends no
    request ("paid repeated" counts its requests), and together they were billed exactly what the server
    sent (a request both processes raced to send is billed to each, once)."""
    m = Measured("two processes on one cache")
    d.mkdir(parents=True, exist_ok=True)
    path = write_experiment(d)
    cache, outs = d / "cache", [d / "out1", d / "out2", d / "out3"]
    with FaultServer(default=Reply(REPLY.text, delay_s=0.05)) as server, routed(server, key) as env:
        procs = [sweep_process(path, out, cache, env) for out in outs[:2]]
        errors = [err.decode()[-300:] for p in procs for _, err in [p.communicate(timeout=600)] if p.returncode]
        raced, before = paid_repeated(server), server.requests
        sweep(path, outs[2], progress=False, cache=cache, settings=FAST)
        m.paid_repeated = server.requests - before
        served, m.keys = sum(server.tokens_served), server.keys
    results = [load(out) for out in outs]
    m.sweeps, m.cells = 3, sum(len(r.cells) for r in results)
    m.cells_lost = sum(int((r.cells["status"] != "ok").sum()) for r in results) + len(errors)
    ref = reference(path, d / "ref", key)
    m.frames_equal = all(frames_equal(r, ref) for r in results)
    billed = sum(int(r.runs["spent_tokens"].sum()) for r in results)
    m.faults_injected = 1  # the second writer
    m.faults_survived = int(m.cells_lost == 0 and billed == served)
    m.notes.append(
        f"{raced} requests sent by both processes (a race); billed {billed} tokens in all, server sent "
        f"{served}" + (f"; a sweep process failed: {errors}" if errors else "")
    )
    return m


SCENARIOS = {
    "outage": outage,
    "faults": fault_schedule,
    "kill": kill_and_resume,
    "kill mid-call": kill_mid_call,
    "two": two_processes,
}
"""The scenarios by name."""
