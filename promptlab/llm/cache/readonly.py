"""A directory cache opened read-only, because its disk is full or it cannot be written (a read-only file system, a
published cache this user may not write): stored records are served; a new one is not
stored (its paid reply is returned, with one warning) and the next call stops, as on a full disk
(`full_disk.py`): a sweep over a full cache disk replays what is stored and exits 1 at the first reply it pays.

It reads diskcache's SQLite table directly (`Cache` rows: `key`, `raw`, `mode`, `filename`, `value`), as
diskcache stores promptlab's string keys (raw) and JSON string values (inline, or in a value file for large ones).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from ...errors import CacheUnavailableError
from ...reading import read_bounded
from ..call.completion import Completion
from .backend import CacheBackend, VerifyReport, record_problem
from .entries import MAX_VALUE_BYTES, MODE_RAW, MODE_TEXT, inside
from .full_disk import FullDisk

log = logging.getLogger("promptlab.llm.cache")
M = TypeVar("M", bound=BaseModel)


class ReadOnlyCache(CacheBackend):
    """The records of a directory cache that cannot be written (its disk is full).

    Args:
        directory: the cache directory.
        cause: why it is read-only (said in the warning and in `stats`).
        why: the reason as the full-cache messages say it ("its disk is full", "it is read-only").
        remedy: what to do, as they say it.
        origin: what set the directory (--cache, $PROMPTLAB_CACHE_DIR, ...), named in its errors.
    """

    def __init__(
        self,
        directory: str | Path,
        cause: str,
        *,
        why: str = "its disk is full",
        remedy: str = "free space there",
        origin: str = "the cache directory",
    ) -> None:
        self.directory = Path(directory)
        self.location = str(self.directory)
        self.origin = origin
        self.cause = cause
        self._lock = threading.Lock()
        self.full = FullDisk(self.directory, why, remedy)
        db = self.directory / "cache.db"
        self._con: sqlite3.Connection | None = None
        if db.exists():
            try:
                self._con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, check_same_thread=False)
                self._con.execute("SELECT count(*) FROM Cache").fetchone()
            except sqlite3.Error:  # a WAL database needs its -shm writable: read the file as it is instead
                self._con = sqlite3.connect(f"{db.as_uri()}?immutable=1", uri=True, check_same_thread=False)
        log.warning(
            "promptlab cache: %s (set by %s) is read-only (%s): stored replies are replayed, new ones are paid for "
            "and returned but not stored",
            self.location,
            origin,
            cause,
        )

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        if self._con is None:
            return []
        with self._lock:
            try:
                return self._con.execute(sql, args).fetchall()
            except sqlite3.Error as e:
                raise CacheUnavailableError(
                    self.location, f"cannot read the read-only cache: {e}", origin=self.origin
                ) from e

    def _value(self, mode: int, filename: str | None, value: Any) -> str | None:
        if mode == MODE_RAW:
            return value.decode("utf-8") if isinstance(value, bytes) else value
        if mode == MODE_TEXT and filename:
            path = inside(self.directory, filename)  # UnsafeEntry when outside
            return read_bounded(path, MAX_VALUE_BYTES, "value file").decode("utf-8")  # RefusedFile: not a file
        return None

    def get(self, key: str, kind: type[M] = Completion) -> M | None:  # type: ignore[assignment]
        """The stored record for `key`, or None (also for a value that cannot be read). Once a paid reply could
        not be stored, raises CacheUnavailableError as a full disk does (`FullDisk.check`)."""
        self.full.check(self.location, self.origin)
        rows = self._rows("SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1", (key,))
        if not rows:
            return None
        try:
            raw = self._value(*rows[0])
        except (OSError, ValueError) as e:  # ValueError: UnsafeEntry, a row pointing outside the directory
            log.warning("promptlab cache: entry %s unreadable (%s); treating as a miss", key[:12], e)
            return None
        return None if raw is None else self.decode(key, raw, kind)

    def add(self, key: str, record: BaseModel) -> bool:
        """Nothing is stored; True (the caller keeps its paid record). Says so once, and the next call stops, as on
        a full disk (`FullDisk.filled`)."""
        return self.full.filled("opened read-only")

    def set(self, key: str, record: BaseModel) -> None:
        """Refused: the cache is read-only."""
        raise CacheUnavailableError(self.location, f"the cache is read-only ({self.cause})", origin=self.origin)

    def discard(self, key: str) -> None:
        """Nothing is removed from a read-only cache."""

    def stats(self) -> dict[str, Any]:
        """Entries and inline bytes, and why the cache is read-only."""
        rows = self._rows("SELECT count(*), coalesce(sum(size), 0) FROM Cache")
        entries, size = rows[0] if rows else (0, 0)
        return {
            "location": self.location,
            "directory": self.location,
            "entries": int(entries),
            "bytes": int(size),
            "corrupt_aside": [],
            "read_only": self.cause,
        }

    def clear(self) -> int:
        """Refused: the cache is read-only."""
        raise CacheUnavailableError(self.location, f"the cache is read-only ({self.cause})", origin=self.origin)

    def verify(self, *, fix: bool = False) -> VerifyReport:
        """Read back every entry (nothing is removed, also with `fix`)."""
        report = VerifyReport(database=f"read-only ({self.cause})")
        for key, mode, filename, value in self._rows("SELECT key, mode, filename, value FROM Cache WHERE raw = 1"):
            report.entries += 1
            try:
                raw = self._value(mode, filename, value)
            except (OSError, ValueError) as e:
                report.problems[str(key)] = f"unreadable: {e}"
                continue
            problem = "value file missing" if raw is None else record_problem(str(key), raw)
            if problem is None:
                report.ok += 1
            else:
                report.problems[str(key)] = problem
        return report

    def __contains__(self, key: str) -> bool:
        return bool(self._rows("SELECT 1 FROM Cache WHERE key = ? AND raw = 1", (key,)))

    def __len__(self) -> int:
        rows = self._rows("SELECT count(*) FROM Cache")
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        """Close the read-only connection."""
        if self._con is not None:
            self._con.close()


__all__ = ["ReadOnlyCache"]
