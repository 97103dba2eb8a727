"""One sweep at a time per results directory: a lock file (`sweep.lock`) held while a sweep writes there.

Two sweeps on one results directory would run the same pending cells, pay for their calls twice and write each
cell's records over the other's (a cell's `runs.jsonl` and `runs.parquet` could then describe different runs).
So `sweep` holds `<results dir>/sweep.lock` from before it writes anything until it returns: an exclusive
`fcntl.lockf` lock (which also holds on NFS), the file saying who holds it (pid, host, start time, command). A
second sweep on the directory stops at once, before any call or write, with `ResultsDirBusy` naming the holder
(exit 2 from the CLI); it does not wait, since a sweep can run for hours. The lock goes with the process that
held it, kill -9 included, so a stale `sweep.lock` file never blocks a resume. Processes a sweep starts (papermill
kernels, Dask workers) write under their sweep's lock and take none.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError
from ..reading import RefusedFile, open_regular, read_bounded

LOCK_NAME = "sweep.lock"
"""The lock file's name in a results directory."""
_held: set[str] = set()
_guard = threading.Lock()


class ResultsDirBusy(ConfigError):
    """Another sweep is writing to this results directory."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(read_bounded(path, 64 * 1024, LOCK_NAME))  # RefusedFile (a FIFO, a link) is a ValueError
        return f"pid {info['pid']} on {info['host']}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that did not say who it is"


def _busy(out: Path, holder: str) -> ResultsDirBusy:
    return ResultsDirBusy(
        f"results dir {out} is in use by another sweep ({holder}); wait for it to finish, or give this one "
        "another --out"
    )


@contextlib.contextmanager
def hold_results_dir(out: Path) -> Iterator[None]:
    """Hold the results directory's lock for the block (creating the directory).

    Raises:
        ResultsDirBusy: another sweep, in this process or another, holds it (naming that sweep).
    """
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    path, key = out / LOCK_NAME, str(out.resolve())
    with _guard:  # lockf locks belong to a process: a second sweep in this one is stopped here
        if key in _held:
            raise _busy(out, _holder(path))
        _held.add(key)
    try:
        try:  # never through a link (its target would be truncated), never blocking on a FIFO
            fd = open_regular(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, LOCK_NAME)
        except RefusedFile as e:
            raise ConfigError(f"results dir {out}: {e}; remove it and run again") from None
        with os.fdopen(fd, "a+", encoding="utf-8") as f:
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise _busy(out, _holder(path)) from None
            f.truncate(0)
            started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            command = " ".join(sys.argv)[:300]
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started": started, "command": command}
            f.write(json.dumps(info))
            f.flush()
            yield
    finally:
        with _guard:
            _held.discard(key)


__all__ = ["LOCK_NAME", "ResultsDirBusy", "hold_results_dir"]
