"""Time the demo sweep as scripts/demo runs it: a fresh run, a fully cached re-run, and one cell's fixed cost.

    .venv/bin/python benchmarks/bench_demo.py [--experiment experiments/demo.yaml] [--executor inline] [--workers 3]

The sweeps run with scripts/demo's settings (inline executor, PROMPTLAB_LOCAL_THREADS=1 and one local-model
instance per core, unless the environment sets them) and print the process's CPU time beside the wall time.

1. First run: the experiment with a fresh call cache into a fresh results dir (every call reaches the model).
2. Second run: the same experiment into a NEW results dir with the same cache, so no cell is skipped as
   finished and every model call is a cache hit. Target: at most 10% of the first run.
3. Fixed cost of one papermill cell: the run_cell notebook on one fully cached cell (into a new results
   dir each time) against a notebook with one trivial cell, both executed by papermill here, median of
   `--repeats`. Target: at most 1.5x. Whether the cached cell imported litellm is read from its output.

Prints the figures and the ratios; exits 1 if a target is missed. `--work DIR` keeps the files there
(default: a temporary directory, removed afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
os.environ.setdefault("PROMPTLAB_LOCAL_THREADS", "1")  # as scripts/demo
os.environ.setdefault("PROMPTLAB_LOCAL_INSTANCES", str(os.cpu_count() or 2))


def _cpu() -> float:
    """CPU seconds of this process and its finished children (papermill kernels)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiment", default=str(ROOT / "experiments" / "demo.yaml"))
    p.add_argument("--executor", default="inline", help="inline (scripts/demo's), papermill or dask")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5, help="papermill runs per fixed-cost figure (median)")
    p.add_argument("--work", help="directory for the cache and results (kept)")
    args = p.parse_args()

    import nbformat
    import papermill as pm
    from nbformat import v4

    from promptlab.results.store import load
    from promptlab.sweeps.experiment import load_experiment
    from promptlab.sweeps.notebook import TEMPLATE
    from promptlab.sweeps.papermill import KERNEL_ARGS
    from promptlab.sweeps.run import sweep

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="promptlab-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    if cache.exists():
        shutil.rmtree(cache)
    for d in work.glob("run*"):
        shutil.rmtree(d)
    exp = load_experiment(args.experiment)
    n_cells, n_tasks = len(exp.cells()), len(exp.load_tasks())
    print(
        f"experiment {exp.name}: {n_cells} cells x {n_tasks} tasks x {exp.replicates} replicate(s); "
        f"{args.executor}, {args.workers} workers, {os.cpu_count()} cores; work dir {work}",
        flush=True,
    )

    def timed_sweep(out: Path) -> tuple[float, Any]:
        t0, c0 = time.perf_counter(), _cpu()
        result = sweep(exp, out, executor=args.executor, workers=args.workers, cache=cache, progress=False)
        print(f"  CPU time of the sweep: {_cpu() - c0:.1f} s", flush=True)
        return time.perf_counter() - t0, result

    first_s, first = timed_sweep(work / "run1")
    print(f"first run: {first_s:.1f} s ({first})", flush=True)
    second_s, second = timed_sweep(work / "run2")
    print(f"second run: {second_s:.1f} s ({second})", flush=True)
    runs = load(work / "run2").runs
    # every call answered from the cache: hits, and structured calls that fail again by replaying their
    # cached replies (they count as failed calls, not hits); nothing reached a model, so no tokens were spent
    answered = runs["cache_hits"] + runs["failed_calls"]
    all_hits = bool(len(runs)) and bool((answered == runs["calls"]).all()) and int(runs["spent_tokens"].sum()) == 0
    missed = runs[(answered != runs["calls"]) | (runs["spent_tokens"] > 0)]
    cells2 = load(work / "run2").cells
    missed_cells = cells2[cells2["cell_id"].isin(set(missed["cell_id"]))]
    litellm_flags = [
        _printed(work / "run2" / "cells" / c.cell_id / "run_cell.ipynb").get("litellm_imported") for c in second.cells
    ]

    # fixed cost of one cell: the run_cell notebook on a cached cell vs a one-cell notebook
    empty = work / "empty.ipynb"
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [v4.new_code_cell("x = 1")]
    nbformat.write(nb, empty)
    # a cell none of whose calls reached a model in the second run (one that did would time the model,
    # not the fixed cost)
    hit = runs.groupby("cell_id").apply(lambda g: bool((g["spent_tokens"] == 0).all()))
    cell = next((c for c in exp.cells() if bool(hit.get(c.cell_id, False))), exp.cells()[0])
    kw: dict[str, Any] = {
        "progress_bar": False,
        "log_output": False,
        "cwd": os.getcwd(),
        "extra_arguments": KERNEL_ARGS,
    }
    pm.execute_notebook(str(empty), str(work / "warmup.ipynb"), **kw)  # first kernel start warms disk caches
    empty_times, cell_times, cell_flags = [], [], []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        pm.execute_notebook(str(empty), str(work / "empty_out.ipynb"), **kw)
        empty_times.append(time.perf_counter() - t0)
        out = work / f"run_cell_{i}"
        params = {
            "results_dir": str(out),
            "cell_id": cell.cell_id,
            "experiment_path": str(Path(args.experiment)),
            "cache_dir": str(cache),
        }
        t0 = time.perf_counter()
        pm.execute_notebook(str(TEMPLATE), str(work / "cell_out.ipynb"), parameters=params, **kw)
        cell_times.append(time.perf_counter() - t0)
        cell_flags.append(_printed(work / "cell_out.ipynb").get("litellm_imported"))
    empty_s, cell_s = statistics.median(empty_times), statistics.median(cell_times)

    ratio_runs, ratio_cell = second_s / first_s, cell_s / empty_s
    print()
    print(f"first run (fresh cache)          {first_s:8.1f} s   cells ok {first.done}/{n_cells}")
    print(
        f"second run (all cached, new dir) {second_s:8.1f} s   cells ok {second.done}/{n_cells}, "
        f"no model call made (all from the cache): {all_hits}"
    )
    if len(missed):
        print(
            f"  {int(missed['spent_tokens'].sum())} token(s) spent in {len(missed_cells)} cell(s): calls that "
            f"reached a model (e.g. a provider error, which is never cached); those cells took "
            f"{missed_cells['wall_time_s'].sum():.1f} s of cell time"
        )
    print(
        f"  ratio second/first             {ratio_runs:8.3f}     target <= 0.10: "
        f"{'PASS' if ratio_runs <= 0.10 else 'FAIL'}"
    )
    print(f"cached cell, papermill (median)  {cell_s:8.2f} s   runs {[round(t, 2) for t in cell_times]}")
    print(f"empty notebook, papermill        {empty_s:8.2f} s   runs {[round(t, 2) for t in empty_times]}")
    print(
        f"  ratio cell/empty               {ratio_cell:8.2f}     target <= 1.5:  "
        f"{'PASS' if ratio_cell <= 1.5 else 'FAIL'}"
    )
    print(f"litellm imported in a cached cell: sweep cells {litellm_flags}, timed cells {cell_flags}")
    ok = (
        first.failed == 0
        and second.failed == 0
        and all_hits
        and ratio_runs <= 0.10
        and ratio_cell <= 1.5
        and not any(litellm_flags + cell_flags)
    )
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def _printed(notebook: Path) -> dict[str, Any]:
    """The JSON status line the run_cell notebook prints last ({} if absent)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    for out in reversed(nb.cells[-1].get("outputs", [])):
        if out.get("output_type") == "stream":
            try:
                value = json.loads(out["text"].strip().splitlines()[-1])
                return value if isinstance(value, dict) else {}
            except (ValueError, IndexError):
                return {}
    return {}


if __name__ == "__main__":
    sys.exit(main())
