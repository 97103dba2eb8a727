"""Sweep benchmark (issue 19): what a loop's model call costs in a sweep, against what `acomplete` alone costs.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_sweep.py            # 3 rounds of each case, medians
    PYTHONPATH=. .venv/bin/python benchmarks/bench_sweep.py --quick    # 1 round

Setup: the loopback OpenAI-compatible server (`benchmarks/loopback.py`) in its own process, answering after
100 ms with a JSON critique that names the request's number (the critic parses it, the creator takes it as its
prompt: every reply differs, so no call is a cache hit of another). The experiment: Creator/Critic, 2 iterations,
one cell of `runs` runs (runs/4 tasks with distinct prompts and goals x 4 replicates), so 4 calls per run, half
of them structured (the critic's); every model is the alias `bench` (`openai/bench-lat100` at the server,
`max_concurrency: 64`, `native_schema: true`).

Cases: 256 runs (1,024 calls) and 32 runs (128 calls). Each is run as `promptlab sweep EXP --executor inline`
(a child process, progress bar on, its stderr discarded) WITHOUT `--cell-concurrency`: the runs in flight come
from the alias's limit (64; 32 runs put at most 32 in flight).
- sweep time: the sweep's own wall time as it prints it ("in X s": after the experiment is loaded and checked,
  until the last cell is written), so interpreter start-up and imports are not in it.
- efficiency: ideal / sweep time, ideal = calls x 0.1 s / runs in flight (the server's peak).
- client CPU per call: user + system CPU of the sweep process (`resource.getrusage(RUSAGE_CHILDREN)` around
  it), minus that of the same command run again on the same results dir, where every cell is skipped as finished
  (start-up, imports, loading and checking the experiment, opening the cache and printing the summary table:
  everything but running the cell; the mean of two such runs), divided by the calls. Start-up is ~4 s of CPU
  (litellm's import), known to about +-0.1 s under load: +-0.1 ms per call over 1,024 calls, +-1 ms over 128.
- the server's peak in flight and the requests it served (and how many asked for a stream: none may).
Baseline in the same run: `acomplete` alone in this process, the same number of calls (half plain, half
structured into the loop's `Critique`, as the sweep's), started at once through the same alias (so the same limit
of 64; 32 in flight for the 32-run case), each a cache miss written to a fresh cache; CPU is this process's
`time.process_time()` over the burst.

Targets at 64 in flight: sweep efficiency >= 0.6 and client CPU <= 1.5 ms per call. Prints the load average with
every round (2 shared cores: figures are noisy). Exits 1 if a target is missed.

`--profile [RUNS]` instead runs the sweep of RUNS runs (default 256) once in this process under cProfile, with the
inline executor's event loop in this thread so that the profiler sees it (the cache writes' worker threads it does
not), and prints where the loop thread's time went, by own and cumulative time: waiting on the network is
`select.epoll.poll`, and a wait for the GIL held by a worker thread shows as own time of whatever was running then
(often a socket send or an SQLite read).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml  # noqa: E402
from loopback import LoopbackServer  # noqa: E402 -- benchmarks/ is the script's own directory

LATENCY = 0.1
ALIAS = "bench"
LIMIT = 64
REPLICATES = 4
CRITIQUE = json.dumps(
    {
        "score": 7,
        "strengths": ["clear, reply {n}"],
        "weaknesses": ["vague about the audience"],
        "suggestions": ["name the audience"],
    }
)
"""The server's reply to every request: a valid critique; `{n}` becomes the request's number."""
TARGET_EFFICIENCY = 0.6
TARGET_CPU_MS = 1.5
IDLE_RUNS = 2
"""Resume runs per sweep whose CPU (averaged) is taken off as start-up: ~4 s of CPU, known to about +-0.1 s."""
CASES = (256, 32)
"""Runs per case (4 calls each); the targets apply to the case with 64 in flight."""
WALL = re.compile(r"skipped \(finished before\) in ([0-9.]+) s")


def write_experiment(root: Path, base: str, runs: int) -> Path:
    """The experiment file of a case: one Creator/Critic cell of `runs` runs, every role the `bench` alias."""
    tasks = [
        {"id": f"t{i}", "prompt": f"Summarise report {i} for the board.", "goal": f"Short and exact ({i})."}
        for i in range(runs // REPLICATES)
    ]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    exp = {
        "name": f"bench-sweep-{runs}",
        "loops": ["creator_critic"],
        "tasks": "tasks.jsonl",
        "replicates": REPLICATES,
        "models": {
            ALIAS: {"model": "openai/bench-lat100", "api_base": base, "max_concurrency": LIMIT, "native_schema": True}
        },
        "config": {"model": ALIAS, "max_iterations": 2, "max_tokens": 64},
    }
    path = root / "experiment.yaml"
    path.write_text(yaml.safe_dump(exp), encoding="utf-8")
    return path


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _promptlab() -> list[str]:
    """The `promptlab` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("promptlab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "promptlab.cli"]


def run_sweep(exp: Path, out: Path, cache: Path, flags: list[str]) -> tuple[float, float, str]:
    """`promptlab sweep` as a child process: (CPU seconds, wall seconds, stdout); raises when it fails."""
    cmd = [*_promptlab(), "sweep", str(exp), "--executor", "inline", "--out", str(out), "--cache", str(cache), *flags]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    cpu, wall = _children_cpu() - cpu0, time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}")
    return cpu, wall, done.stdout


