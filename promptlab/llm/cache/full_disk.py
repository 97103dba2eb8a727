"""A directory cache whose disk filled stops the work, as a full Redis does (docs/cache.md): the write that met the
full disk says so once and its paid reply is returned, and the next call on that cache raises CacheUnavailableError
(an infrastructure failure: the sweep's cells fail with it and the sweep exits 1). Paying for calls that cannot be
stored would pay for them again on every resume. Once room is made the same cache object goes on by itself."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from ...errors import CacheUnavailableError

log = logging.getLogger("promptlab.llm.cache")
ROOM_BYTES = 1 << 20
"""Free bytes, over what was free when a write failed, that count as room made again."""


class FullDisk:
    """Whether a directory cache met a full disk, and since when it has stored nothing."""

    def __init__(self, directory: Path, why: str = "its disk is full", remedy: str = "free space there") -> None:
        self.directory = directory
        self.why, self.remedy = why, remedy
        """Why nothing can be stored, and what to do, as the messages say it (a read-only cache: `readonly.py`)."""
        self.cause: str | None = None
        """Why a write failed for lack of space, once one did: the cache is then full."""
        self.unstored = 0
        """Paid replies not stored since the disk filled."""
        self._free_then = 0
        self._lock = threading.Lock()

    def filled(self, cause: str) -> bool:
        """Record a write that failed for lack of space, saying so for the first one since the disk filled; True
        (the caller keeps its paid record, as from a write that stored it)."""
        with self._lock:
            self.unstored += 1
            if self.cause is not None:
                return True
            self.cause, self._free_then = (cause.splitlines() or ["no space left"])[0][:200], self._free()
        log.warning(
            "promptlab cache: %s %s (%s: %s): a paid reply was not stored, and the next call on this cache stops "
            "(%s, then resume)",
            self.directory,
            "is full" if self.why == "its disk is full" else "cannot store",
            self.why,
            self.cause,
            self.remedy,
        )
        return True

    def check(self, location: str, origin: str) -> None:
        """Raise CacheUnavailableError while the disk is as full as when a write failed (room made: go on)."""
        with self._lock:
            if self.cause is None:
                return
            if self._free() >= self._free_then + ROOM_BYTES:
                self.cause, self.unstored = None, 0
                return
            n = self.unstored
            raise CacheUnavailableError(
                location,
                f"{self.why} ({self.cause}); {n} paid repl{'y' if n == 1 else 'ies'} could not be stored, and "
                f"no more calls are made on it: {self.remedy}, then resume",
                origin=origin,
            )

    def _free(self) -> int:
        try:
            return shutil.disk_usage(self.directory).free
        except OSError:
            return 0
