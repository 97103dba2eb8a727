"""Reliability table (issues 8 and 21): faults injected and survived, cells lost, paid calls repeated, what a kill -9
sends again, sandbox escapes, the hardening kinds (tried, held, lost), secrets found on disk, malformed replies
handled. Offline, loopback only, in one run:

(a) sweeps of the toy loop against the loopback fault server (benchmarks/support/reliability_scenarios.py): an outage then
    recovery; a 429/500/503/hang/dropped-connection schedule; kill -9 between calls then resume; kill -9 while
    replies are on their way then resume; two sweep processes on one cache. Frames are compared with an
    uninterrupted sweep's, wall-clock columns aside. "Paid calls repeated" counts replies promptlab received and
    stored that were paid again (target 0). A kill -9 costs the calls in flight at that moment: no reply of
    theirs was stored, so the resumed sweep sends them again and a provider bills them twice; that is counted
    apart ("sent again after the kill", at most the calls the sweep had in flight), not hidden.
(b) the sandbox escape battery (benchmarks/support/escape_battery.py) through the workspace tools as the loops build them,
    issue 21's kinds included (workspace fill, many files, /dev/shm, root-only files, terminal escapes, a secret
    the model writes).
(c) the malformed-output corpus (benchmarks/support/malformed_corpus.py) through the call path, a scripted model sending each
    reply: a valid reply gives its score; any other gives a ParseError carrying the raw reply, never a score.
(d) fake secrets (OPENAI_API_KEY=sk-bench-<random>, ...) set in the environment for (a)-(c), (e) and a one-cell
    papermill sweep; every file the run wrote (results, caches, workspaces, run records, notebooks; all under
    one temporary folder, also the working directory) is scanned for them, plain and base64 (parquet files
    also decoded).
(e) issue 21's other kinds (benchmarks/support/hardening_battery.py): a full cache disk (a 3 MiB tmpfs as root), a cache
    truncated mid-run, `cache verify` on a corrupt database, a record under another key, files that are not
    UTF-8, YAML alias bombs, bad flags, the spend of cut cells, a Redis password and the papermill notebooks:
    tried, held, lost.
(f) issue 28's kinds (benchmarks/support/faults_battery.py): usage that is not usage under a spending cap (none,
    zero, negative, string, fraction; both transports), tampered cache.db rows (pickles, paths out, a link), a
    password in api_base, reply shapes on both transports, a lone surrogate plain and streamed, a gzip bomb, a
    cache.db that cannot be opened, deep, circular and duplicate YAML, two sweeps on one results dir, a full results
    disk (inline, and papermill on a 2 MiB tmpfs as root): tried, held, lost.
(g) hostile inputs (benchmarks/support/hostile_inputs_battery.py): a reply's numbers out of range (10^30 tokens
    with and without a cap, Retry-After inf, log-probabilities over 0 or not numbers), a schema the local engine cannot compile beside 6 calls, a full Redis,
    the cache's read/write race, a slow regex scorer beside a heartbeat, files that are not files (FIFO, sparse
    3 GiB, links to /dev/zero, a cell directory linked outside; the results and cache dirs' own files and the user's
    experiment and task files as a FIFO or a link), a 1,500-deep chain copied back, redirects on both
    transports, a key in an api_base's query string and grid x replicates past the cap: tried, held, lost.
(h) issue 51's kinds (benchmarks/support/trust_battery.py): a damaged 30 MiB line in a cell's runs.jsonl before both
    exports, the report and load; a cost past the per-call bound set by an alias's price; plugins that exit, raise a
    BaseException, hang or shadow a built-in, beside a sweep; replay only without the key; kill -9 during a cell's
    write, then a resume; the first call of a fresh process under a 3 s deadline: tried, held, lost.

Targets: every fault survived, cells lost 0, paid calls repeated 0, sent again after a kill <= the calls in
flight, escapes 0, every hardening kind held with 0 lost, secrets on disk 0, every corpus case handled. Prints
markdown tables; exits 1 on a FAIL. Takes a few minutes. Run: .venv/bin/python benchmarks/reliability.py [--keep DIR]
[--only h] (--only: the sections to run, e.g. "fgh"; the secrets scan (d) covers what they wrote).
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))  # the scenarios, batteries and corpus

import escape_battery  # noqa: E402
import faults_battery  # noqa: E402
import hardening_battery  # noqa: E402
import hostile_inputs_battery  # noqa: E402
import malformed_corpus  # noqa: E402
import reliability_scenarios as rs  # noqa: E402
import trust_battery  # noqa: E402

import promptlab as pl  # noqa: E402
from promptlab.errors import ParseError  # noqa: E402
from promptlab.llm.call.settings import Settings  # noqa: E402
from promptlab.sweeps.experiment import Experiment  # noqa: E402
from promptlab.sweeps.run import sweep  # noqa: E402
from promptlab.tools.sandbox import sandbox_problem  # noqa: E402

ROWS: list[tuple[str, str, str, bool]] = []
"""The summary: (measure, measured, target, passed)."""


def check(measure: str, measured: object, target: str, passed: bool) -> None:
    ROWS.append((measure, str(measured), target, passed))


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def plant_secrets() -> dict[str, str]:
    """Fake secrets, set in this process's environment (children inherit them)."""
    planted = {
        "OPENAI_API_KEY": f"sk-bench-{secrets.token_hex(16)}",
        "ANTHROPIC_API_KEY": f"sk-ant-bench-{secrets.token_hex(16)}",
        "MY_SERVICE_TOKEN": f"tok-bench-{secrets.token_hex(12)}",
        "DB_PASSWORD": f"pw-bench-{secrets.token_hex(8)}",
    }
    os.environ.update(planted)
    return planted


