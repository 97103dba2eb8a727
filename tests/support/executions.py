"""Helpers for tests that compare two executions of one sweep and kill a worker mid-sweep (the dask tests)."""

from __future__ import annotations

from typing import Any

from promptlab.record import Run

WALL_CLOCK = {"run_id", "wall_time_s", "spent_tokens", "spent_cost_usd", "cache_hits"}
"""Runs-frame columns that differ between executions (each run's own id, wall clock, what this execution paid,
cache hits)."""
RUN_ORDER = ["cell_id", "task_id", "sample"]
"""A runs-frame order that is the same in every execution (run ids differ between executions)."""


def comparable(run: Run) -> dict[str, Any]:
    """`Run.comparable()` without each call's latency (equal only on a cache replay; these are two executions)."""
    data = run.comparable()
    for part in (data["setup"], data["final"], *[it["steps"] for it in data["iterations"]]):
        for step in part:
            if step.get("call"):
                step["call"].pop("latency_s", None)
    return data


def worker_owning(port: int) -> int | None:
    """The pid of this test's descendant process (a dask worker) with a TCP connection from local port `port`."""
    import psutil

    for proc in psutil.Process().children(recursive=True):
        try:
            if any(c.laddr and c.laddr.port == port for c in proc.net_connections(kind="tcp")):
                return proc.pid
        except psutil.Error:
            continue
    return None
