"""Benchmark of the core call path against its baselines, measured in the same run (ratios).

(a) promptlab overhead per call on a cache miss vs litellm called directly with `mock_response`
(b) cache-hit latency vs that same mocked litellm call
(c) local-model tokens/s through promptlab vs llama-cpp-python called directly on the same prompts

Targets: (a) <= 1 ms added per call; (b) a hit >= 10x faster; (c) >= 0.9x the direct tokens/s.
Run: .venv/bin/python benchmarks/bench_call.py [--calls 300] [--local-prompts 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import promptlab as pl  # noqa: E402
from promptlab.llm.local import pool as local  # noqa: E402
from promptlab.llm.providers.litellm_lazy import litellm  # noqa: E402

MOCK_MODEL = "gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "Rewrite this prompt to be clearer: summarise the report."}]


def _per_call(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t0) / n


def bench_overhead(calls: int, rounds: int = 5) -> None:
    lm = litellm()
    cache_dir = tempfile.mkdtemp(prefix="bench-cache-")

    def direct(i):
        return lm.completion(
            model=MOCK_MODEL,
            messages=[{"role": "user", "content": f"q{i} " + MESSAGES[0]["content"]}],  # noqa: E731,E501
            mock_response="A clearer prompt.",
            temperature=0.0,
        )

    counter = iter(range(10**9))

    def miss(i):
        return pl.complete(
            MOCK_MODEL,
            f"q{next(counter)} " + MESSAGES[0]["content"],
            cache=cache_dir,  # noqa: E731
            mock_response="A clearer prompt.",
        )

    for _ in range(20):  # warm-up: imports, first connections, the cache's SQLite file
        direct(0)
        miss(0)
    pl.complete(MOCK_MODEL, "hit me", cache=cache_dir, mock_response="A clearer prompt.")
    hit = lambda i: pl.complete(MOCK_MODEL, "hit me", cache=cache_dir, mock_response="A clearer prompt.")  # noqa: E731
    d, m, h = [], [], []
    for _ in range(rounds):  # interleaved rounds so machine noise hits all three alike
        d.append(_per_call(direct, calls // rounds))
        m.append(_per_call(miss, calls // rounds))
        h.append(_per_call(hit, calls // rounds))
    direct_s, miss_s, hit_s = statistics.median(d), statistics.median(m), statistics.median(h)
    added_ms = (miss_s - direct_s) * 1000
    print(
        f"(a) litellm mock_response direct: {direct_s * 1e3:.3f} ms/call; promptlab miss: {miss_s * 1e3:.3f} ms/call;"
        f" added {added_ms:+.3f} ms/call (target <= 1 ms) -> {'PASS' if added_ms <= 1.0 else 'FAIL'}"
    )
    speedup = direct_s / hit_s
    print(
        f"(b) promptlab cache hit: {hit_s * 1e6:.1f} us/call; {speedup:.1f}x faster than the mocked litellm call"
        f" (target >= 10x) -> {'PASS' if speedup >= 10 else 'FAIL'}"
    )


LOCAL_PROMPTS = [
    "Write a short paragraph about why clear instructions help language models.",
    "List five tips for writing a good product description.",
    "Explain what a refinement loop is in two sentences.",
    "Rewrite this prompt to be more specific: tell me about dogs.",
    "Describe a rainy afternoon in a small town.",
    "Give three questions a critic might ask about a marketing prompt.",
]


def bench_local(n_prompts: int, max_tokens: int, rounds: int = 3) -> None:
    llm, lock = local.load("smollm2")
    prompts = LOCAL_PROMPTS[:n_prompts]

    def direct(p: str) -> int:
        with lock:
            out = llm.create_chat_completion(
                messages=[{"role": "user", "content": p}], temperature=0.0, max_tokens=max_tokens, seed=0
            )
        return int(out["usage"]["completion_tokens"])

    def through(p: str) -> int:
        return pl.complete("local/smollm2", p, max_tokens=max_tokens, cache=False).output_tokens or 0

    pl.complete("local/smollm2", "warm up", max_tokens=4, cache=False)
    totals = {direct: [0, 0.0], through: [0, 0.0]}
    for r in range(rounds):  # paired per prompt, order alternating, so load drift hits both sides alike
        for p in prompts:
            for fn in (direct, through) if r % 2 == 0 else (through, direct):
                t0 = time.perf_counter()
                totals[fn][0] += fn(p)
                totals[fn][1] += time.perf_counter() - t0
    d = totals[direct][0] / totals[direct][1]
    t = totals[through][0] / totals[through][1]
    print(
        f"(c) local smollm2, {len(prompts)} prompts x {rounds} rounds, max_tokens={max_tokens}: direct llama-cpp"
        f" {d:.1f} tok/s; through promptlab {t:.1f} tok/s; ratio {t / d:.3f} (target >= 0.9) ->"
        f" {'PASS' if t / d >= 0.9 else 'FAIL'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--local-prompts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    bench_overhead(args.calls)
    bench_local(args.local_prompts, args.max_tokens)


if __name__ == "__main__":
    main()