# (a) sweeps -------------------------------------------------------------------------------------------------
def bench_sweeps(root: Path, key: str) -> None:
    runs = [
        ("outage", lambda d: rs.outage(d, key=key)),
        ("faults", lambda d: rs.fault_schedule(d, key=key)),
        ("kill", lambda d: rs.kill_and_resume(d, key=key)),
        ("kill mid-call", lambda d: rs.kill_mid_call(d, key=key)),
        ("two", lambda d: rs.two_processes(d, key=key)),
    ]
    rows, measured = [], []
    for name, scenario in runs:
        t0 = time.perf_counter()
        m = scenario(root / name.replace(" ", "-"))
        measured.append(m)
        rows.append(
            [
                m.name,
                m.faults_injected,
                m.faults_survived,
                m.cells,
                m.cells_lost,
                m.paid_repeated,
                f"{m.sent_again} (in flight: at most {m.calls_at_once})" if m.calls_at_once else "-",
                m.frames_equal,
                m.sweeps,
                f"{time.perf_counter() - t0:.0f}",
                "; ".join(m.notes),
            ]
        )
    print("## (a) Sweeps against the loopback fault server\n")
    print(
        table(
            [
                "scenario",
                "faults injected",
                "survived",
                "cells",
                "cells lost",
                "paid calls repeated",
                "sent again after the kill",
                "frames equal",
                "sweeps",
                "s",
                "notes",
            ],
            rows,
        )
    )
    print()
    injected, survived = sum(m.faults_injected for m in measured), sum(m.faults_survived for m in measured)
    check(
        "faults injected / survived", f"{injected} / {survived}", "all survived", injected > 0 and survived == injected
    )
    check("cells lost", sum(m.cells_lost for m in measured), "0", all(m.cells_lost == 0 for m in measured))
    check(
        "paid calls repeated (replies stored before)",
        sum(m.paid_repeated for m in measured),
        "0",
        all(m.paid_repeated == 0 for m in measured),
    )
    killed = [m for m in measured if m.calls_at_once]
    check(
        "sent again after kill -9 mid-call (no reply stored yet)",
        ", ".join(f"{m.sent_again} of at most {m.calls_at_once} in flight" for m in killed),
        "<= calls in flight",
        all(m.sent_again <= m.calls_at_once for m in killed),
    )
    check(
        "frames equal to an uninterrupted sweep",
        f"{sum(bool(m.frames_equal) for m in measured)} of {len(measured)} scenarios",
        "all",
        all(m.frames_equal for m in measured),
    )
    check(
        "the planted OPENAI_API_KEY was the key sent",
        all(m.keys == {key} for m in measured),
        "True",
        all(m.keys == {key} for m in measured),
    )


