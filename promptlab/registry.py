"""Registries by name, one shape for every kind of plugin: loops, scorers, executors, cache backends, tools and
model providers.

A `Registry` maps names to things. Each has a public `register(name, value)` (also a decorator, `@register(name)`)
and is filled from three places, the first time a name is looked up (or the names are listed):

1. what promptlab registers itself, by importing its own plugin modules (`promptlab.plugins.OWN`);
2. what installed packages declare under the registry's Python entry-point group (`promptlab.loops`,
   `promptlab.scorers`, `promptlab.executors`, `promptlab.cache_backends`, `promptlab.tools`,
   `promptlab.models`), as papermill finds its engines and simonw/llm its plugins;
3. what code registers at any time (`register`).

An entry point names a module (importing it registers what it defines, with the registry's `register`) or an
object: one whose import registered nothing (as `define_loop` registers a loop) is registered under the entry
point's name. So a researcher's own package adds a loop or a scorer
that notebooks, the CLI, papermill kernels and Dask workers all find, with no import written anywhere. A plugin
that fails to load does not hide the others: a lookup of a name it would have given says why it failed.

An unknown name raises `UnknownNameError` (a ConfigError and a KeyError) listing the known names.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar, overload

from .errors import ConfigError
from .plugins import OWN

T = TypeVar("T")
V = TypeVar("V")


class UnknownNameError(ConfigError, KeyError):
    """A name no registry entry has; the message lists the known names (unquoted: PromptlabError's str)."""


class Registry(Mapping[str, T], Generic[T]):
    """Things of one kind by name, filled lazily from promptlab's own plugins and an entry-point group."""

    def __init__(
        self, kind: str, group: str, *, plural: str | None = None, adopt: Callable[[Any], T] | None = None
    ) -> None:
        self.kind = kind
        """What the registry holds, as messages name it ('loop', 'scorer', ...)."""
        self.group = group
        """The entry-point group that installed packages declare their plugins under."""
        self.plural = plural or f"{kind}s"
        self._adopt = adopt
        self._items: dict[str, T] = {}
        self._failed: dict[str, str] = {}
        self._loaded = False
        self._loading = False
        self._lock = threading.RLock()

    @overload
    def register(self, name: str) -> Callable[[V], V]: ...
    @overload
    def register(self, name: str, value: V) -> V: ...
    def register(self, name: str, value: Any = None) -> Any:
        """Register `value` under `name` (a later registration of the name replaces it); without a value, a
        decorator that registers what it decorates."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{self.kind} name: must be a non-empty string, got {name!r}")
        if value is None:

            def decorate(obj: V) -> V:
                self.register(name, obj)
                return obj

            return decorate
        with self._lock:
            self._items[name] = value
        return value

    def unregister(self, name: str) -> None:
        """Forget `name` (no error when it is not registered); for tests and notebooks."""
        with self._lock:
            self._items.pop(name, None)

    def load(self) -> None:
        """Import promptlab's own plugins and every installed entry point of the group, once."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:
                return  # a plugin module that looks a name up while it loads sees what is registered so far
            self._loading = True
            try:
                for module in OWN.get(self.group, ()):
                    importlib.import_module(module)
                for ep in entry_points(group=self.group):
                    self._load_entry_point(ep)
                self._loaded = True
            finally:
                self._loading = False

    def _load_entry_point(self, ep: Any) -> None:
        before = set(self._items)
        try:
            obj = ep.load()
        except Exception as e:  # one broken plugin must not hide the others
            self._failed[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
            return
        if isinstance(obj, ModuleType) or ep.name in self._items or set(self._items) != before:
            return  # it registered itself when imported (a module, or `define_loop`'s registration)
        try:  # an object that registered nothing: registered under the entry point's name
            self._items[ep.name] = self._adopt(obj) if self._adopt is not None else obj
        except Exception as e:
            self._failed[ep.name] = f"{ep.value}: not a {self.kind}: {e}"

    def find(self, name: str) -> T | None:
        """The entry registered as `name`, or None."""
        self.load()
        return self._items.get(name)

    def __getitem__(self, name: str) -> T:
        found = self.find(name)
        if found is None:
            raise UnknownNameError(self.unknown(name))
        return found

    def unknown(self, name: str) -> str:
        """The message for an unknown `name`: the known names, and any plugin that failed to load."""
        known = ", ".join(sorted(self._items)) or "none"
        message = f"unknown {self.kind} {name!r}; known {self.plural}: {known}"
        if name in self._failed:
            message += f" (the plugin {name!r} failed to load: {self._failed[name]})"
        elif self._failed:
            message += f" (plugins that failed to load: {', '.join(sorted(self._failed))})"
        return message

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(list(self._items))

    def __len__(self) -> int:
        self.load()
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def failed(self) -> dict[str, str]:
        """The plugins of the group that failed to load, with why (empty when all loaded)."""
        self.load()
        return dict(self._failed)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.group!r}: {len(self._items)} registered)"


__all__ = ["Registry", "UnknownNameError"]
