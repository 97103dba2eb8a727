"""The portable build's speed cost: CPU-seconds per example, portable against native, in the same run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_build.py --native /work/native-llama [--rounds 2]

Each side runs in a fresh process: the portable side with the virtualenv's llama_cpp (the build `scripts/setup`
made), the native side with `--native DIR` first on PYTHONPATH (a llama-cpp-python wheel built with
`-DGGML_NATIVE=ON`, installed there with `pip install --no-deps --target DIR`). The workload is the reproducibility
reference's (benchmarks/support/greedy_reference.py): 66 prompts of the shipped grounded tasks, greedy, 24 tokens, on the
default path (the instance pool), one call at a time, after a warm-up call that loads the model. A side's CPU is
its process's user + system time, children included (`os.times`), over the 66 calls. The sides alternate for
`--rounds` rounds (portable, native, portable, ...) so a load that changes during the run falls on both; printed:
each round's CPU-s per example, the median per side, the ratio portable / native, the kernels each side used
(from its fingerprint) and how many replies the two builds share.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import greedy_reference as ref  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def side() -> dict[str, object]:
    """One side's run, in this process: CPU-s per example, the replies and the fingerprint."""
    import promptlab as pl
    from promptlab.llm.local.fingerprint import kernel_flags

    prompts = ref.reference_prompts()
    pl.complete(ref.MODEL, "Warm up.", max_tokens=4, cache=False)
    before = os.times()
    replies = ref.greedy_replies(prompts)
    after = os.times()
    cpu = sum(after[i] - before[i] for i in range(4))  # user, system, children's user and system
    fp = ref.current_fingerprint()
    return {
        "cpu_per_example": cpu / len(prompts),
        "replies": replies,
        "build": fp["build"],
        "kernels": kernel_flags(str(fp["system_info"])),
        "id": fp["id"],
    }


def run_side(native: str | None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTLAB_LOCAL")}
    env["PYTHONPATH"] = os.pathsep.join([*([native] if native else []), str(ROOT)])
    done = subprocess.run(
        [sys.executable, __file__, "--side"], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    data: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--native", help="folder holding the native llama_cpp (pip install --target)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.side:
        print(json.dumps(side()))
        return
    if not a.native or not (Path(a.native) / "llama_cpp").is_dir():
        parser.error("--native DIR must hold a llama_cpp package (see the docstring)")
    figures: dict[str, list[float]] = {"portable": [], "native": []}
    last: dict[str, dict[str, object]] = {}
    for r in range(a.rounds):
        for name, folder in (("portable", None), ("native", a.native)):
            got = run_side(folder)
            cpu = got["cpu_per_example"]
            assert isinstance(cpu, float)
            figures[name].append(cpu)
            last[name] = got
            print(f"round {r + 1} {name:8s} {cpu:.4f} CPU-s per example  (fingerprint {got['id']})", flush=True)
    for name in figures:
        print(
            f"{name:8s} median {statistics.median(figures[name]):.4f} CPU-s per example; kernels {last[name]['kernels']}"
        )
    ratio = statistics.median(figures["portable"]) / statistics.median(figures["native"])
    print(f"portable / native: {ratio:.2f}x the CPU per example")
    same = sum(x == y for x, y in zip(last["portable"]["replies"], last["native"]["replies"], strict=True))  # type: ignore[call-overload]
    print(f"replies equal between the builds: {same}/{len(ref.reference_prompts())}")


if __name__ == "__main__":
    main()
