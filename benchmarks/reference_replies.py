"""The reproducibility reference: write it, or measure which local paths reproduce it exactly.

    PYTHONPATH=. .venv/bin/python benchmarks/reference_replies.py --write     # regenerate (the default path)
    PYTHONPATH=. .venv/bin/python benchmarks/reference_replies.py --measure   # every path against it

`--write` asks local/smollm2 the fixed prompts (benchmarks/support/greedy_reference.py) one at a time on the default path
and writes tests/llm/reference/smollm2_greedy.json: the replies, their sha256 and the fingerprint. `--measure` runs
each path in a fresh process (the pool with 1 or 2 threads, 1 or 2 instances, in order and reversed; the batching
engine at one sequence and in batches of 8 and 66, in order and reversed) and prints, per path, how many replies
equal the reference's, their sha256 (equal hashes: equal replies) and the first that does not. Results: docs/reproducibility.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import greedy_reference as ref  # noqa: E402

PATHS: list[tuple[str, dict[str, str], int, str]] = [
    ("pool, 1 instance, 2 threads", {"PROMPTLAB_LOCAL_ENGINE": "pool", "PROMPTLAB_LOCAL_THREADS": "2"}, 1, "forward"),
    ("pool, 1 instance, 1 thread", {"PROMPTLAB_LOCAL_ENGINE": "pool", "PROMPTLAB_LOCAL_THREADS": "1"}, 1, "forward"),
    ("pool, 1 instance, reversed order", {"PROMPTLAB_LOCAL_ENGINE": "pool"}, 1, "reversed"),
    ("pool, 1 instance, each prompt twice", {"PROMPTLAB_LOCAL_ENGINE": "pool"}, 1, "twice"),
    (
        "pool, 2 instances x 1 thread, 2 at once",
        {"PROMPTLAB_LOCAL_ENGINE": "pool", "PROMPTLAB_LOCAL_THREADS": "1", "PROMPTLAB_LOCAL_INSTANCES": "2"},
        2,
        "forward",
    ),
    ("engine, one sequence at a time, 2 threads", {"PROMPTLAB_LOCAL_ENGINE": "batch"}, 1, "forward"),
    (
        "engine, one sequence at a time, 1 thread",
        {"PROMPTLAB_LOCAL_ENGINE": "batch", "PROMPTLAB_LOCAL_THREADS": "1"},
        1,
        "forward",
    ),
    ("engine, one sequence, reversed order", {"PROMPTLAB_LOCAL_ENGINE": "batch"}, 1, "reversed"),
    ("engine, one sequence, each prompt twice", {"PROMPTLAB_LOCAL_ENGINE": "batch"}, 1, "twice"),
    ("engine, batches of 8", {"PROMPTLAB_LOCAL_ENGINE": "batch"}, 8, "forward"),
    ("engine, all 66 at once", {"PROMPTLAB_LOCAL_ENGINE": "batch"}, 66, "forward"),
    ("engine, all 66 at once, reversed order", {"PROMPTLAB_LOCAL_ENGINE": "batch"}, 66, "reversed"),
]
"""(name, environment, calls in flight at once, order: forward, reversed, or twice (each prompt asked twice in a
row, the second reply kept: the prompt is then read from the prefix the first left, one token at a time))."""
ORDERS = {
    "forward": lambda n: list(range(n)),
    "reversed": lambda n: list(reversed(range(n))),
    "twice": lambda n: [i for i in range(n) for _ in (0, 1)],
}
SETTINGS = ("PROMPTLAB_LOCAL_ENGINE", "PROMPTLAB_LOCAL_THREADS", "PROMPTLAB_LOCAL_INSTANCES", "PROMPTLAB_ENGINE_SEQS")


def run_here(at_once: int, order: str) -> dict[str, object]:
    prompts = ref.reference_prompts()
    replies = ref.greedy_replies(prompts, at_once=at_once, order=ORDERS[order](len(prompts)))
    return {"replies": replies, "fingerprint": ref.current_fingerprint()}


def run_path(env: dict[str, str], at_once: int, order: str) -> dict[str, object]:
    """One path in a fresh process (settings are read when a model loads)."""
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    args = [sys.executable, __file__, "--run", str(at_once), "--order", order]
    done = subprocess.run(args, env={**clean, **env}, capture_output=True, text=True, check=True)
    data: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def measure(only: str) -> None:
    reference = ref.load_reference()
    print(f"reference: {len(reference['items'])} replies, sha256 {reference['sha256'][:12]}")
    for name, env, at_once, order in PATHS:
        if only not in name:
            continue
        got = run_path(env, at_once, order)
        replies = got["replies"]
        assert isinstance(replies, list)
        result = ref.compare(reference, replies)
        fp = got["fingerprint"]
        assert isinstance(fp, dict)
        line = f"{name:45s} {result.same:3d}/{result.total} same  sha256 {ref.replies_hash(replies)[:12]}  fingerprint {fp['id']}"
        if result.first is not None:
            i, _, expected, text = result.first
            line += f"  first differing #{i}: {expected!r} -> {text!r}"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="regenerate the reference on the default path")
    parser.add_argument("--measure", action="store_true", help="measure every local path against the reference")
    parser.add_argument("--only", default="", help="with --measure: only the paths whose name holds this text")
    parser.add_argument("--run", type=int, metavar="AT_ONCE", help=argparse.SUPPRESS)
    parser.add_argument("--order", choices=sorted(ORDERS), default="forward", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.run is not None:
        print(json.dumps(run_here(a.run, a.order)))
    elif a.write:
        prompts = ref.reference_prompts()
        record = ref.reference_record(prompts, ref.greedy_replies(prompts))
        ref.REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        ref.REFERENCE.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {ref.REFERENCE} ({len(prompts)} replies, sha256 {record['sha256'][:16]})")
    elif a.measure:
        measure(a.only)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
