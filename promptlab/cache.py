"""The on-disk call cache (diskcache): canonical keys, JSON values, corruption treated as a miss."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from .completion import Completion

log = logging.getLogger("promptlab.cache")
M = TypeVar("M", bound=BaseModel)

CACHE_ENV = "PROMPTLAB_CACHE_DIR"
DEFAULT_DIR = Path(".promptlab") / "cache"

# Request fields that never enter a key nor the disk: secrets and where the secret is sent.
SECRET_FIELDS = frozenset(
    {"api_key", "api_base", "base_url", "extra_headers", "headers", "organization", "api_version",
     "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "vertex_credentials"}
)


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of a request, secrets removed."""
    clean = {k: v for k, v in payload.items() if k not in SECRET_FIELDS}
    blob = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Cache:
    """A completion cache in one directory, safe to share between threads and processes."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        import diskcache  # lazy: keeps `import promptlab` light

        self.directory = Path(directory).expanduser().resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        # diskcache commits each set in one SQLite transaction: a reader never sees half an entry.
        self._dc = diskcache.Cache(str(self.directory), size_limit=2**34, eviction_policy="none")

    def get(self, key: str, kind: type[M] = Completion) -> M | None:  # type: ignore[assignment]
        """The stored record for `key` (a Completion unless `kind` says otherwise), or None; a corrupted
        entry is logged, dropped and missed."""
        try:
            raw = self._dc.get(key, default=None)
        except Exception as e:  # an unreadable row or value file
            log.warning("promptlab cache: entry %s unreadable (%s); treating as a miss", key[:12], e)
            self._discard(key)
            return None
        if raw is None:
            return None
        try:
            return kind.model_validate_json(raw)
        except Exception as e:
            log.warning("promptlab cache: entry %s corrupted (%s); treating as a miss", key[:12], e)
            self._discard(key)
            return None

    def set(self, key: str, record: BaseModel) -> None:
        """Store a completion or a provider reply (errors are never stored)."""
        data = record.stored() if isinstance(record, Completion) else record.model_dump(mode="json")
        self._dc.set(key, json.dumps(data, sort_keys=True))

    def _discard(self, key: str) -> None:
        try:
            self._dc.delete(key)
        except Exception:  # the same corruption may stop the delete; the next set overwrites it
            pass

    def stats(self) -> dict[str, Any]:
        """Entries, bytes on disk and the directory."""
        return {"directory": str(self.directory), "entries": len(self._dc), "bytes": self._dc.volume()}

    def clear(self) -> int:
        """Remove every entry; returns how many there were."""
        return int(self._dc.clear())

    def __contains__(self, key: str) -> bool:
        return key in self._dc

    def __len__(self) -> int:
        return len(self._dc)

    def close(self) -> None:
        """Close the SQLite connections (the directory stays)."""
        self._dc.close()


_open: dict[Path, Cache] = {}
_open_lock = threading.Lock()


def default_cache_dir() -> Path:
    """`$PROMPTLAB_CACHE_DIR` if set, else `.promptlab/cache` under the working directory."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.cwd() / DEFAULT_DIR


def open_cache(directory: str | os.PathLike[str] | None = None) -> Cache:
    """The Cache for a directory (default: `default_cache_dir()`), opened once per process."""
    path = Path(directory if directory is not None else default_cache_dir()).expanduser().resolve()
    with _open_lock:
        if path not in _open:
            _open[path] = Cache(path)
        return _open[path]
