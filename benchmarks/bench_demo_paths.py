"""The demo's CPU-seconds on each local path, in one run: the instance pool against the exact batching engine.

    .venv/bin/python benchmarks/bench_demo_paths.py [--replicates 7] [--paths engine,pool] [--work DIR]

Each path runs experiments/demo.yaml (optionally with fewer replicates) as scripts/demo runs it
(`promptlab sweep --executor inline --workers 3`) in a clean process of its own, from an empty call cache of its
own, with no `PROMPTLAB_*` variable set but the path's: the pool as scripts/demo set it before #50
(`PROMPTLAB_LOCAL_ENGINE=pool`, one one-thread instance per core) and the engine (`PROMPTLAB_LOCAL_ENGINE=batch`,
its defaults; `engine-1thread`: with PROMPTLAB_LOCAL_THREADS=1). CPU-seconds count every process: the sweep's and its children's, the engine's worker included
(`getrusage(RUSAGE_CHILDREN)`, which holds the CPU of every descendant waited for; the engine and the pool are
closed and waited for at exit). Printed per path: wall time, CPU-seconds, runs done and failed, model calls made
(not cache hits), CPU-seconds per made call, load average; then the ratio engine / pool of CPU-seconds (target
<= 0.7) and whether the two sweeps' findings (summary.md's "Findings", but the fingerprint lines, which name the
path) are identical: both paths are exact, and a sampled reply draws from the same logits with the same seed, so
they should be. Measured figures: docs/benchmarks.md ("The demo on each path").

`--work DIR` keeps each side's results (a side whose results exist is read, not run again: a run on a busy machine
can be resumed side by side); default: a temporary directory, removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PATHS = {
    "pool": {
        "PROMPTLAB_LOCAL_ENGINE": "pool",
        "PROMPTLAB_LOCAL_THREADS": "1",
        "PROMPTLAB_LOCAL_INSTANCES": str(os.cpu_count() or 2),
    },
    "engine": {"PROMPTLAB_LOCAL_ENGINE": "batch"},
    "engine-1thread": {"PROMPTLAB_LOCAL_ENGINE": "batch", "PROMPTLAB_LOCAL_THREADS": "1"},
}
"""Each side's environment: the pool as scripts/demo ran it before #50, the engine with its defaults."""


def experiment(work: Path, replicates: int | None) -> Path:
    """experiments/demo.yaml, with `replicates` replaced when given (its task file's path made absolute)."""
    spec = yaml.safe_load((ROOT / "experiments" / "demo.yaml").read_text())
    spec["tasks"] = str((ROOT / "experiments" / spec["tasks"]).resolve())
    if replicates is not None:
        spec["replicates"] = replicates
    path = work / "demo.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def clean_env(path: str, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTLAB_")}
    env.update(PATHS[path], PROMPTLAB_CACHE_DIR=str(cache), LITELLM_LOCAL_MODEL_COST_MAP="True")
    env["PYTHONPATH"] = str(ROOT)  # this checkout's promptlab
    return env


