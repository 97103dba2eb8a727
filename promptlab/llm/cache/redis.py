"""The Redis call cache (`PROMPTLAB_CACHE=redis://host:port/db`): the disk cache's keys and JSON records on a
server that every machine of a sweep reaches.

Each record is one string value under `promptlab:v1:<sha256 key>`, written once with `SET NX`, so the first
record of a request wins across processes and machines exactly as the disk cache's `add` does. `clear`,
`stats` and `verify` touch only keys under that prefix: a shared server's other keys are never read or
removed (no FLUSHDB).

When the server goes away:
- a read raises `CacheUnavailableError` (an infrastructure failure: the run or cell is retried later). It is
  never taken for a miss, which would pay for every call again while nothing can be stored;
- a write after a paid reply logs a warning and the call returns its reply: the result is right and already
  paid for, only its replay is lost (the next call's read then stops the work with the error above).

The server should not evict keys (`maxmemory-policy noeviction`, Redis's default): an evicted record is a
miss and its call is paid again (never a wrong result).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from ...errors import CacheUnavailableError, ConfigError, MissingDependencyError
from ..call.completion import Completion
from .backend import CacheBackend, VerifyReport, encode_record, masked, record_problem

log = logging.getLogger("promptlab.llm.cache")
M = TypeVar("M", bound=BaseModel)

PREFIX = "promptlab:v1:"
"""Every key promptlab writes starts with this (v1: the record format of `promptlab.llm.cache.backend`)."""
BATCH = 500
"""Keys per SCAN step and per pipelined read or delete."""


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisCache(CacheBackend):
    """The call cache on a Redis server; thread-safe (a connection pool) and shared by every process that
    opens the same URL.

    Args:
        url: redis://[:password@]host:port/db, rediss://... (TLS) or unix:///path.sock?db=N.
        prefix: the key prefix; only keys under it are read, counted or removed.
        origin: what set the URL (e.g. 'PROMPTLAB_CACHE'), named in error messages.
        timeout_s: the socket timeout of each command and connection.

    Raises:
        MissingDependencyError: the `redis` package is not installed.
        ConfigError: a malformed URL.
        CacheUnavailableError: the server does not answer a PING.
    """

    def __init__(
        self, url: str, *, prefix: str = PREFIX, origin: str = "the cache argument", timeout_s: float = 5.0
    ) -> None:
        try:
            import redis  # lazy: only a redis:// cache needs the client
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError as e:
            raise MissingDependencyError("redis", "redis", f"the Redis call cache ({origin}={masked(url)})") from e
        self.location = masked(url)
        self.origin = origin
        self.prefix = prefix
        self._errors = redis.exceptions
        self._check_url(url)
        try:
            self._r: Any = redis.Redis.from_url(
                url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 2),
                retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
            )
        except ValueError as e:
            raise ConfigError(f"{origin}: {self.location} is not a usable Redis URL: {e}") from e
        try:
            self._r.ping()
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e
        self._full: str | None = None
        """Why a write was refused for lack of memory (Redis's OOM), once one was: the cache is then full."""
        self._unstored = 0
        self._warn_if_evicting()

    def _still_full(self) -> bool:
        """Whether the server is still at its memory limit (room made since: the cache goes on)."""
        try:
            memory = self._r.info("memory")
            limit, used = int(memory.get("maxmemory") or 0), int(memory.get("used_memory") or 0)
        except (self._errors.RedisError, ValueError):
            return True  # INFO refused: as it was
        if limit and used >= limit:
            return True
        self._full, self._unstored = None, 0
        return False

    def _warn_if_evicting(self) -> None:
        """One warning when the server evicts keys when full (an `allkeys-*` policy): an evicted record is a miss,
        paid again when asked again, and nothing says so when it happens."""
        try:
            policy = str(self._r.config_get("maxmemory-policy").get("maxmemory-policy") or "")
        except self._errors.RedisError:  # CONFIG may be refused (an ACL, a managed server): not known
            return
        if policy.startswith("allkeys-"):
            log.warning(
                "promptlab cache: %s has maxmemory-policy %s: when it is full it evicts records, and each evicted "
                "reply is paid again when asked again; give it maxmemory-policy noeviction (see docs/cache.md)",
                self.location,
                policy,
            )

    def _check_url(self, url: str) -> None:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 -- raises on a port that is not a number
        except ValueError as e:
            raise ConfigError(f"{self.origin}: {self.location} is not a usable Redis URL: {e}") from e
        db = parts.path.strip("/") if parts.scheme != "unix" else ""
        if db and not db.isdigit():
            raise ConfigError(
                f"{self.origin}: {self.location}: the database must be a number (redis://host:port/0), got {db!r}"
            )
        if parts.scheme != "unix" and not parts.hostname:
            raise ConfigError(f"{self.origin}: {self.location}: no host (redis://host:port/db)")

    def _unavailable(self, e: BaseException) -> CacheUnavailableError:
        cause = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}" if str(e) else type(e).__name__
        return CacheUnavailableError(self.location, cause, origin=self.origin)

    def _k(self, key: str) -> str:
        return self.prefix + key

    def _keys(self) -> Iterator[str]:
        """Every key under the prefix (SCAN, not KEYS: the server never blocks on a large database)."""
        try:
            for name in self._r.scan_iter(match=_glob_escape(self.prefix) + "*", count=BATCH):
                yield name.decode() if isinstance(name, bytes) else str(name)
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e

    def get(self, key: str, kind: type[M] = Completion) -> M | None:  # type: ignore[assignment]
        """The stored record for `key`, or None; a corrupt value is logged, dropped and missed. A server
        that cannot be reached, or that is full (a write was refused for lack of memory), raises
        CacheUnavailableError: paying for calls that cannot be stored would pay for them again on every resume."""
        if self._full is not None and self._still_full():
            raise CacheUnavailableError(
                self.location,
                f"it is full ({self._full}); {self._unstored} paid repl{'y' if self._unstored == 1 else 'ies'} "
                "could not be stored, and no more calls are made on it: free memory or raise maxmemory, then resume",
                origin=self.origin,
            )
        try:
            raw = self._r.get(self._k(key))
        except (self._errors.ConnectionError, self._errors.TimeoutError) as e:
            raise self._unavailable(e) from e
        except self._errors.ResponseError as e:  # e.g. WRONGTYPE: something else wrote this key
            log.warning("promptlab cache: entry %s unreadable (%s); treating as a miss", key[:12], e)
            self.discard(key)
            return None
        if raw is None:
            return None
        return self.decode(key, raw, kind)

    def add(self, key: str, record: BaseModel) -> bool:
        """Store a record unless one is stored (SET NX); True if this one was stored. A write that fails
        is logged and gives True: the caller keeps its (paid) record, it is just not replayable."""
        try:
            return bool(self._r.set(self._k(key), encode_record(record, key), nx=True))
        except self._errors.ResponseError as e:
            if not isinstance(e, self._errors.OutOfMemoryError) and "maxmemory" not in str(e):
                return self._not_stored(key, e)
            self._unstored += 1
            if self._full is None:  # said once; the next read stops the work (`get`)
                self._full = str(e).splitlines()[0][:200]
                log.warning(
                    "promptlab cache: %s is full (%s): a paid reply was not stored, and the next call on this cache "
                    "stops (free memory or raise maxmemory, then resume)",
                    self.location,
                    self._full,
                )
            return True
        except self._errors.RedisError as e:
            return self._not_stored(key, e)

    def _not_stored(self, key: str, e: BaseException) -> bool:
        log.warning(
            "promptlab cache: could not store %s in %s (%s); the reply is returned but not cached",
            key[:12],
            self.location,
            e,
        )
        return True

    def set(self, key: str, record: BaseModel) -> None:
        """Store a record, replacing any (the call path uses `add`)."""
        try:
            self._r.set(self._k(key), encode_record(record, key))
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e

    def discard(self, key: str) -> None:
        """Remove one entry, if it is there (a failure is logged: the entry is then missed again)."""
        try:
            self._r.delete(self._k(key))
        except self._errors.RedisError as e:
            log.warning("promptlab cache: could not remove %s from %s (%s)", key[:12], self.location, e)

    def _batches(self) -> Iterator[list[str]]:
        batch: list[str] = []
        for name in self._keys():
            batch.append(name)
            if len(batch) >= BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    def stats(self) -> dict[str, Any]:
        """Entries and value bytes under the prefix, the server's version and eviction policy."""
        entries = size = 0
        try:
            for batch in self._batches():
                pipe = self._r.pipeline(transaction=False)
                for name in batch:
                    pipe.strlen(name)
                # a key of another type under the prefix answers WRONGTYPE: it counts, with no bytes
                size += sum(n for n in pipe.execute(raise_on_error=False) if isinstance(n, int))
                entries += len(batch)
            version = str(self._r.info("server").get("redis_version", "?"))
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e
        return {
            "location": self.location,
            "entries": entries,
            "bytes": size,
            "prefix": self.prefix,
            "server": f"redis {version}",
            "corrupt_aside": [],
        }

    def clear(self) -> int:
        """Remove every key under the prefix (UNLINK, in batches); other keys on the server stay."""
        removed = 0
        try:
            for batch in self._batches():
                removed += int(self._r.unlink(*batch))
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e
        return removed

    def verify(self, *, fix: bool = False) -> VerifyReport:
        """Read back every entry under the prefix as a record; with `fix`, remove the bad ones."""
        report = VerifyReport()
        try:
            report.database = "ok" if self._r.ping() else "no answer to PING"
            for batch in self._batches():
                for name, raw in zip(batch, self._r.mget(batch), strict=True):
                    if raw is None:  # removed since the scan, or not a string (MGET gives nil for a hash)
                        kind = self._r.type(name)
                        if kind in (b"none", "none"):
                            continue
                        report.entries += 1
                        report.problems[name[len(self.prefix) :]] = f"not a string value (a Redis {kind!r})"
                        continue
                    report.entries += 1
                    problem = record_problem(name[len(self.prefix) :], raw)
                    if problem is None:
                        report.ok += 1
                    else:
                        report.problems[name[len(self.prefix) :]] = problem
        except self._errors.ResponseError as e:
            report.database = f"error: {e}"
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e
        if fix:
            for key in report.problems:
                self.discard(key)
        return report

    def __contains__(self, key: str) -> bool:
        try:
            return bool(self._r.exists(self._k(key)))
        except self._errors.RedisError as e:
            raise self._unavailable(e) from e

    def __len__(self) -> int:
        return sum(1 for _ in self._keys())

    def close(self) -> None:
        """Close the connection pool (the records stay on the server)."""
        self._r.close()
