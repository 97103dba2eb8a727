"""The peers' side of bench_concurrency.py: DSPy and Inspect AI, each through its own async call path.

Run by bench_concurrency.py with the python of benchmarks/.peers-venv (never imports promptlab), with one
JSON argument: {base, slow, fast, key, points: [[calls, in_flight], ...], rounds, calls, stats}. Prints one
JSON line: {"versions", "throughput": {C: {tool: {wall, n, peak} | {error}}}, "miss": {...}, "hit": {...}}.
A peer that fails gets an "error" (or a string figure) instead of numbers; the script never fails for it.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

Call = Callable[[str], Awaitable[Any]]


def _prompt(tag: str, i: int) -> str:
    return f"[{tag} #{i}] Rewrite this prompt to be clearer: summarise the quarterly report for the board."


def _stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def makers(a: dict[str, Any]) -> dict[str, Callable[[str, int], Call]]:
    """Per tool: (model name, in flight) -> an async call of one prompt (cache off)."""

    def dspy_call(model: str, c: int) -> Call:
        import dspy

        lm = dspy.LM(
            f"openai/{model}",
            api_base=a["base"],
            api_key=a["key"],
            cache=False,
            max_tokens=16,
            temperature=0.0,
            num_retries=0,
        )

        async def call(p: str) -> Any:
            return await lm.acall(messages=[{"role": "user", "content": p}])

        return call

    def inspect_call(model: str, c: int) -> Call:
        from inspect_ai.model import GenerateConfig, get_model

        m = get_model(
            f"openai/{model}",
            base_url=a["base"],
            api_key=a["key"],
            memoize=False,
            responses_api=False,
            config=GenerateConfig(max_connections=c, max_tokens=16, temperature=0.0, max_retries=0),
        )

        async def call(p: str) -> Any:
            return await m.generate(p)

        return call

    def openai_call(model: str, c: int) -> Call:
        from openai import AsyncOpenAI

        sdk = AsyncOpenAI(base_url=a["base"], api_key=a["key"], max_retries=0)

        async def call(p: str) -> Any:
            return await sdk.chat.completions.create(
                model=model, max_tokens=16, temperature=0.0, messages=[{"role": "user", "content": p}]
            )

        return call

    every = {
        "DSPy acall": dspy_call,
        "Inspect AI generate": inspect_call,
        "openai AsyncOpenAI (peers venv)": openai_call,
    }
    return {k: v for k, v in every.items() if k == RAW or k.startswith(TOOLS[a["tool"]])}


TOOLS = {"dspy": "DSPy", "inspect": "Inspect", "openai": "openai"}
"""Each run measures one tool (in its own process, so one peer's hang or leftovers never touch another)."""
RAW = "openai AsyncOpenAI (peers venv)"


LIMIT_S = 60.0
"""A burst that takes longer than this fails its peer's row (a hang never stalls the benchmark)."""


async def _burst(call: Call, n: int, c: int, tag: str) -> None:
    gate = asyncio.Semaphore(c)

    async def one(i: int) -> None:
        async with gate:
            await call(_prompt(tag, i))

    print(f"peers: {tag}", file=sys.stderr, flush=True)
    await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), LIMIT_S)


