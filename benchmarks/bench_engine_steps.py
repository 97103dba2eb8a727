"""What one decode step of the exact engine costs, and what makes it cost more: a minimal reproduction on the
engine's own context (`promptlab.llm.local.engine_model.Model`: 16 slots, a KV stream each, flash attention off).

    .venv/bin/python benchmarks/bench_engine_steps.py [--threads 2] [--steps 40]

Each case reads its sequences' prompts (each alone, in chunks of 512, as the engine does), then times `--steps`
decode steps, one token of every sequence per `llama_decode`, and prints the CPU-milliseconds (user + system of
this process, every llama.cpp thread included) per step and per token, with wall time beside. The cases:

- **consecutive**: 8 sequences of 200 tokens in slots 0-7, the baseline;
- **spread**: the same 8 in slots 0, 2, ..., 14. llama.cpp splits a batch of a non-unified cache into ubatches
  of consecutive sequence ids only, so this step is 8 passes over the weights (why the engine keeps its live
  sequences in the lowest slots: `Worker._compact`);
- **one long**: slots 0-7, one of them 1,500 tokens long: attention's KV length in a ubatch is the longest
  stream's (padded to 256), so the seven short sequences pay for the long one's cells;
- **one long, grouped**: the same step in the `llama_decode` calls the engine makes of it
  (`engine_plan.decode_groups`: the long sequence apart);
- **alone**: 1 sequence of 200 tokens (what a step of the instance pool computes).

The ratios against the consecutive case are printed last. Measured figures: docs/benchmarks.md ("What a decode
step costs").
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from dataclasses import dataclass

from promptlab.llm.local.engine_plan import decode_groups

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the engine's worker runs


@dataclass
class Case:
    name: str
    slots: list[int]
    lengths: list[int]
    grouped: bool = False
    """Decoded in the calls `decode_groups` picks (the engine's way), not in one `llama_decode`."""


CASES = [
    Case("consecutive", list(range(8)), [200] * 8),
    Case("spread", list(range(0, 16, 2)), [200] * 8),
    Case("one long", list(range(8)), [1500] + [200] * 7),
    Case("one long, grouped", list(range(8)), [1500] + [200] * 7, grouped=True),
    Case("alone", [0], [200]),
]


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(m: object, case: Case, steps: int, text: list[int]) -> tuple[float, float]:
    """CPU-ms and wall-ms per decode step of `case` (its prompts read first, untimed)."""
    lib, mem = m.lib, m.mem  # type: ignore[attr-defined]
    for slot in range(16):
        lib.llama_memory_seq_rm(mem, slot, -1, -1)
    for slot, length in zip(case.slots, case.lengths, strict=True):
        for start in range(0, length, 512):
            end = min(length, start + 512)
            n = 0
            for pos in range(start, end):
                n = m.add(n, text[pos + slot], pos, slot, pos == length - 1)  # type: ignore[attr-defined]
            m.batch.n_tokens = n  # type: ignore[attr-defined]
            if lib.llama_decode(m.ctx, m.batch) != 0:  # type: ignore[attr-defined]
                raise RuntimeError(f"{case.name}: reading slot {slot}'s prompt failed")
    seqs = list(zip(case.slots, case.lengths, strict=True))
    groups = decode_groups([n + 1 for n in case.lengths]) if case.grouped else [(0, len(seqs))]
    c0, w0 = cpu_s(), time.perf_counter()
    for i in range(steps):
        for start, end in groups:
            n = 0
            for slot, length in seqs[start:end]:
                n = m.add(n, text[length + i], length + i, slot, True)  # type: ignore[attr-defined]
            m.batch.n_tokens = n  # type: ignore[attr-defined]
            if lib.llama_decode(m.ctx, m.batch) != 0:  # type: ignore[attr-defined]
                raise RuntimeError(f"{case.name}: a decode step failed")
    return 1000 * (cpu_s() - c0) / steps, 1000 * (time.perf_counter() - w0) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()

    from promptlab.llm.local.engine import DEFAULT_SEQS, N_BATCH
    from promptlab.llm.local.engine_model import Model
    from promptlab.llm.local.pool import N_CTX, resolve_model_path

    options = {
        "threads": args.threads,
        "n_seq": DEFAULT_SEQS,
        "n_ctx": DEFAULT_SEQS * N_CTX,
        "n_ctx_seq": N_CTX,
        "n_batch": N_BATCH,
        "extra_bufts": False,
    }
    m = Model.load(str(resolve_model_path("smollm2")), options)
    text = m.tokenize("The quick brown fox jumps over the lazy dog. " * 400, add_bos=True)
    load = os.getloadavg()[0]
    print(f"engine context: {DEFAULT_SEQS} slots of {N_CTX} cells, {args.threads} threads; load average {load:.1f}")
    print("| case | sequences | CPU-ms per step | CPU-ms per token | wall-ms per step |")
    print("|---|---|---|---|---|")
    per_token = {}
    for case in CASES:
        cpu_ms, wall_ms = run(m, case, args.steps, text)
        per_token[case.name] = cpu_ms / len(case.slots)
        shown = f"slots {case.slots[0]}-{case.slots[-1]}, lengths {sorted(set(case.lengths))}"
        print(f"| {case.name} | {shown} | {cpu_ms:.1f} | {per_token[case.name]:.2f} | {wall_ms:.1f} |")
    base = per_token["consecutive"]
    for name in ("spread", "one long", "one long, grouped", "alone"):
        print(f"{name} / consecutive, CPU per token: {per_token[name] / base:.2f}x")


if __name__ == "__main__":
    main()
