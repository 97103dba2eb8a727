"""Where the call cache is and opening it: `open_cache` (a directory or a URL, by the backends' registry), the
default location ($PROMPTLAB_CACHE, $PROMPTLAB_CACHE_DIR, `.promptlab/cache`), each cache opened once per process."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ...errors import ConfigError
from .backend import CACHE_URL_ENV, CacheBackend, opener_for, register_backend
from .disk import Cache
from .disk_errors import CacheUnwritableError
from .readonly import ReadOnlyCache

CACHE_ENV = "PROMPTLAB_CACHE_DIR"
DEFAULT_DIR = Path(".promptlab") / "cache"


def _open_directory(location: str, origin: str) -> CacheBackend:
    try:
        return Cache(location, origin=origin)
    except CacheUnwritableError as e:  # stored replies still replay; a new one is paid, returned, not stored
        return ReadOnlyCache(location, e.cause, why=e.why, remedy=e.remedy, origin=origin)


def _open_redis(location: str, origin: str) -> CacheBackend:
    from .redis import RedisCache  # lazy: the redis client loads only for a redis:// cache

    return RedisCache(location, origin=origin)


register_backend("file", _open_directory)
register_backend("redis", _open_redis)
register_backend("rediss", _open_redis)  # TLS
register_backend("unix", _open_redis)  # a Redis server's local socket

_open: dict[str, CacheBackend] = {}
_open_lock = threading.Lock()
_defaults: dict[tuple[str | None, str | None, str], CacheBackend] = {}
"""The default cache by ($PROMPTLAB_CACHE, $PROMPTLAB_CACHE_DIR, working directory): a call with the default
cache resolves its location (a few system calls) once per place, not once per call."""


def default_cache_dir() -> Path:
    """`$PROMPTLAB_CACHE_DIR` if set, else `.promptlab/cache` under the working directory."""
    env = os.environ.get(CACHE_ENV)
    if env and "://" in env:
        raise ConfigError(
            f"{CACHE_ENV} is a directory, not a URL ({env.split('://')[0]}://...); put a cache URL in {CACHE_URL_ENV}"
        )
    return Path(env).expanduser() if env else Path.cwd() / DEFAULT_DIR


_given: dict[tuple[str, str | None], CacheBackend] = {}
"""The cache by the location a call named (and the working directory, for a relative directory): resolving
a path costs a system call per component, which a call that names its cache would otherwise pay every time."""


def default_cache_location() -> tuple[str, str]:
    """The default cache's location and what set it: `$PROMPTLAB_CACHE` (a URL or a directory) if set, else
    `default_cache_dir()`."""
    url = os.environ.get(CACHE_URL_ENV, "").strip()
    if url:
        return url, CACHE_URL_ENV
    return str(default_cache_dir()), CACHE_ENV if os.environ.get(CACHE_ENV) else "the default cache directory"


def cache_location(location: str | os.PathLike[str] | None = None) -> str:
    """A cache location in a form every process and machine reads alike: a URL as given, a directory as an
    absolute path (default: `default_cache_location()`)."""
    text = default_cache_location()[0] if location is None else os.fspath(location)
    if text.startswith("file://"):
        text = text[len("file://") :]
    return text if "://" in text else str(Path(text).expanduser().resolve())


def open_cache(
    location: str | os.PathLike[str] | CacheBackend | None = None, *, origin: str | None = None
) -> CacheBackend:
    """The cache at a location, opened once per process: a directory (diskcache), or a URL such as
    redis://host:6379/0 (default: `$PROMPTLAB_CACHE`, else `default_cache_dir()`).

    Raises:
        ConfigError: a bad location (unknown scheme, malformed URL); the message says what set it.
        CacheUnavailableError: the cache's server cannot be reached.
        MissingDependencyError: a redis:// location without the `redis` package.
    """
    if isinstance(location, CacheBackend):
        return location
    if location is None:
        where = (os.environ.get(CACHE_URL_ENV), os.environ.get(CACHE_ENV), os.getcwd())
        known = _defaults.get(where)
        if known is None:
            text, source = default_cache_location()
            known = _defaults[where] = open_cache(text, origin=source)
        return known
    name = os.fspath(location)
    given = (name, None if "://" in name or os.path.isabs(name) else os.getcwd())
    known = _given.get(given)
    if known is not None:
        return known
    ident = cache_location(location)
    with _open_lock:
        if ident not in _open:
            source = origin or "the cache argument"
            _open[ident] = opener_for(ident, source)(ident, source)
        _given[given] = _open[ident]
        return _open[ident]


__all__ = ["CACHE_ENV", "DEFAULT_DIR", "cache_location", "default_cache_dir", "default_cache_location", "open_cache"]
