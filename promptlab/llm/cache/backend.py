"""What every call-cache backend offers, the JSON record format they all store, and the registry that picks a
backend from a cache location's URL scheme (a plain path is a directory: the diskcache backend).

A backend maps a sha256 request key (`promptlab.llm.cache.cache_key`) to one JSON record: a `Completion`, or a
provider `Reply` for structured calls. Records are written once (`add`): the first record of a request is
the original call's and is never replaced.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from ...errors import ConfigError
from ...registry import Registry
from ...sanitize import is_secret_name
from ..call.completion import Completion

log = logging.getLogger("promptlab.llm.cache")

M = TypeVar("M", bound=BaseModel)

CACHE_URL_ENV = "PROMPTLAB_CACHE"
"""The default cache's location: a directory or a URL such as redis://host:6379/0 (wins over PROMPTLAB_CACHE_DIR)."""


@dataclass
class VerifyReport:
    """What a backend's `verify` found."""

    entries: int = 0
    """Entries checked."""
    ok: int = 0
    """Entries that read back as a valid record."""
    problems: dict[str, str] = field(default_factory=dict)
    """Key -> what is wrong with that entry (removed when `fix=True`)."""
    database: str = "ok"
    """The store's own health check ('ok' or its first complaint)."""
    moved_aside: list[str] = field(default_factory=list)
    """Database files found corrupt and copied aside while the cache was open, each with what was wrong."""

    @property
    def healthy(self) -> bool:
        """True when every entry read back, the store's check passed and nothing was copied aside."""
        return not self.problems and self.database == "ok" and not self.moved_aside


RECORD_KEY = "cache_key"
"""The field of a stored provider reply that holds the key it was stored under (a Completion has its own `key`)."""


def encode_record(record: BaseModel, key: str) -> str:
    """The stored JSON of a record under `key` (sorted keys; a Completion without what one particular call
    spent). Every record carries its request's key (a Completion its own `key`, a provider reply `cache_key`),
    so a record found under another key is never a hit."""
    if isinstance(record, Completion):
        data = record.stored()
    else:
        data = {**record.model_dump(mode="json"), RECORD_KEY: key}
    return json.dumps(data, sort_keys=True)


def stored_key(data: dict[str, Any]) -> str | None:
    """The key a decoded record says it was stored under (None for a record written before records carried it)."""
    value = data.get(RECORD_KEY, data.get("key"))
    return value if isinstance(value, str) and value else None


def record_problem(key: str, raw: str | bytes) -> str | None:
    """What is wrong with the value stored under `key` (None when it is a valid promptlab record of that key)."""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise ValueError("not a promptlab record (no 'text')")
        if "key" in data:  # a Completion (provider replies have no key of their own)
            Completion.model_validate(data)
    except Exception as e:
        return f"bad record: {str(e).splitlines()[0][:200]}"
    found = stored_key(data)
    if found is not None and found != key:
        return f"stored under the wrong key: the record is for {found[:16]}..."
    return None


class CacheBackend(abc.ABC):
    """A call cache: sha256 keys to JSON records, written once, shared by threads and processes."""

    location: str
    """Where the records live (a directory, or a URL with any password masked), for messages."""

    @abc.abstractmethod
    def get(self, key: str, kind: type[M] = Completion) -> M | None:  # type: ignore[assignment]
        """The stored record for `key` as `kind`, or None; a corrupt entry is logged, dropped and missed.
        A store that cannot be reached raises `CacheUnavailableError` (never a miss)."""

    @abc.abstractmethod
    def add(self, key: str, record: BaseModel) -> bool:
        """Store a record unless one is stored already (atomic across processes). False only when another
        record was found; a write the store could not make is logged and gives True (this record stands)."""

    @abc.abstractmethod
    def set(self, key: str, record: BaseModel) -> None:
        """Store a record, replacing any (the call path uses `add`)."""

    @abc.abstractmethod
    def discard(self, key: str) -> None:
        """Remove one entry, if it is there."""

    @abc.abstractmethod
    def stats(self) -> dict[str, Any]:
        """At least 'location', 'entries' and 'bytes' (the stored values' size)."""

    @abc.abstractmethod
    def clear(self) -> int:
        """Remove every promptlab entry (and nothing else); returns how many there were."""

    @abc.abstractmethod
    def verify(self, *, fix: bool = False) -> VerifyReport:
        """Read back every entry as a record; with `fix`, remove the bad ones."""

    @abc.abstractmethod
    def __contains__(self, key: str) -> bool: ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections (the records stay)."""

    def decode(self, key: str, raw: str | bytes, kind: type[M]) -> M | None:
        """A stored value read back as `kind`; one that does not validate, or that says it belongs to another
        key, is logged, dropped and missed (never served as a hit)."""
        try:
            data = json.loads(raw)
            found = stored_key(data) if isinstance(data, dict) else None
            if found is not None and found != key:
                log.warning(
                    "promptlab cache: entry %s holds the record of %s (stored under the wrong key); treating as a miss",
                    key[:12],
                    found[:12],
                )
                self.discard(key)
                return None
            if isinstance(data, dict):
                data.pop(RECORD_KEY, None)
            return kind.model_validate(data)
        except Exception as e:
            log.warning("promptlab cache: entry %s corrupted (%s); treating as a miss", key[:12], e)
            self.discard(key)
            return None


Opener = Callable[[str, str], CacheBackend]
"""Opens a backend from (location, origin): origin names where the location came from, for error messages."""

BACKENDS: Registry[Opener] = Registry("cache backend", "promptlab.cache_backends")
"""URL scheme -> opener; 'file' is also used for plain paths. promptlab's own (`promptlab.llm.cache.location`),
those installed packages declare under the `promptlab.cache_backends` entry-point group (named by scheme: an
opener, or a module that registers some), and any registered since."""


def register_backend(scheme: str, opener: Opener) -> Opener:
    """Make `scheme://...` cache locations open with `opener`."""
    return BACKENDS.register(scheme.lower(), opener)


def scheme_of(location: str) -> str:
    """The URL scheme of a cache location; 'file' for a plain path."""
    head, sep, _ = location.partition("://")
    if not sep:
        return "file"
    return head.lower()


def masked(location: str) -> str:
    """A cache location fit to print: a URL's password replaced by '***'."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in location:
        return location
    try:
        parts = urlsplit(location)
        if parts.password is None:
            return location
        user = parts.username or ""
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return location.split("://", 1)[0] + "://***"


def holds_secret(location: str) -> bool:
    """Whether a cache location carries a secret: a URL password, or a query parameter with a secret's name
    (`?password=...`); such a location travels to other processes in the environment, never in a file."""
    from urllib.parse import parse_qsl, urlsplit

    if "://" not in location:
        return False
    if masked(location) != location:
        return True
    try:
        query = parse_qsl(urlsplit(location).query)
    except ValueError:
        return True
    return any(is_secret_name(name) for name, _ in query)


def opener_for(location: str, origin: str) -> Opener:
    """The registered opener for a location; an unknown scheme is a ConfigError listing the known ones."""
    scheme = scheme_of(location)
    opener = BACKENDS.find(scheme)
    if opener is None:
        known = ", ".join(f"{s}://" for s in sorted(BACKENDS))
        raise ConfigError(
            f"{origin}: cache location {masked(location)!r} has an unknown scheme {scheme!r}; "
            f"known: {known} or a directory path"
        )
    return opener
