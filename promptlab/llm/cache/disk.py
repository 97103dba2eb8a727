"""The on-disk call cache (diskcache): JSON values written once, corruption healed, a full disk survived.

Healing: a database that SQLite finds corrupt (not a database, malformed, its tables gone after a truncation) is
copied aside as `cache.db.corrupt-<time>-<pid>` and emptied in place, under a lock file shared by every process; the
lock file also counts the heals, so a thread or process that meets the damage after another one healed it reconnects
instead of healing twice. What the old file held is lost (the calls are paid again when asked again); what is
written after the heal stays. The file is emptied in place, never replaced by a new file under the same name, and
the database keeps a rollback journal (`journal_mode=truncate`), not diskcache's default write-ahead log: SQLite
finds a database's -journal, -wal and -shm files by path and its locks by inode, so a connection still open on a
replaced file (another thread's, another process's) would read and write the new database's journal or log while
locking the old file, and delete them when it closes. Emptied in place, every connection keeps meeting one file.
A full disk: the failed write says so once, its paid reply is returned, the next call stops (`full_disk.py`); a
cache that cannot be opened for it raises `CacheDiskFullError` (`open_cache` opens it read-only, with a warning)."""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from ...errors import CacheUnavailableError
from ...reading import open_regular, read_bounded, write_regular
from ..call.completion import Completion
from .backend import CacheBackend, VerifyReport, encode_record, record_problem
from .disk_errors import CacheDiskFullError, CacheReadOnlyError, is_corruption, is_disk_full, is_read_only
from .entries import open_diskcache, problem_of, unopenable
from .full_disk import FullDisk

log = logging.getLogger("promptlab.llm.cache")
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


OPEN_FOR_GOOD: list[int] = []
"""Descriptors of healed database files, never closed (see `Cache._empty_in_place`)."""