# (b) sandbox ------------------------------------------------------------------------------------------------
def bench_sandbox(root: Path, planted: dict[str, str]) -> list[escape_battery.Outcome]:
    problem = sandbox_problem()
    if problem is not None:
        print(f"## (b) Sandbox escape battery: NOT RUN ({problem}; apt-get install bubblewrap)\n")
        check("sandbox escapes", "not run", "0", False)
        return []
    outcomes = escape_battery.run_battery(root / "sandbox", list(planted.values()))
    print("## (b) Sandbox escape battery (workspace tools as the loops build them)\n")
    print(
        table(
            ["kind", "attempt", "escaped", "counted", "what the host saw"],
            [[o.kind, o.attempt, o.escaped, o.counted, o.detail] for o in outcomes],
        )
    )
    for o in outcomes:
        if not o.counted and o.escaped:
            print(f"\nKnown gap, not counted as an escape: {o.attempt} ({o.detail}).")
    print()
    counted = [o for o in outcomes if o.counted]
    escapes = sum(o.escaped for o in counted)
    kinds = {o.kind for o in counted}
    expected = {k for k in escape_battery.KINDS if os.geteuid() == 0 or k != "root-only file"}  # root plants them
    check(
        "sandbox escapes",
        f"{escapes} of {len(counted)} attempts ({len(kinds)} kinds)",
        "0",
        escapes == 0 and kinds == expected,
    )
    new = [o for o in counted if o.kind in escape_battery.NEW_KINDS]
    check(
        "sandbox escapes over issue 21's kinds",
        f"{sum(o.escaped for o in new)} of {len(new)} attempts ({len({o.kind for o in new})} kinds)",
        "0",
        not any(o.escaped for o in new) and bool(new),
    )
    return outcomes


# (e) issue 21's other kinds ----------------------------------------------------------------------------------
def bench_hardening(root: Path) -> None:
    rows = hardening_battery.run_battery(root / "hardening")
    print("## (e) Issue 21: cache, input, budget and notebook kinds\n")
    print(
        table(
            ["kind", "tried", "held", "lost", "what the host saw"],
            [[r.kind, r.tried, r.held, r.lost, r.detail] for r in rows],
        )
    )
    print()
    tried, held, lost = (sum(r.tried for r in rows), sum(r.held for r in rows), sum(r.lost for r in rows))
    check(
        "issue 21 kinds held (cache, input, budget, notebooks)",
        f"{held} of {tried} attempts ({len(rows)} kinds)",
        "all",
        held == tried and all(r.tried > 0 for r in rows),
    )
    check("issue 21 kinds: replies, results or spend lost", lost, "0", lost == 0)


def battery_section(rows: list[Any], heading: str, name: str, lost_what: str) -> None:
    """A battery's table (kind, tried, held, lost, what the host saw) and its two checks: every attempt held,
    nothing lost."""
    print(f"## {heading}\n")
    print(
        table(
            ["kind", "tried", "held", "lost", "what the host saw"],
            [[r.kind, r.tried, r.held, r.lost, r.detail] for r in rows],
        )
    )
    print()
    tried, held, lost = (sum(r.tried for r in rows), sum(r.held for r in rows), sum(r.lost for r in rows))
    check(f"{name} kinds held", f"{held} of {tried} attempts ({len(rows)} kinds)", "all", held == tried)
    check(f"{name} kinds: {lost_what}", lost, "0", lost == 0)


def bench_fault_kinds(root: Path) -> None:
    rows = faults_battery.run_battery(root / "fault_kinds")
    heading = "(f) Issue 28: spending cap, cache rows, URLs, reply shapes, input, results dir"
    battery_section(rows, heading, "issue 28", "money past the cap, files touched, secrets shown")


def bench_hostile_inputs(root: Path) -> None:
    rows = hostile_inputs_battery.run_battery(root / "hostile_inputs")
    heading = "(g) Issue 41: a reply's numbers, unservable requests, a full cache, the event loop, files, redirects"
    battery_section(rows, heading, "issue 41", "cells, cache entries or requests lost")


def bench_trust(root: Path) -> None:
    rows = trust_battery.run_battery(root / "trust")
    heading = (
        "(h) Issue 51: damaged records, figures at their source, untrusted plugins, replay, killed writes, first call"
    )
    battery_section(rows, heading, "issue 51", "runs, cells or bounded calls lost")


