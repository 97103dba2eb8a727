"""Why a directory cache cannot be opened or written, told apart: corruption (healed in place), a full disk, a
read-only file system or a directory this user may not write (both opened read-only by `open_cache`)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from ...errors import CacheUnavailableError

CORRUPTION_SIGNS = ("malformed", "no such table", "not a database")
"""Words of SQLite's errors for a database whose file is damaged (a locked or full database is not corrupt)."""


class CacheUnwritableError(CacheUnavailableError):
    """A directory cache that can be read but not written (`open_cache` opens it read-only: `readonly.py`)."""

    why, remedy = "it cannot be written", "make it writable"


class CacheDiskFullError(CacheUnwritableError):
    """A directory cache that cannot be opened because its disk is full."""

    why, remedy = "its disk is full", "free space there"


class CacheReadOnlyError(CacheUnwritableError):
    """A directory cache on a read-only file system, or that this user may not write (a published cache)."""

    why, remedy = "it is read-only", "make it writable or use another cache directory"


def is_read_only(e: BaseException, directory: Path) -> bool:
    """SQLite's 'readonly database', or EROFS / EACCES / EPERM, or a directory this user may not write."""
    if isinstance(e, sqlite3.OperationalError):
        text = str(e).lower()
        return "readonly database" in text or ("unable to open" in text and not os.access(directory, os.W_OK))
    return isinstance(e, OSError) and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def is_corruption(e: BaseException) -> bool:
    """SQLite's 'not a database' / 'malformed' / 'no such table' errors."""
    if type(e) is sqlite3.DatabaseError:  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    return isinstance(e, sqlite3.OperationalError) and any(s in str(e).lower() for s in CORRUPTION_SIGNS)


def is_disk_full(e: BaseException) -> bool:
    """SQLite's 'database or disk is full', or ENOSPC / EDQUOT from the file system."""
    if isinstance(e, sqlite3.OperationalError):
        return "database or disk is full" in str(e).lower()
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


__all__ = [
    "CORRUPTION_SIGNS",
    "CacheDiskFullError",
    "CacheReadOnlyError",
    "CacheUnwritableError",
    "is_corruption",
    "is_disk_full",
    "is_read_only",
]
