"""Concurrency benchmark of promptlab's async call path, with its baselines and peers measured in ONE run.

A loopback OpenAI-compatible server (`benchmarks/loopback.py`, plain asyncio, HTTP/1.1 keep-alive) runs in
its own process, so its CPU is never charged to the client. It answers `openai/bench-lat100` after 100 ms
and `openai/bench-lat0` at once, and reports the peak number of requests in flight it saw.

Measured (medians over rounds that rotate which side goes first):
  throughput  N calls with C in flight (200 calls at 16, 640 at 64): promptlab `acomplete` with
              `Settings(max_concurrency=C)` (all N started at once: the limit is promptlab's own), litellm
              `acompletion` called directly and the raw openai SDK (`AsyncOpenAI`), both under a semaphore of C;
              efficiency = ideal / wall time, ideal = N / C x 0.1 s. Every promptlab call is a cache miss that
              is written to a fresh cache (as in real use).
  miss        ms promptlab adds per call over the raw openai SDK (sync `OpenAI`, async `AsyncOpenAI`), one call
              after another against the 0 ms model (so server latency jitter does not hide a fraction of a ms);
              median over rounds of the mean per call.
  hit         a cache hit, `complete` and `acomplete` (median over rounds of the mean per call).
  peers       DSPy and Inspect AI in a separate venv (benchmarks/.peers-venv, made with pip when missing), each
              through its own async call path in a subprocess, against the same server: throughput at 16 and 64,
              their miss cost over the raw openai SDK of that venv, and DSPy's cache-hit latency.

Run: .venv/bin/python benchmarks/bench_concurrency.py [--quick] [--rounds 3] [--no-peers]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loopback import LoopbackServer as Server  # noqa: E402 -- benchmarks/ is the script's own directory

import promptlab as pl  # noqa: E402
from promptlab.llm.providers.litellm_lazy import litellm  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS_VENV = HERE / ".peers-venv"
PEERS_PACKAGES = ["dspy", "inspect-ai", "openai"]
PEERS_OPENAI = "openai>=3.4"
"""Inspect AI needs the openai 3.x client; litellm (which DSPy installs) pins openai < 3, so it is upgraded
after (DSPy's own HTTP client, which it uses for OpenAI-compatible endpoints, does not need litellm)."""
SLOW, FAST = "bench-lat100", "bench-lat0"
LATENCY = 0.1
KEY = "sk-bench"
Row = tuple[str, str, str, str, str]


# throughput ------------------------------------------------------------------------------------------------
Side = Callable[[int, int, str], Awaitable[None]]


def _prompt(tag: str, i: int) -> str:
    return f"[{tag} #{i}] Rewrite this prompt to be clearer: summarise the quarterly report for the board."


def sides(base: str, cache_root: str) -> dict[str, Side]:
    lm = litellm()
    from openai import AsyncOpenAI

    sdk = AsyncOpenAI(base_url=base, api_key=KEY, max_retries=0)

    async def promptlab_side(n: int, c: int, tag: str) -> None:
        settings = pl.Settings(max_concurrency=c)
        cache = tempfile.mkdtemp(dir=cache_root)
        out = await asyncio.gather(
            *(
                pl.acomplete(
                    f"openai/{SLOW}",
                    _prompt(tag, i),
                    cache=cache,
                    settings=settings,
                    api_base=base,
                    api_key=KEY,
                    max_tokens=16,
                )
                for i in range(n)
            )
        )
        assert all(not r.cache_hit and r.input_tokens == 20 and r.output_tokens == 4 for r in out)

    async def litellm_side(n: int, c: int, tag: str) -> None:
        gate = asyncio.Semaphore(c)

        async def one(i: int) -> None:
            async with gate:
                await lm.acompletion(
                    model=f"openai/{SLOW}",
                    api_base=base,
                    api_key=KEY,
                    max_tokens=16,
                    temperature=0.0,
                    messages=[{"role": "user", "content": _prompt(tag, i)}],
                )

        await asyncio.gather(*(one(i) for i in range(n)))

    async def sdk_side(n: int, c: int, tag: str) -> None:
        gate = asyncio.Semaphore(c)

        async def one(i: int) -> None:
            async with gate:
                await sdk.chat.completions.create(
                    model=SLOW, max_tokens=16, temperature=0.0, messages=[{"role": "user", "content": _prompt(tag, i)}]
                )

        await asyncio.gather(*(one(i) for i in range(n)))

    return {"promptlab acomplete": promptlab_side, "litellm acompletion": litellm_side, "openai AsyncOpenAI": sdk_side}


async def throughput(
    server: Server,
    points: list[tuple[int, int]],
    rounds: int,
    cache_root: str,
) -> dict[tuple[str, int], dict[str, float]]:
    """Wall seconds (median), client CPU ms per call and the server's peak in flight, by (side, C)."""
    fns = sides(server.base, cache_root)
    names = list(fns)
    for name in names:  # warm-up: imports, connections, litellm's client cache
        await fns[name](max(c for _, c in points), max(c for _, c in points), f"warm {name}")
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for n, c in points:
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                server.stats()
                t0, cpu0 = time.perf_counter(), time.process_time()
                await fns[name](n, c, f"{name} {c} {r}")
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
                seen = server.stats()
                got = out.setdefault((name, c), {"wall": [], "cpu": [], "peak": 0, "n": n})
                got["wall"].append(wall)
                got["cpu"].append(cpu / n * 1000)
                got["peak"] = max(got["peak"], seen["peak_in_flight"])
    return {
        k: {"wall": statistics.median(v["wall"]), "cpu_ms": statistics.median(v["cpu"]), "peak": v["peak"], "n": v["n"]}
        for k, v in out.items()
    }


# miss and hit ----------------------------------------------------------------------------------------------
def _rounds(fns: dict[str, Callable[[int], Any]], calls: int, rounds: int) -> dict[str, float]:
    """Median over rounds of the mean seconds per call, rounds interleaved so noise hits every side alike."""
    per: dict[str, list[float]] = {k: [] for k in fns}
    counter = iter(range(10**9))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(next(counter))
            per[name].append((time.perf_counter() - t0) / calls)
    return {k: statistics.median(v) for k, v in per.items()}


def miss_and_hit(base: str, calls: int, rounds: int, cache_root: str) -> dict[str, float]:
    from openai import AsyncOpenAI, OpenAI

    lm = litellm()
    cache = tempfile.mkdtemp(dir=cache_root)
    sdk, asdk = (
        OpenAI(base_url=base, api_key=KEY, max_retries=0),
        AsyncOpenAI(base_url=base, api_key=KEY, max_retries=0),
    )
    msg = lambda i: [{"role": "user", "content": _prompt("miss", i)}]  # noqa: E731
    sync = {
        "openai sync": lambda i: sdk.chat.completions.create(
            model=FAST, messages=msg(i), max_tokens=16, temperature=0.0
        ),
        "promptlab complete": lambda i: pl.complete(
            f"openai/{FAST}", _prompt("miss", i), cache=cache, api_base=base, api_key=KEY, max_tokens=16
        ),
        "litellm completion": lambda i: lm.completion(
            model=f"openai/{FAST}", messages=msg(i), api_base=base, api_key=KEY, max_tokens=16, temperature=0.0
        ),
    }
    for fn in sync.values():
        for i in range(10):
            fn(10**8 + i)
    out = {f"miss {k}": v for k, v in _rounds(sync, calls, rounds).items()}

    pl.complete(f"openai/{FAST}", "hit me", cache=cache, api_base=base, api_key=KEY, max_tokens=16)
    out["hit complete"] = _rounds(
        {
            "hit": lambda i: pl.complete(
                f"openai/{FAST}", "hit me", cache=cache, api_base=base, api_key=KEY, max_tokens=16
            )
        },
        calls * 10,
        rounds,
    )["hit"]

    async def amain() -> dict[str, float]:
        afns: dict[str, Callable[[int], Awaitable[Any]]] = {
            "openai async": lambda i: asdk.chat.completions.create(
                model=FAST, messages=msg(i), max_tokens=16, temperature=0.0
            ),
            "promptlab acomplete": lambda i: pl.acomplete(
                f"openai/{FAST}", _prompt("amiss", i), cache=cache, api_base=base, api_key=KEY, max_tokens=16
            ),
            "litellm acompletion": lambda i: lm.acompletion(
                model=f"openai/{FAST}", messages=msg(i), api_base=base, api_key=KEY, max_tokens=16, temperature=0.0
            ),
            "hit acomplete": lambda i: pl.acomplete(
                f"openai/{FAST}", "hit me", cache=cache, api_base=base, api_key=KEY, max_tokens=16
            ),
        }
        for fn in afns.values():
            for i in range(10):
                await fn(2 * 10**8 + i)
        per: dict[str, list[float]] = {k: [] for k in afns}
        counter = iter(range(10**9))
        for _ in range(rounds):
            for name, fn in afns.items():
                n = calls * 10 if name.startswith("hit") else calls
                t0 = time.perf_counter()
                for _ in range(n):
                    await fn(next(counter))
                per[name].append((time.perf_counter() - t0) / n)
        return {(k if k.startswith("hit") else f"miss {k}"): statistics.median(v) for k, v in per.items()}

    out.update(asyncio.run(amain()))
    return out


# peers -----------------------------------------------------------------------------------------------------
def peers_python() -> tuple[str | None, str]:
    """The peers venv's python (made with pip when missing), or None and why not."""
    py = PEERS_VENV / "bin" / "python"
    check = [str(py), "-c", "import dspy, inspect_ai, openai"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return str(py), ""
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True, capture_output=True)
        done = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *PEERS_PACKAGES], capture_output=True, text=True, timeout=1800
        )
        if done.returncode != 0:
            return None, f"pip install {' '.join(PEERS_PACKAGES)} failed: {done.stderr.strip().splitlines()[-1:]}"
        subprocess.run([str(py), "-m", "pip", "install", "-q", PEERS_OPENAI], capture_output=True, timeout=600)
        if subprocess.run(check, capture_output=True).returncode != 0:
            return None, "dspy / inspect_ai do not import in the peers venv"
    except Exception as e:  # no venv module, no network, a timeout: the peers rows are skipped
        return None, f"{type(e).__name__}: {e}"
    return str(py), ""


