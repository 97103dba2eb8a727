"""How a directory cache's rows are read: as data only, and never a path outside the cache directory.

Anyone who can write a shared cache directory can rewrite `cache.db`'s rows. diskcache's own reader would then
unpickle a row switched to its pickle mode (running whatever the pickle says) and open, or delete with its
empty parent directories, a value file named by any path. So promptlab reads rows through `SafeDisk`:
- a value is text (UTF-8 JSON, inline in the row or in a value file), never unpickled: a row in pickle mode,
  or a key stored pickled, is refused (`UnsafeEntry`);
- a value file must resolve (symbolic links followed) to a regular file inside the cache directory: one that
  does not is refused, never read, and never removed; removing a value file also removes its empty parent
  directories only up to the cache directory.
A refused row is a miss (logged); `verify` reports it and `verify --fix` deletes the row alone.

`open_diskcache` opens the directory with promptlab's settings, waiting out another process's write: diskcache
sets up a connection with SQLite's busy timeout at 0 and one of its set-up statements (dropping its tag index)
has no retry, so an opener that meets a commit in progress would otherwise fail at once with "database is
locked".
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import diskcache

from ...reading import RefusedFile, read_bounded

MODE_RAW, MODE_BINARY, MODE_TEXT, MODE_PICKLE = 1, 2, 3, 4
"""diskcache's storage modes of a value: inline, a binary file, a UTF-8 text file, a pickle."""


MAX_VALUE_BYTES = 64 * 2**20
"""The largest value file read: a record holds one reply of at most `Settings.max_reply_bytes` (8 MiB) and its
figures; a bigger file (a sparse 3 GiB one) is refused, never read into memory."""


class UnsafeEntry(ValueError):
    """A cache row that would run code (a pickle) or reach outside the cache directory: refused, never read."""


def inside(directory: str | os.PathLike[str], filename: str) -> Path:
    """The value file `filename` of the cache in `directory`, when it resolves to a place inside it.

    Raises:
        UnsafeEntry: the path is absolute, climbs out, or is a link to somewhere outside.
    """
    root = Path(os.path.realpath(directory))
    full = Path(os.path.realpath(os.path.join(root, filename)))
    if os.path.isabs(filename) or full == root or root not in full.parents:
        raise UnsafeEntry(f"its value file {filename!r} is outside the cache directory: refused, not touched")
    return full


def problem_of(raw: int, mode: int, filename: str | None, directory: str | os.PathLike[str]) -> str | None:
    """Why a row (its `raw`, `mode` and `filename` columns) must not be read, or None."""
    if not raw:
        return "its key is stored pickled: refused, never unpickled"
    if mode == MODE_PICKLE:
        return "its value is stored pickled: refused, never unpickled"
    if mode not in (MODE_RAW, MODE_BINARY, MODE_TEXT):
        return f"its storage mode {mode!r} is unknown: refused"
    if filename:
        try:
            inside(directory, filename)
        except UnsafeEntry as e:
            return str(e)
    return None


LOCK_WAIT_S = 60.0
"""How long an opener waits for other processes' writes to end (diskcache's own wait for a lock)."""


def is_locked(e: BaseException) -> bool:
    """SQLite's 'database is locked' (another connection is writing): transient, neither damage nor a stranger."""
    return isinstance(e, sqlite3.OperationalError) and "database is locked" in str(e).lower()


def open_diskcache(directory: str | os.PathLike[str], wait_s: float = LOCK_WAIT_S) -> diskcache.Cache:
    """The diskcache in `directory` with promptlab's settings, opened again while another process's write holds
    the database locked, for up to `wait_s` seconds (its set-up is idempotent)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            # diskcache commits each set in one SQLite transaction: a reader never sees half an entry. No mmap:
            # a database file truncated under a mapping kills the process with SIGBUS instead of an error.
            # A rollback journal, not a write-ahead log: see `promptlab.llm.cache.disk`'s docstring.
            # No fsync (synchronous=0): a crash of the process loses nothing, one of the operating system may
            # damage the file, which then heals; an fsync'd journal costs 0.4 ms of CPU per write, this 0.1 ms.
            return diskcache.Cache(
                str(directory),
                size_limit=2**34,
                eviction_policy="none",
                sqlite_mmap_size=0,
                sqlite_journal_mode="truncate",
                sqlite_synchronous=0,
                disk=SafeDisk,  # rows read as data only, never a path outside the directory
            )
        except sqlite3.OperationalError as e:
            if not is_locked(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def unopenable(db: Path, error: BaseException | None = None) -> str:
    """What to do about a cache.db that cannot be opened (not a corrupt one, which heals by itself)."""
    if error is not None and is_locked(error):
        return (
            f"another process has held it locked for over {LOCK_WAIT_S:.0f} s; let that process finish (or stop "
            "it) and try again, or use another cache directory"
        )
    if db.is_dir():
        return "it is a directory, not a database file; move it away or use another cache directory"
    return (
        "it is not a promptlab cache (another program's database, or another version's); move it away "
        "or use another cache directory"
    )


class SafeDisk(diskcache.Disk):  # type: ignore[misc]
    """diskcache's Disk, reading rows as data only and never a path outside the cache directory."""

    def get(self, key: Any, raw: bool) -> Any:
        """A row's key; a pickled one is refused."""
        if not raw:
            raise UnsafeEntry("a key stored pickled: refused, never unpickled")
        return super().get(key, raw)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        """A row's value (text or bytes); a pickle, or a value file outside the directory, is refused."""
        why = problem_of(1, mode, filename, self._directory)
        if why is not None:
            raise UnsafeEntry(why)
        if filename and mode in (MODE_BINARY, MODE_TEXT) and not read:  # a regular file, bounded, never blocking
            try:
                data = read_bounded(inside(self._directory, filename), MAX_VALUE_BYTES, "value file")
            except RefusedFile as e:
                raise UnsafeEntry(str(e)) from None
            return data.decode("utf-8") if mode == MODE_TEXT else data
        return super().fetch(mode, filename, value, read)

    def remove(self, file_path: str) -> None:
        """Remove a value file inside the directory, and its parents up to the directory once they are empty;
        a path outside is left alone."""
        try:
            full = inside(self._directory, file_path)
        except UnsafeEntry:
            return
        root = Path(os.path.realpath(self._directory))
        with contextlib.suppress(OSError):  # another process may remove it first
            full.unlink()
        parent = full.parent
        while parent != root and root in parent.parents:
            try:
                parent.rmdir()
            except OSError:  # not empty (or gone): stop
                return
            parent = parent.parent


__all__ = [
    "MODE_BINARY",
    "MODE_PICKLE",
    "MODE_RAW",
    "MODE_TEXT",
    "SafeDisk",
    "UnsafeEntry",
    "inside",
    "is_locked",
    "open_diskcache",
    "problem_of",
    "unopenable",
]
