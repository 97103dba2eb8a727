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


def worker_owning(client: tuple[str, int], server_port: int) -> int | None:
    """The pid of this test's descendant process (a dask worker) holding the TCP connection from `client` to the
    loopback server on `server_port`. Both ends are matched: Linux gives one local port to several connections
    with different peers, so the client's port alone can name a nanny or another worker whose connection to the
    scheduler has the same local port (that process was killed and the request's sender went on)."""
    import psutil

    for proc in psutil.Process().children(recursive=True):
        try:
            if any(
                c.laddr and c.raddr and c.laddr.port == client[1] and c.raddr.port == server_port
                for c in proc.net_connections(kind="tcp")
            ):
                return proc.pid
        except psutil.Error:
            continue
    return None


def killed_and_seen(pid: int, client: tuple[str, int], server_port: int) -> bool:
    """Whether the killed process `pid` has exited (gone, or a zombie its parent has not reaped yet) and the
    loopback server of this process has seen its connection from `client` close (`server_saw_close`): from then
    on a reply to that connection reaches no one."""
    import psutil

    try:
        exited = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        exited = True
    return exited and server_saw_close(client, server_port)


def server_saw_close(client: tuple[str, int], server_port: int) -> bool:
    """Whether this process's end of the connection from `client` to its loopback server on `server_port` has
    seen the client close it (no longer ESTABLISHED: the FIN or RST arrived). A killed process's main thread shows
    as a zombie while its other threads are still being ended, and its sockets close only with the last of them:
    a multi-threaded process (a dask worker) can look reaped with its connection still open."""
    import psutil

    return not any(
        c.laddr
        and c.raddr
        and c.laddr.port == server_port
        and c.raddr.port == client[1]
        and c.status == psutil.CONN_ESTABLISHED
        for c in psutil.Process().net_connections(kind="tcp")
    )


FOREGROUND = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
"""Prefix for a `python -c` child that a test stops with Ctrl-C: SIGINT as in a command a terminal runs in the
foreground. A child keeps an ignored SIGINT across exec, and a shell starts a background job (`ci &`) with SIGINT
ignored; a sweep started so rightly keeps ignoring Ctrl-C (as `nohup` and `&` intend), so without this prefix
the test would measure how the suite was started, not the sweep."""