def run_peers(server: Server, points: list[tuple[int, int]], rounds: int, calls: int) -> dict[str, Any]:
    """Each peer in its own subprocess of the peers venv, each with a time limit; rows merged."""
    py, why = peers_python()
    if py is None:
        return {"skipped": why}
    merged: dict[str, Any] = {"throughput": {}, "miss": {}, "hit": {}}
    for tool in ("dspy", "inspect", "openai"):
        args = {
            "base": server.base,
            "slow": SLOW,
            "fast": FAST,
            "key": KEY,
            "points": points,
            "rounds": rounds,
            "calls": calls,
            "stats": f"http://127.0.0.1:{server.port}/stats",
            "tool": tool,
        }
        cmd = [py, "-W", "ignore", str(HERE / "peers_bench.py"), json.dumps(args)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            stdout, problem = done.stdout, (None if done.returncode == 0 else done.stderr.strip().splitlines()[-1:])
        except subprocess.TimeoutExpired as e:
            stdout, problem = (
                (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""),
                "timed out",
            )
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if not lines:
            merged["miss"][tool] = f"skipped: {problem}"
            continue
        got = json.loads(lines[-1])
        merged["versions"] = got["versions"]
        for c, rows in got.get("throughput", {}).items():
            merged["throughput"].setdefault(c, {}).update(rows)
        merged["miss"].update(got.get("miss", {}))
        merged["hit"].update(got.get("hit", {}))
        if problem:
            merged["miss"][f"{tool} (rest)"] = f"skipped: {problem}"
    return merged


# report ----------------------------------------------------------------------------------------------------
def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(
    tp: dict[tuple[str, int], dict[str, float]],
    mh: dict[str, float],
    peers: dict[str, Any],
    points: list[tuple[int, int]],
) -> list[Row]:
    rows: list[Row] = []
    ideal = {c: n / c * LATENCY for n, c in points}
    eff = {k: ideal[k[1]] / v["wall"] for k, v in tp.items()}
    for (name, c), v in tp.items():
        rows.append(
            (
                f"{name}, {c} in flight ({v['n']} calls)",
                f"{v['wall']:.2f} s, eff {eff[(name, c)]:.2f}",
                f"peak {v['peak']}, CPU {v['cpu_ms']:.2f} ms/call",
                "",
                "",
            )
        )
    for c, p in peers.get("throughput", {}).items():
        for name, v in p.items():
            if "error" in v:
                rows.append((f"{name}, {c} in flight", "skipped: " + v["error"][:80], "", "", ""))
                continue
            eff[(name, int(c))] = ideal[int(c)] / v["wall"]
            rows.append(
                (
                    f"{name}, {c} in flight ({v['n']} calls)",
                    f"{v['wall']:.2f} s, eff {eff[(name, int(c))]:.2f}",
                    f"peak {v['peak']}",
                    "",
                    "",
                )
            )
    if "skipped" in peers:
        rows.append(("DSPy / Inspect AI", "skipped: " + peers["skipped"], "", "", ""))
    pl16, pl64 = eff.get(("promptlab acomplete", 16)), eff.get(("promptlab acomplete", 64))
    if pl16 is not None:
        rows.append(
            ("TARGET efficiency at 16 in flight", f"{pl16:.2f}", ">= 0.80", f"{pl16 / 0.8:.2f}x", verdict(pl16 >= 0.8))
        )
    if pl64 is not None:
        r = pl64 / eff[("litellm acompletion", 64)]
        rows.append(
            ("TARGET throughput vs litellm direct, 64", f"{r:.2f}x", ">= 0.90x", f"{r / 0.9:.2f}x", verdict(r >= 0.9))
        )
    for way, base, ours in (
        ("sync", "miss openai sync", "miss promptlab complete"),
        ("async", "miss openai async", "miss promptlab acomplete"),
    ):
        added = (mh[ours] - mh[base]) * 1000
        rows.append(
            (
                f"TARGET promptlab's share of a miss, {way}",
                f"{added:+.3f} ms",
                "< 0.5 ms",
                f"raw {mh[base] * 1000:.2f} ms/call",
                verdict(added < 0.5),
            )
        )
    for way, base, ours in (
        ("sync", "miss openai sync", "miss litellm completion"),
        ("async", "miss openai async", "miss litellm acompletion"),
    ):
        rows.append((f"litellm's share of a miss, {way}", f"{(mh[ours] - mh[base]) * 1000:+.3f} ms", "", "", ""))
    for way in ("complete", "acomplete"):
        h = mh[f"hit {way}"] * 1000
        rows.append((f"TARGET cache hit, {way}", f"{h:.3f} ms", "<= 0.13 ms", f"{h / 0.13:.2f}x", verdict(h <= 0.13)))
    for name, v in peers.get("miss", {}).items():
        rows.append((f"{name} share of a miss", v if isinstance(v, str) else f"{v:+.3f} ms", "", "", ""))
    for name, v in peers.get("hit", {}).items():
        rows.append((f"{name} cache hit", v if isinstance(v, str) else f"{v:.3f} ms", "", "", ""))
    dspy64 = eff.get(("DSPy acall", 64))
    if pl64 is not None and dspy64 is not None:
        r = pl64 / dspy64
        rows.append(("TARGET throughput vs DSPy, 64", f"{r:.2f}x", ">= 1.00x", f"{r:.2f}x", verdict(r >= 1.0)))
    elif pl64 is not None:
        rows.append(("TARGET throughput vs DSPy, 64", "skipped: no DSPy figure", ">= 1.00x", "", ""))
    return rows


def print_table(rows: list[Row]) -> None:
    print("| measure | value | target | ratio / detail | verdict |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one round, fewer sequential calls")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=100, help="sequential calls per round for miss and hit")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    rounds, calls = (1, 40) if args.quick else (args.rounds, args.calls)
    points = [(200, 16), (640, 64)]
    load = os.getloadavg()[0]
    server = Server()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-conc-") as root:
            tp = asyncio.run(throughput(server, points, rounds, root))
            mh = miss_and_hit(server.base, calls, rounds + 2, root)
        peers = {"skipped": "--no-peers"} if args.no_peers else run_peers(server, points, rounds, calls)
    finally:
        server.close()
    print(
        f"loopback server in its own process, {LATENCY * 1000:.0f} ms latency; {rounds} round(s); "
        f"load average at start {load:.2f} on {os.cpu_count()} cores; peers: {peers.get('versions', '-')}"
    )
    print_table(report(tp, mh, peers, points))


if __name__ == "__main__":
    main()
