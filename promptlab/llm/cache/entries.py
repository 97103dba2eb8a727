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
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import diskcache

MODE_RAW, MODE_BINARY, MODE_TEXT, MODE_PICKLE = 1, 2, 3, 4
"""diskcache's storage modes of a value: inline, a binary file, a UTF-8 text file, a pickle."""


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


def unopenable(db: Path) -> str:
    """What to do about a cache.db that cannot be opened (not a corrupt one, which heals by itself)."""
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
    "problem_of",
    "unopenable",
]