def empty_image() -> bytes:
    """An empty SQLite database (one page) whose change counter and schema cookie are random. A connection that
    still holds pages or a schema of the file this one replaces in place compares both on its next read, finds
    them changed and drops what it held; counted up from 1, they could match the old file's by chance."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute("PRAGMA auto_vacuum = 1")  # diskcache's setting, which only an empty database can take
        con.execute("PRAGMA user_version = 0")
        image = bytearray(con.serialize())
    finally:
        con.close()
    for offset in (24, 40, 92):  # change counter, schema cookie, version-valid-for (= the change counter)
        image[offset : offset + 4] = (secrets.randbits(31) | 1).to_bytes(4, "big") if offset != 92 else image[24:28]
    return bytes(image)


class Cache(CacheBackend):
    """A completion cache in one directory, safe to share between threads and processes.

    Records are written once (`add`): a stored record is never overwritten, so a racing call in another
    process cannot replace the original call's figures. A corrupt database file is copied aside and emptied with one
    warning and the cache goes on empty (see the module docstring).

    Raises:
        CacheDiskFullError: the directory's disk is full and the database cannot be opened.
        CacheReadOnlyError: the directory is on a read-only file system, or this user may not write it.
        CacheUnavailableError: its cache.db cannot be opened (a directory, another program's database), naming
            the file and what to do.
    """

    def __init__(self, directory: str | os.PathLike[str], *, origin: str = "the cache directory") -> None:
        self.directory = Path(directory).expanduser().resolve()
        self.location = str(self.directory)
        self.origin = origin  # what set the directory (--cache, $PROMPTLAB_CACHE_DIR, ...), named in its errors
        self.unstored = 0  # paid replies this object could not store (a full disk, a lock held too long)
        self.full = FullDisk(self.directory)  # a write met a full disk: the next call stops (full_disk.py)
        self.moved_aside: list[str] = []
        """Database files this object found corrupt and copied aside, each with the cause."""
        self._db = self.directory / "cache.db"
        self._heal_lock = threading.RLock()
        self._held = threading.local()
        self._heals = self._heal_count()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._dc, self._ident = self._open_checked()
        except (sqlite3.Error, OSError) as e:
            if is_read_only(e, self.directory):
                raise CacheReadOnlyError(
                    self.location,
                    f"it is read-only ({e}); make it writable or use another cache directory",
                    origin=self.origin,
                ) from e
            if not is_disk_full(e):
                raise CacheUnavailableError(
                    self.location,
                    f"cannot open {self._db} ({e}): {unopenable(self._db, e)}",
                    origin=self.origin,
                ) from e
            raise CacheDiskFullError(
                self.location,
                f"its disk is full ({e}); free space there or use another cache directory",
                origin=self.origin,
            ) from e

    def _open_checked(self) -> tuple[Any, tuple[int, int] | None]:
        try:
            return self._connect()
        except sqlite3.DatabaseError as e:
            if not is_corruption(e):
                raise
            self._dc, self._ident = None, self._identity()
            dc = self._recover(e, None)
            return dc, self._ident

    def _heal_count(self) -> int:
        """How many heals the lock file records (0 when it is missing or unreadable)."""
        try:
            return int(read_bounded(self.directory / "cache.db.heal-lock", 64, "heal lock") or 0)
        except (OSError, ValueError):
            return 0

    def _identity(self) -> tuple[int, int] | None:
        """The database file's (device, inode), None when there is none: how a swap by another process shows."""
        try:
            st = os.stat(self._db)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _connect(self, *, emptied: bool = False) -> tuple[Any, tuple[int, int] | None]:
        with self._all_processes():  # no opener meets a database that another one is still creating
            if (
                self._db.exists() and not emptied
            ):  # a plain read first: diskcache would wait 60 s for a lock on a truncated file
                check = sqlite3.connect(self._db, timeout=10)
                try:
                    check.execute("SELECT count(*) FROM Cache").fetchone()  # a damaged file fails here
                finally:
                    check.close()
            dc = open_diskcache(self.directory)  # waits out another process's write (cache.entries)
            dc._sql("SELECT count(*) FROM Cache").fetchone()
            return dc, self._identity()

    @contextmanager
    def _all_processes(self) -> Iterator[None]:
        """Hold the directory's heal lock (this process's threads, and every other process); re-entrant."""
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        with self._heal_lock:
            try:
                fd = open_regular(self.directory / "cache.db.heal-lock", os.O_WRONLY | os.O_CREAT, "heal lock")
                f = os.fdopen(fd, "a")  # noqa: SIM115 -- closed below
            except (OSError, ValueError):  # no room (a full disk); a link or a FIFO (RefusedFile)
                f = None  # this process's lock only
            self._held.depth = 1
            try:
                if f is not None:
                    fcntl.flock(f, fcntl.LOCK_EX)
                yield
            finally:
                self._held.depth = 0
                if f is not None:
                    f.close()  # releases the lock

    def _recover(self, error: BaseException, broken: Any) -> Any:
        """Copy the corrupt database aside and empty it (unless another thread or process healed it since this
        object last looked), then reconnect."""
        with self._all_processes():
            if broken is not None and self._dc is not broken:
                return self._dc  # another thread of this object healed it already
            heals = self._heal_count()
            if heals == self._heals:  # nobody healed it since: this object does
                self._empty_in_place(error)
                heals += 1
                try:
                    write_regular(self.directory / "cache.db.heal-lock", str(heals), "heal lock")
                except (OSError, ValueError):
                    pass  # no room to count: another process may heal once more, losing only what it re-empties
            self._heals = heals
            self._dc, self._ident = self._connect(emptied=True)
            return self._dc

    def _empty_in_place(self, error: BaseException) -> None:
        """Copy the database (and any journal, log or index beside it) aside, then overwrite it with an empty
        database (`empty_image`) while holding SQLite's exclusive lock where the file still lets SQLite take it."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = self.directory / f"cache.db.corrupt-{stamp}-{os.getpid()}"
        hold = sqlite3.connect(self._db, timeout=60, isolation_level=None)
        try:
            try:
                hold.execute("BEGIN EXCLUSIVE")  # no other connection is mid-write while the file is emptied
            except sqlite3.DatabaseError:
                pass  # not a database at all: no connection can be writing to it
            # Closing any descriptor of the file drops every SQLite lock this process holds on it (POSIX), so
            # the one opened here stays open until the process ends.
            fd = os.open(self._db, os.O_RDWR | os.O_CREAT)
            OPEN_FOR_GOOD.append(fd)
            with open(aside, "wb") as out:
                while chunk := os.pread(fd, 1 << 20, out.tell()):
                    out.write(chunk)
            image = empty_image()
            os.ftruncate(fd, 0)
            os.pwrite(fd, image, 0)
            os.fsync(fd)
            for suffix in ("-journal", "-wal", "-shm"):
                side = self.directory / f"cache.db{suffix}"
                if side.exists():
                    os.replace(side, self.directory / f"{aside.name}{suffix}")
        finally:
            hold.close()
        self.moved_aside.append(f"{aside.name} ({error})")
        log.warning(
            "promptlab cache: %s is corrupt (%s); copied it aside as %s and started afresh in place",
            self._db,
            error,
            aside.name,
        )

    def _current(self) -> Any:
        """The database connection, reopened first when another process moved the file aside."""
        dc = self._dc
        if self._identity() == self._ident:
            return dc
        with self._all_processes():
            if self._dc is dc and self._identity() != self._ident:
                self._dc, self._ident = self._connect()
            return self._dc

    def _guard(self, op: Callable[[Any], T]) -> T:
        """Run `op` on the database; on corruption, heal once and run it again."""
        dc = self._current()
        try:
            return op(dc)
        except sqlite3.DatabaseError as e:
            if not is_corruption(e):
                raise
            return op(self._recover(e, dc))

    def get(self, key: str, kind: type[M] = Completion) -> M | None:  # type: ignore[assignment]
        """The stored record for `key` (a Completion unless `kind` says otherwise), or None; a corrupted
        entry, one stored under another key or a missing value file is logged, dropped and missed (after a full disk:
        `FullDisk.check`)."""
        self.full.check(self.location, self.origin)
        try:
            raw = self._read(key)
        except Exception as e:  # an unreadable row or value file
            log.warning("promptlab cache: entry %s unreadable (%s); treating as a miss", key[:12], e)
            self.discard(key)
            return None
        if raw is None:
            return self._absent(key, kind)
        return self.decode(key, raw, kind)

    def _absent(self, key: str, kind: type[M]) -> M | None:
        """After a read found nothing: a miss, or a row whose own value file is gone (that row alone is dropped, by
        id). A write landing since the read (its value file written before its row) is read, never discarded."""
        row = self._guard(
            lambda dc: dc._sql("SELECT rowid, filename FROM Cache WHERE key = ? AND raw = 1", (key,)).fetchone()
        )
        if row is None:
            return None  # a miss
        rowid, filename = row
        if filename is None or os.path.lexists(self.directory / filename):
            raw = self._read(key)  # written after our read: a valid entry
            return None if raw is None else self.decode(key, raw, kind)
        log.warning("promptlab cache: entry %s lost its value file; treating as a miss", key[:12])
        self._drop_row(rowid)
        return None

    def _read(self, key: str) -> Any:
        return self._guard(lambda dc: dc.get(key, default=None))

    def set(self, key: str, record: BaseModel) -> None:
        """Store a record, replacing any (errors are never stored). The call path uses `add`."""
        blob = encode_record(record, key)
        self._guard(lambda dc: dc.set(key, blob))

    def add(self, key: str, record: BaseModel) -> bool:
        """Store a record unless one is stored already (write-once, atomic across processes); True if
        this one was stored. The first record of a request is the original call's: it is never replaced.
        A write that fails (a lock held past diskcache's timeout, a full disk: `FullDisk.filled`) is logged, gives True."""
        blob = encode_record(record, key)
        try:
            return bool(self._guard(lambda dc: dc.add(key, blob)))
        except (sqlite3.Error, OSError) as e:  # locked past diskcache's timeout, disk full: keep the paid record
            self.unstored += 1
            if is_disk_full(e):
                return self.full.filled(str(e))  # said once; the next call on this cache stops (`get`)
            log.warning(
                "promptlab cache: could not store %s in %s (%s); the reply is returned but not cached",
                key[:12],
                self.directory,
                e,
            )
            return True

    def discard(self, key: str) -> None:
        """Remove one entry, if it is there."""
        try:
            self._guard(lambda dc: dc.delete(key))
        except Exception:  # the same corruption may stop the delete; the next add then fails over to a set
            pass

    def stats(self) -> dict[str, Any]:
        """Entries, bytes on disk, the directory and any corrupt databases copied aside."""
        entries = self._guard(lambda dc: len(dc))
        volume = self._guard(lambda dc: dc.volume())
        aside = sorted(
            p.name for p in self.directory.glob("cache.db.corrupt-*") if not p.name.endswith(("-wal", "-shm"))
        )
        return {
            "location": self.location,
            "directory": str(self.directory),
            "entries": entries,
            "bytes": volume,
            "corrupt_aside": aside,
        }

    def clear(self) -> int:
        """Remove every entry; returns how many there were."""
        return int(self._guard(lambda dc: dc.clear()))

    def verify(self, *, fix: bool = False) -> VerifyReport:
        """Read back every entry: its row, its value file, its JSON record and the key it was stored under;
        with `fix`, remove bad ones (the row; a value file only inside the directory). A row that would run code
        or reach outside the directory (`cache.entries`) is reported and never read. Databases copied aside as
        corrupt (also when opening) are reported."""
        report = VerifyReport()
        rows = self._guard(lambda dc: dc._sql("PRAGMA integrity_check").fetchall())
        report.database = "ok" if rows and rows[0][0] == "ok" else str(rows[0][0] if rows else "no answer")
        bad: list[tuple[int, str | None]] = []
        listing = "SELECT rowid, key, raw, mode, filename FROM Cache"
        for rowid, key, raw, mode, filename in self._guard(lambda dc: dc._sql(listing).fetchall()):
            report.entries += 1
            name = str(key) if raw else f"row {rowid}"
            problem = problem_of(raw, mode, filename, self.directory) or self._entry_problem(str(key))
            if problem is not None:
                report.problems[name] = problem
                bad.append((rowid, filename))
                continue
            report.ok += 1
        report.moved_aside = list(self.moved_aside)
        if fix:
            for rowid, filename in bad:
                self._drop_row(rowid)
                if filename:
                    self._dc._disk.remove(filename)  # SafeDisk: nothing outside the directory is touched
        return report

    def _drop_row(self, rowid: int) -> None:
        """Delete one row by its id (a row refused as unsafe cannot be found by its key)."""
        self._guard(lambda dc: dc._sql("DELETE FROM Cache WHERE rowid = ?", (rowid,)))

    def _entry_problem(self, key: str) -> str | None:
        """What is wrong with a safe row's value (unreadable, missing, not the record of its key), or None."""
        try:
            raw = self._read(key)
        except Exception as e:
            return f"unreadable: {e}"
        if raw is None:
            return "value file missing"
        return record_problem(key, raw)

    def __contains__(self, key: str) -> bool:
        return bool(self._guard(lambda dc: key in dc))

    def __len__(self) -> int:
        return int(self._guard(lambda dc: len(dc)))

    def close(self) -> None:
        """Close the SQLite connections (the directory stays)."""
        self._dc.close()


__all__ = ["Cache"]