def run_side(path: str, exp: Path, work: Path) -> dict[str, Any]:
    """One side's sweep (this script's `--side`, a clean process) and report; its figures (saved beside its
    results, so a finished side is read, not run again)."""
    side = work / path
    saved = side / "figures.yaml"
    if saved.exists():
        return dict(yaml.safe_load(saved.read_text()))
    shutil.rmtree(side, ignore_errors=True)
    side.mkdir(parents=True)
    env = clean_env(path, side / "cache")
    cmd = [sys.executable, __file__, "--side", str(exp), str(side / "results")]
    before, load0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0], time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    wall, after, load1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    report = [sys.executable, "-m", "promptlab.cli", "report", str(side / "results")]
    subprocess.run(report, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    figures: dict[str, Any] = {"exit": done.returncode, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
    figures.update(calls(side / "results"), load=f"{load0:.1f}-{load1:.1f}")
    figures["engine"] = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    saved.write_text(yaml.safe_dump(figures))
    return figures


def side(exp: str, out: str) -> int:
    """The child: the sweep as `promptlab sweep --executor inline --workers 3` runs it, then the engine's counters
    (prompt tokens asked and read, tokens decoded, steps) as the last line of stdout."""
    from promptlab.llm.local import engine
    from promptlab.sweeps.experiment import load_experiment
    from promptlab.sweeps.run import sweep

    result = sweep(load_experiment(exp), Path(out), executor="inline", workers=3, progress=False)
    counters: dict[str, Any] = {str(p.name): e.stats() for p, e in engine.running().items()}
    engine.close_all()  # the worker ended and reaped: its CPU is in this process's children
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    counters["children_cpu_s"] = round(kids.ru_utime + kids.ru_stime, 1)
    print(json.dumps(counters), flush=True)
    return 0 if result.failed == 0 else 1


def calls(results: Path) -> dict[str, float | str]:
    from promptlab.results.store import load

    runs = load(results).runs
    made = int((runs["calls"] - runs["cache_hits"]).sum())
    return {"runs": len(runs), "failed_runs": int(runs["error"].notna().sum()), "made_calls": made}


def findings(results: Path) -> list[str]:
    """summary.md's Findings, without the lines naming the machine and the local path (the fingerprints')."""
    from promptlab.reports.fingerprints import machine_free

    text = (results / "report" / "summary.md").read_text()
    return machine_free(text.split("## Findings", 1)[-1].split("## Charts", 1)[0])


def main() -> int:
    if sys.argv[1:2] == ["--side"]:
        return side(sys.argv[2], sys.argv[3])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicates", type=int, help="replicates per task (default: the demo's 7)")
    p.add_argument("--paths", default="engine,pool")
    p.add_argument("--work", help="directory for each side's cache and results (kept; a finished side is reused)")
    args = p.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="promptlab-demo-paths-"))
    work.mkdir(parents=True, exist_ok=True)
    exp = experiment(work, args.replicates)
    paths = args.paths.split(",")
    print(f"demo ({args.replicates or 7} replicates) on {', '.join(paths)}; {os.cpu_count()} cores; work dir {work}")
    sides = {path: run_side(path, exp, work) for path in paths}
    counters: list[str] = []
    print("\n| path | exit | wall s | CPU-s | runs (failed) | made calls | CPU-s per made call | load |")
    print("|---|---|---|---|---|---|---|---|")
    for path, f in sides.items():
        per = float(f["cpu_s"]) / max(int(f["made_calls"]), 1)
        counters.append(f"{path}: {f.get('engine') or 'no engine'}")
        print(
            f"| {path} | {f['exit']} | {f['wall_s']} | {f['cpu_s']} | {f['runs']} ({f['failed_runs']}) | "
            f"{f['made_calls']} | {per:.3f} | {f['load']} |"
        )
    print("\n".join(["", "engine counters:", *counters]))
    ok = all(f["exit"] == 0 and f["failed_runs"] == 0 for f in sides.values())
    whole = {p for p, f in sides.items() if f["exit"] == 0 and f["failed_runs"] == 0 and f["runs"]}
    if {"pool", "engine"} <= set(sides) and not {"pool", "engine"} <= whole:
        print("\nno ratio: a side did not finish every run (" + ", ".join(sorted(set(sides) - whole)) + ")")
    elif {"pool", "engine"} <= set(sides):
        ratio = float(sides["engine"]["cpu_s"]) / float(sides["pool"]["cpu_s"])
        same = findings(work / "engine" / "results") == findings(work / "pool" / "results")
        print(f"\nengine / pool CPU-seconds: {ratio:.2f}x (target <= 0.7: {'met' if ratio <= 0.7 else 'NOT met'})")
        print(f"findings identical on both paths (but the fingerprint lines, which name the path): {same}")
        ok = ok and ratio <= 0.7 and same
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