# (c) malformed replies --------------------------------------------------------------------------------------
def bench_corpus() -> None:
    rows, handled = [], 0
    for i, (kind, text, expected) in enumerate(malformed_corpus.CORPUS):
        model = pl.scripted(f"bench-corpus-{i}", respond=lambda m, text=text: text)
        try:
            c = pl.complete(
                model.name,
                "Rate this.",
                schema=malformed_corpus.Verdict,
                cache=False,
                settings=Settings(parse_attempts=2),
            )
            got, ok = c.parsed.score, type(c.parsed.score) is int and c.parsed.score == expected
        except ParseError as e:
            got = "ParseError"
            ok = expected is None and len(e.attempts) == 2 and all(a["raw"] == text and a["error"] for a in e.attempts)
        handled += ok
        rows.append([kind, expected if expected is not None else "refused", got, "yes" if ok else "NO"])
    print("## (c) Malformed-output corpus through the call path\n")
    print(table(["kind", "expected", "got", "handled"], rows))
    print()
    n = len(malformed_corpus.CORPUS)
    check("malformed replies handled (kinds)", f"{handled} of {n}", "all, >= 20 kinds", handled == n and n >= 20)


# (d) secrets on disk ----------------------------------------------------------------------------------------
def notebook_sweep(root: Path) -> None:
    """A one-cell sweep through papermill (a kernel that inherits the planted secrets), so notebooks are on disk."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tasks.jsonl").write_text('{"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}\n')
    exp = Experiment.from_dict(
        {
            "name": "nb",
            "loops": ["p3ro"],
            "tasks": "tasks.jsonl",
            "config": {"model": "fake/auto", "max_tokens": 64, "max_iterations": 1},
        },
        root,
    )
    result = sweep(exp, root / "out", executor="papermill", workers=1, progress=False, cache=root / "cache")
    check(
        "papermill sweep (for the scan)",
        f"{result.done} of {len(result.cells)} cells",
        "all",
        result.done == len(result.cells),
    )


def _text_of(path: Path) -> bytes:
    """A file's bytes, and for a parquet file (compressed columns) its rows as CSV too."""
    data = path.read_bytes()
    if path.suffix == ".parquet":
        data += pd.read_parquet(path).to_csv().encode()
    return data


def scan(root: Path, planted: dict[str, str]) -> None:
    needles = {name: [v.encode(), base64.b64encode(v.encode())] for name, v in planted.items()}
    files, size, hits, kinds = 0, 0, [], Counter[str]()
    for dirpath, _, names in os.walk(root, followlinks=False):
        for fname in names:
            path = Path(dirpath, fname)
            if path.is_symlink() or not path.is_file():
                continue
            data = _text_of(path)
            files, size = files + 1, size + path.stat().st_size
            kinds[path.suffix or "(none)"] += 1
            hits += [f"{path.relative_to(root)}: {name}" for name, ns in needles.items() if any(n in data for n in ns)]
    print(
        f"## (d) Secrets on disk\n\n{len(planted)} planted ({', '.join(planted)}); {files} files, "
        f"{size / 1e6:.1f} MB scanned under the run's folder ({', '.join(f'{n} {k}' for k, n in kinds.most_common())})"
        + (":\n- " + "\n- ".join(hits) if hits else "")
        + "\n"
    )
    check("secrets found on disk", len(hits), "0", not hits and files > 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", type=Path, help="run in this (new) folder and keep it, instead of a temporary one")
    ap.add_argument("--only", help="the sections to run, as their letters (e.g. 'gh'); default: all")
    args = ap.parse_args()
    root = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="bench-reliability-"))
    root.mkdir(parents=True, exist_ok=True)
    planted = plant_secrets()
    os.environ["PROMPTLAB_CACHE_DIR"] = str(root / "default-cache")  # a call without cache= writes here
    here = Path.cwd()
    os.chdir(root)  # relative defaults (.promptlab/workspaces) land in the scanned folder too
    t0 = time.perf_counter()
    sections = {
        "a": lambda: bench_sweeps(root / "sweeps", planted["OPENAI_API_KEY"]),
        "b": lambda: bench_sandbox(root, planted),
        "c": bench_corpus,
        "e": lambda: bench_hardening(root),
        "f": lambda: bench_fault_kinds(root),
        "g": lambda: bench_hostile_inputs(root),
        "h": lambda: bench_trust(root),
    }
    try:
        for letter, section in sections.items():
            if args.only is None or letter in args.only:
                section()
        if args.only is None:
            notebook_sweep(root / "notebook")
        scan(root, planted)
    finally:
        os.chdir(here)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"## Summary ({time.perf_counter() - t0:.0f} s)\n")
    print(
        table(
            ["measure", "measured", "target", "result"], [[m, v, t, "PASS" if ok else "FAIL"] for m, v, t, ok in ROWS]
        )
    )
    sys.exit(0 if all(ok for *_, ok in ROWS) else 1)


if __name__ == "__main__":
    main()
