"""The call cache: keys (`keys`), the backend interface and its registry by URL scheme (`backend`), the
directory backend (`disk`), the Redis backend (`redis`) and where the default cache is (`location`)."""

from __future__ import annotations

from .backend import CacheBackend, VerifyReport
from .disk import Cache
from .keys import SECRET_FIELDS, cache_key
from .location import cache_location, default_cache_dir, default_cache_location, open_cache

__all__ = [
    "Cache",
    "CacheBackend",
    "SECRET_FIELDS",
    "VerifyReport",
    "cache_key",
    "cache_location",
    "default_cache_dir",
    "default_cache_location",
    "open_cache",
]