def sweep_round(server: LoopbackServer, root: Path, runs: int, flags: list[str]) -> dict[str, Any]:
    """One sweep of a case and its resume (every cell skipped): the figures."""
    work = Path(tempfile.mkdtemp(dir=root))
    exp = write_experiment(work, server.base, runs)
    load = os.getloadavg()[0]
    server.stats()
    cpu, _, text = run_sweep(exp, work / "out", work / "cache", flags)
    seen = server.stats()
    idle = []
    for _ in range(IDLE_RUNS):
        idle_cpu, _, again = run_sweep(exp, work / "out", work / "cache", flags)
        assert "1 skipped" in again and server.stats()["served"] == 0, "the resume run made calls"
        idle.append(idle_cpu)
    idle_cpu = statistics.fmean(idle)
    found = WALL.search(text)
    if found is None:
        raise RuntimeError(f"no sweep time in the sweep's output:\n{text}")
    calls = runs * 4
    if seen["served"] != calls:
        raise RuntimeError(f"the server served {seen['served']} requests, expected {calls}")
    shutil.rmtree(work)
    return {
        "wall": float(found.group(1)),
        "cpu_ms": (cpu - idle_cpu) / calls * 1000,
        "peak": seen["peak_in_flight"],
        "served": seen["served"],
        "streamed": seen["streamed"],
        "load": load,
        "startup": idle_cpu,
    }


def acomplete_round(server: LoopbackServer, root: Path, runs: int, flags: list[str]) -> dict[str, Any]:
    """`acomplete` alone: the case's calls, half structured, started at once through the alias."""
    import promptlab as pl
    from promptlab.loops.creator_critic import Critique

    pl.register_model(
        ALIAS, model="openai/bench-lat100", api_base=server.base, max_concurrency=LIMIT, native_schema=True
    )
    calls, in_flight = runs * 4, min(runs, LIMIT)
    settings = pl.Settings(per_model_concurrency={ALIAS: in_flight})
    cache = tempfile.mkdtemp(dir=root)

    async def burst() -> None:
        out = await asyncio.gather(
            *(
                pl.acomplete(
                    ALIAS,
                    f"[{cache} #{i}] Rewrite this prompt: summarise report {i} for the board.",
                    schema=Critique if i % 2 else None,
                    max_tokens=64,
                    cache=cache,
                    settings=settings,
                )
                for i in range(calls)
            )
        )
        assert all(not c.cache_hit for c in out)

    load = os.getloadavg()[0]
    server.stats()
    t0, cpu0 = time.perf_counter(), time.process_time()
    asyncio.run(burst())
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    seen = server.stats()
    return {
        "wall": wall,
        "cpu_ms": cpu / calls * 1000,
        "peak": seen["peak_in_flight"],
        "served": seen["served"],
        "streamed": seen["streamed"],
        "load": load,
    }


def profile_sweep(server: LoopbackServer, root: Path, runs: int, top: int, cell_concurrency: int | None) -> None:
    """The sweep of a case in this process under cProfile: the inline executor's event loop runs in this thread."""
    import cProfile
    import pstats

    import promptlab.sweeps.inline as inline
    from promptlab.llm.providers.aliases import get_alias
    from promptlab.sweeps.run import sweep

    get_alias(ALIAS)  # start-up (the alias registry's first look imports litellm) stays out of the profile
    profiler = cProfile.Profile()

    def in_this_thread(main: Any) -> None:
        profiler.enable()
        try:
            asyncio.run(main())
        finally:
            profiler.disable()

    inline.run_interruptible = in_this_thread
    work = Path(tempfile.mkdtemp(dir=root))
    exp = write_experiment(work, server.base, runs)
    load = os.getloadavg()[0]
    cpu0 = time.process_time()
    given = {"cell_concurrency": cell_concurrency} if cell_concurrency else {}
    result = sweep(exp, work / "out", cache=work / "cache", progress=True, **given)
    cpu = time.process_time() - cpu0
    print(
        f"{result}\nload average at start {load:.2f}; CPU {cpu:.2f} s under the profiler = {cpu / (runs * 4) * 1000:.2f} "
        f"ms per call; server {server.stats()}"
    )
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats("promptlab", top)


