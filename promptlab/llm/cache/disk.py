"""The on-disk call cache (diskcache): JSON values written once, corruption healed."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from ..completion import Completion
from .backend import CacheBackend, VerifyReport, encode_record, record_problem

log = logging.getLogger("promptlab.llm.cache")
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def _is_corruption(e: BaseException) -> bool:
    """SQLite's 'not a database' / 'malformed' errors (a locked database is not corruption)."""
    return isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError) or (
        isinstance(e, sqlite3.OperationalError) and "malformed" in str(e).lower()
    )


class Cache(CacheBackend):
    """A completion cache in one directory, safe to share between threads and processes.

    Records are written once (`add`): a stored record is never overwritten, so a racing call in another
    process cannot replace the original call's figures. A corrupt database file is moved aside as
    `cache.db.corrupt-<timestamp>` with one warning, and the cache goes on empty.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser().resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.location = str(self.directory)
        self._heal_lock = threading.Lock()
        try:
            self._dc = self._connect()
        except sqlite3.DatabaseError as e:
            if not _is_corruption(e):
                raise
            self._dc = self._recover(e, None)

    def _connect(self) -> Any:
        import diskcache  # lazy: keeps `import promptlab` light

        # diskcache commits each set in one SQLite transaction: a reader never sees half an entry.
        dc = diskcache.Cache(str(self.directory), size_limit=2**34, eviction_policy="none")
        dc._sql("SELECT count(*) FROM Cache").fetchone()  # touch the table: a corrupt file fails here
        return dc

    def _recover(self, error: BaseException, broken: Any) -> Any:
        """Move the corrupt database aside (once per process per file) and open a fresh one."""
        with self._heal_lock:
            if broken is not None and getattr(self, "_dc", None) is not broken:
                return self._dc  # another thread healed it already
            if broken is not None:
                try:
                    broken.close()
                except Exception:
                    pass
            stamp = time.strftime("%Y%m%dT%H%M%S")
            db = self.directory / "cache.db"
            aside = self.directory / f"cache.db.corrupt-{stamp}-{os.getpid()}"
            if db.exists():
                os.replace(db, aside)
            for suffix in ("-wal", "-shm"):
                side = self.directory / f"cache.db{suffix}"
                if side.exists():
                    os.replace(side, self.directory / f"{aside.name}{suffix}")
            log.warning("promptlab cache: %s is corrupt (%s); moved it aside as %s and started a fresh cache",
                        db, error, aside.name)
            self._dc = self._connect()
            return self._dc

    def _guard(self, op: Callable[[Any], T]) -> T:
        """Run `op` on the database; on corruption, heal once and run it again."""
        dc = self._dc
        try:
            return op(dc)
        except sqlite3.DatabaseError as e:
            if not _is_corruption(e):
                raise
            return op(self._recover(e, dc))

    def get(self, key: str, kind: type[M] = Completion) -> M | None:  # type: ignore[assignment]
        """The stored record for `key` (a Completion unless `kind` says otherwise), or None; a corrupted
        entry or a missing value file is logged, dropped and missed."""
        try:
            raw = self._read(key)
        except Exception as e:  # an unreadable row or value file
            log.warning("promptlab cache: entry %s unreadable (%s); treating as a miss", key[:12], e)
            self.discard(key)
            return None
        if raw is None:
            if self._guard(lambda dc: key in dc):  # the row is there, its value file is not
                log.warning("promptlab cache: entry %s lost its value file; treating as a miss", key[:12])
                self.discard(key)
            return None
        return self.decode(key, raw, kind)

    def _read(self, key: str) -> Any:
        return self._guard(lambda dc: dc.get(key, default=None))

    def set(self, key: str, record: BaseModel) -> None:
        """Store a record, replacing any (errors are never stored). The call path uses `add`."""
        blob = encode_record(record)
        self._guard(lambda dc: dc.set(key, blob))

    def add(self, key: str, record: BaseModel) -> bool:
        """Store a record unless one is stored already (write-once, atomic across processes); True if
        this one was stored. The first record of a request is the original call's: it is never replaced.
        A write that fails (a lock held past diskcache's timeout, a full disk) is logged and gives True."""
        blob = encode_record(record)
        try:
            return bool(self._guard(lambda dc: dc.add(key, blob)))
        except (sqlite3.Error, OSError) as e:  # locked past diskcache's timeout, disk full: keep the paid record
            log.warning("promptlab cache: could not store %s in %s (%s); the reply is returned but not cached",
                        key[:12], self.directory, e)
            return True

    def discard(self, key: str) -> None:
        """Remove one entry, if it is there."""
        try:
            self._guard(lambda dc: dc.delete(key))
        except Exception:  # the same corruption may stop the delete; the next add then fails over to a set
            pass

    def stats(self) -> dict[str, Any]:
        """Entries, bytes on disk, the directory and any corrupt databases moved aside."""
        entries = self._guard(lambda dc: len(dc))
        volume = self._guard(lambda dc: dc.volume())
        aside = sorted(p.name for p in self.directory.glob("cache.db.corrupt-*") if not p.name.endswith(("-wal", "-shm")))
        return {"location": self.location, "directory": str(self.directory), "entries": entries, "bytes": volume, "corrupt_aside": aside}

    def clear(self) -> int:
        """Remove every entry; returns how many there were."""
        return int(self._guard(lambda dc: dc.clear()))

    def verify(self, *, fix: bool = False) -> VerifyReport:
        """Read back every entry: its row, its value file and its JSON record; with `fix`, remove bad ones."""
        report = VerifyReport()
        rows = self._guard(lambda dc: dc._sql("PRAGMA integrity_check").fetchall())
        report.database = "ok" if rows and rows[0][0] == "ok" else str(rows[0][0] if rows else "no answer")
        for key in list(self._guard(lambda dc: list(dc.iterkeys()))):
            report.entries += 1
            try:
                raw = self._read(key)
            except Exception as e:
                report.problems[str(key)] = f"unreadable: {e}"
                continue
            if raw is None:
                report.problems[str(key)] = "value file missing"
                continue
            problem = record_problem(raw)
            if problem is not None:
                report.problems[str(key)] = problem
                continue
            report.ok += 1
        if fix:
            for key in report.problems:
                self.discard(key)
        return report

    def __contains__(self, key: str) -> bool:
        return bool(self._guard(lambda dc: key in dc))

    def __len__(self) -> int:
        return int(self._guard(lambda dc: len(dc)))

    def close(self) -> None:
        """Close the SQLite connections (the directory stays)."""
        self._dc.close()


__all__ = ["Cache"]