async def throughput(a: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    tools = {k: v for k, v in makers(a).items() if k.startswith(TOOLS[a["tool"]])}
    for n, c in a["points"]:
        calls: dict[str, Call] = {}
        for name, make in tools.items():
            try:
                calls[name] = make(a["slow"], c)
                await _burst(calls[name], c, c, f"warm {name} {c}")
            except Exception as e:
                out.setdefault(str(c), {})[name] = {"error": f"{type(e).__name__}: {e}"}
                calls.pop(name, None)
        walls: dict[str, list[float]] = {k: [] for k in calls}
        peaks: dict[str, int] = {k: 0 for k in calls}
        names = list(calls)
        for r in range(a["rounds"]):
            for name in names[r % len(names) :] + names[: r % len(names)] if names else []:
                if name not in calls:
                    continue
                _stats(a["stats"])
                t0 = time.perf_counter()
                try:
                    await _burst(calls[name], n, c, f"{name} {c} {r}")
                except Exception as e:
                    out.setdefault(str(c), {})[name] = {"error": f"{type(e).__name__}: {e}"}
                    del calls[name]
                    continue
                walls[name].append(time.perf_counter() - t0)
                peaks[name] = max(peaks[name], _stats(a["stats"])["peak_in_flight"])
        for name in calls:
            out.setdefault(str(c), {})[name] = {"wall": statistics.median(walls[name]), "n": n, "peak": peaks[name]}
    return out


async def misses(a: dict[str, Any]) -> dict[str, Any]:
    """ms each tool adds per sequential call over the raw AsyncOpenAI client (0 ms model), and DSPy's sync."""
    tools = makers(a)
    calls = {name: make(a["fast"], 1) for name, make in tools.items()}
    per: dict[str, list[float]] = {k: [] for k in calls}
    for name, call in calls.items():
        for i in range(10):
            await asyncio.wait_for(call(_prompt(f"warm {name}", i)), LIMIT_S)
    counter = iter(range(10**9))
    for _ in range(a["rounds"] + 2):
        for name, call in calls.items():
            t0 = time.perf_counter()
            for _ in range(a["calls"]):
                await asyncio.wait_for(call(_prompt("miss", next(counter))), LIMIT_S)
            per[name].append((time.perf_counter() - t0) / a["calls"])
    raw = statistics.median(per[RAW])
    return {f"{k}, async": (statistics.median(v) - raw) * 1000 for k, v in per.items() if not k.startswith("openai")}


def sync_miss_and_hit(a: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    import dspy
    from openai import OpenAI

    sdk = OpenAI(base_url=a["base"], api_key=a["key"], max_retries=0)
    cold = dspy.LM(
        f"openai/{a['fast']}",
        api_base=a["base"],
        api_key=a["key"],
        cache=False,
        max_tokens=16,
        temperature=0.0,
        num_retries=0,
    )
    fns: dict[str, Callable[[str], Any]] = {
        "raw": lambda p: sdk.chat.completions.create(
            model=a["fast"], max_tokens=16, temperature=0.0, messages=[{"role": "user", "content": p}]
        ),
        "dspy": lambda p: cold(messages=[{"role": "user", "content": p}]),
    }
    per: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        for i in range(10):
            fn(_prompt("warm sync", i))
    counter = iter(range(10**9))
    for _ in range(a["rounds"] + 2):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(a["calls"]):
                fn(_prompt("smiss", next(counter)))
            per[name].append((time.perf_counter() - t0) / a["calls"])
    miss = {"DSPy acall, sync (LM.__call__)": (statistics.median(per["dspy"]) - statistics.median(per["raw"])) * 1000}
    warm = dspy.LM(
        f"openai/{a['fast']}",
        api_base=a["base"],
        api_key=a["key"],
        cache=True,
        max_tokens=16,
        temperature=0.0,
        num_retries=0,
    )
    msg = [{"role": "user", "content": "hit me"}]
    warm(messages=msg)
    hits = []
    for _ in range(a["rounds"] + 2):
        t0 = time.perf_counter()
        for _ in range(a["calls"] * 10):
            warm(messages=msg)
        hits.append((time.perf_counter() - t0) / (a["calls"] * 10))
    return miss, {"DSPy LM (sync, its memory+disk cache)": statistics.median(hits) * 1000}


def main() -> None:
    a = json.loads(sys.argv[1])
    out: dict[str, Any] = {"versions": {p: version(p) for p in ("dspy", "inspect_ai", "openai")}}
    out["throughput"] = asyncio.run(throughput(a))
    print(json.dumps(out), flush=True)  # what was measured so far, should a later part hang
    if a["tool"] == "openai":
        return
    try:
        out["miss"] = asyncio.run(misses(a))
    except Exception as e:
        out["miss"] = {a["tool"]: f"skipped: {type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)
    if a["tool"] != "dspy":
        return
    try:
        sync_miss, hit = sync_miss_and_hit(a)
        out["miss"].update(sync_miss)
        out["hit"] = hit
    except Exception as e:
        out["hit"] = {"DSPy": f"skipped: {type(e).__name__}: {e}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