def warm_up(server: LoopbackServer, root: Path, flags: list[str]) -> None:
    """Imports, the call path's first connection, and the OS's file cache of the CLI's modules."""
    acomplete_round(server, root, 16, flags)
    sweep_round(server, root, 16, flags)


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wall": statistics.median(r["wall"] for r in rounds),
        "cpu_ms": statistics.median(r["cpu_ms"] for r in rounds),
        "peak": max(r["peak"] for r in rounds),
        "streamed": sum(r["streamed"] for r in rounds),
        "load": [round(r["load"], 2) for r in rounds],
        "startup": statistics.median(r.get("startup", 0.0) for r in rounds),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one round of each case")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--cell-concurrency",
        type=int,
        help="pass --cell-concurrency N to the sweeps (default: none, the runs in flight follow the alias's limit)",
    )
    ap.add_argument(
        "--cases",
        default=",".join(map(str, CASES)),
        help="runs per case, comma-separated (default 256,32; the targets apply to 256)",
    )
    ap.add_argument(
        "--profile",
        nargs="?",
        const=CASES[0],
        type=int,
        metavar="RUNS",
        help="profile the sweep of RUNS runs (default 256) in this process instead",
    )
    ap.add_argument("--top", type=int, default=40, help="--profile: functions listed per ordering")
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    cases = [int(c) for c in args.cases.split(",")]
    flags = ["--cell-concurrency", str(args.cell_concurrency)] if args.cell_concurrency else []
    server = LoopbackServer(CRITIQUE)
    if args.profile:
        try:
            with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
                profile_sweep(server, Path(tmp), args.profile, args.top, args.cell_concurrency)
        finally:
            server.close()
        return 0
    results: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
            root = Path(tmp)
            warm_up(server, root, flags)
            per: dict[tuple[str, int], list[dict[str, Any]]] = {}
            for r in range(rounds):
                for runs in cases:
                    sides = [("sweep", sweep_round), ("acomplete", acomplete_round)]
                    for name, fn in sides if r % 2 == 0 else sides[::-1]:
                        per.setdefault((name, runs), []).append(fn(server, root, runs, flags))
            results = {k: median_of(v) for k, v in per.items()}
    finally:
        server.close()
    print(
        f"loopback server in its own process, {LATENCY * 1000:.0f} ms latency; alias max_concurrency {LIMIT}; "
        f"sweep flags {flags or 'none'}; {rounds} round(s), medians; {os.cpu_count()} cores; load average now "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(
        "| case | side | time | ideal | efficiency | client CPU per call | start-up CPU taken off | server peak in "
        "flight | streamed | load (per round) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    failed = False
    for runs in cases:
        calls = runs * 4
        for side in ("sweep", "acomplete"):
            v = results[(side, runs)]
            ideal = calls * LATENCY / max(1, min(runs, LIMIT))
            v["eff"] = ideal / v["wall"]
            startup = f"{v['startup']:.2f} s" if side == "sweep" else "-"
            print(
                f"| {runs} runs, {calls} calls | {side} | {v['wall']:.2f} s | {ideal:.2f} s | {v['eff']:.2f} | "
                f"{v['cpu_ms']:.2f} ms | {startup} | {v['peak']} | {v['streamed']} | {v['load']} |"
            )
    print()
    print("| measure | value | target | ratio | verdict |")
    print("|---|---|---|---|---|")
    for runs in cases:
        s, a = results[("sweep", runs)], results[("acomplete", runs)]
        flight = min(runs, LIMIT)
        rows: list[tuple[str, str, str, str, bool | None]] = [
            (
                f"sweep CPU / acomplete CPU per call, {flight} in flight",
                f"{s['cpu_ms'] / a['cpu_ms']:.2f}x",
                "",
                "",
                None,
            ),
            (
                f"sweep efficiency / acomplete efficiency, {flight} in flight",
                f"{s['eff'] / a['eff']:.2f}x",
                "",
                "",
                None,
            ),
        ]
        if flight == LIMIT:
            rows += [
                (
                    f"TARGET sweep efficiency, {flight} in flight",
                    f"{s['eff']:.2f}",
                    f">= {TARGET_EFFICIENCY}",
                    f"{s['eff'] / TARGET_EFFICIENCY:.2f}x",
                    s["eff"] >= TARGET_EFFICIENCY,
                ),
                (
                    f"TARGET sweep client CPU per call, {flight} in flight",
                    f"{s['cpu_ms']:.2f} ms",
                    f"<= {TARGET_CPU_MS} ms",
                    f"{s['cpu_ms'] / TARGET_CPU_MS:.2f}x",
                    s["cpu_ms"] <= TARGET_CPU_MS,
                ),
                (
                    f"TARGET server peak in flight, {runs} runs" + ("" if flags else " (no --cell-concurrency)"),
                    f"{s['peak']}",
                    f"= {LIMIT}",
                    "",
                    s["peak"] == LIMIT,
                ),
            ]
        rows.append((f"TARGET streamed sweep requests, {runs} runs", f"{s['streamed']}", "= 0", "", s["streamed"] == 0))
        for name, value, target, ratio, ok in rows:
            verdict = "" if ok is None else "PASS" if ok else "FAIL"
            failed |= ok is False
            print(f"| {name} | {value} | {target} | {ratio} | {verdict} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
