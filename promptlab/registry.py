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

A plugin is untrusted code (docs/plugins.md): one that raises anything while imported (SystemExit included), hangs
past `PROMPTLAB_PLUGIN_IMPORT_TIMEOUT`, or registers a name promptlab (or an earlier plugin) already has is named and
costs only its own entries; a built-in is replaced only when `PROMPTLAB_PLUGIN_OVERRIDES` names it, and that is logged.

An unknown name raises `UnknownNameError` (a ConfigError and a KeyError) listing the known names.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar, overload

from .errors import ConfigError
from .plugins import OWN

T = TypeVar("T")
V = TypeVar("V")
log = logging.getLogger("promptlab.registry")

IMPORT_TIMEOUT_ENV = "PROMPTLAB_PLUGIN_IMPORT_TIMEOUT"
"""Seconds a plugin's import may take (default `IMPORT_TIMEOUT_S`); one that takes longer is named and left out."""
IMPORT_TIMEOUT_S = 60.0
OVERRIDES_ENV = "PROMPTLAB_PLUGIN_OVERRIDES"
"""The names a plugin may take over from promptlab (or an earlier plugin): comma-separated `<group>:<name>`, the
group without its `promptlab.` (`loops:creator_critic,scorers:exact`). Each takeover is logged."""


class UnknownNameError(ConfigError, KeyError):
    """A name no registry entry has; the message lists the known names (unquoted: PromptlabError's str)."""


@dataclass
class PluginImport:
    """One entry point being imported, in a thread of its own: what it registered, and whether it was given up on."""

    name: str
    """The entry point's name."""
    value: str
    """What it names ('package.module' or 'package.module:object')."""
    registered: list[tuple[Registry[Any], str, Any]] = field(default_factory=list)
    """(registry, name, the entry it replaced or None) of each registration it made, to undo them if it fails."""
    abandoned: bool = False
    """It failed or hung: any registration it still makes is ignored."""

    def undo(self) -> None:
        """Take back what it registered (a plugin that fails costs its own entries, and only those)."""
        self.abandoned = True
        for registry, name, previous in reversed(self.registered):
            registry.restore(name, previous)
        self.registered.clear()


_context = threading.local()
"""`_context.plugin`: the PluginImport the current thread is running (absent or None elsewhere)."""
_hung_modules: set[str] = set()
"""Modules whose import was given up on: importing one again would wait on its import lock for ever."""


def current_plugin() -> PluginImport | None:
    """The plugin whose import this thread is running, if any."""
    return getattr(_context, "plugin", None)


def import_timeout() -> float:
    """`PROMPTLAB_PLUGIN_IMPORT_TIMEOUT` in seconds (default 60).

    Raises:
        ConfigError: the variable is not a positive number.
    """
    raw = os.environ.get(IMPORT_TIMEOUT_ENV, "").strip()
    if not raw:
        return IMPORT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"{IMPORT_TIMEOUT_ENV}={raw[:40]!r}: must be a positive number of seconds")
    return value


def overrides() -> set[str]:
    """The `<group>:<name>` pairs of `PROMPTLAB_PLUGIN_OVERRIDES`."""
    return {part.strip() for part in os.environ.get(OVERRIDES_ENV, "").split(",") if part.strip()}


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
        self._origin: dict[str, str] = {}
        """name -> the plugin (entry point) that registered it; a name absent here is promptlab's or the user's."""
        self._failed: dict[str, str] = {}
        self._loaded = False
        self._loading = False
        self._lock = threading.RLock()
        """Held to change the entries, never while waiting on a plugin."""
        self._load_lock = threading.RLock()
        """Held while the registry fills itself."""

    @overload
    def register(self, name: str) -> Callable[[V], V]: ...
    @overload
    def register(self, name: str, value: V) -> V: ...
    def register(self, name: str, value: Any = None) -> Any:
        """Register `value` under `name` (a later registration of the name replaces it, except from a plugin's
        import: see `claim`); without a value, a decorator that registers what it decorates."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{self.kind} name: must be a non-empty string, got {name!r}")
        if value is None:

            def decorate(obj: V) -> V:
                self.register(name, obj)
                return obj

            return decorate
        plugin = current_plugin()
        with self._lock:
            if plugin is None:
                self._items[name] = value
                self._origin.pop(name, None)
            elif self.claim(plugin, name):
                plugin.registered.append((self, name, (self._items.get(name), self._origin.get(name))))
                self._items[name] = value
                self._origin[name] = plugin.name
        return value

    def claim(self, plugin: PluginImport, name: str) -> bool:
        """Whether `plugin`, while it is imported, may register `name`: a new name, or one it registered itself, or
        one `PROMPTLAB_PLUGIN_OVERRIDES` lets it take over (logged). Another name is refused, named in `failed()`
        and logged: a plugin never replaces promptlab's entry, nor another plugin's, unasked."""
        if plugin.abandoned:
            return False
        owner = self._origin.get(name)
        if name not in self._items or owner == plugin.name:
            return True
        whose = f"the plugin {owner!r}'s" if owner is not None else "promptlab's own"
        key = f"{self.group.removeprefix('promptlab.')}:{name}"
        if key in overrides():
            log.warning(
                "promptlab: %s %r is now the plugin %r's (%s), replacing %s, as %s=%s asks",
                self.kind, name, plugin.name, plugin.value, whose, OVERRIDES_ENV, key,
            )  # fmt: skip
            return True
        self._failed.setdefault(
            plugin.name,
            f"{plugin.value}: registers {self.kind} {name!r}, which is {whose}: refused, {whose} kept (to use the "
            f"plugin's, set {OVERRIDES_ENV}={key})",
        )
        log.warning("promptlab: plugin %r: %s", plugin.name, self._failed[plugin.name])
        return False

    def restore(self, name: str, previous: tuple[Any, str | None]) -> None:
        """Put back what `name` held before a failed plugin registered it (nothing: forget it)."""
        value, origin = previous
        with self._lock:
            if value is None:
                self._items.pop(name, None)
                self._origin.pop(name, None)
                return
            self._items[name] = value
            if origin is None:
                self._origin.pop(name, None)
            else:
                self._origin[name] = origin

    def unregister(self, name: str) -> None:
        """Forget `name` (no error when it is not registered); for tests and notebooks."""
        with self._lock:
            self._items.pop(name, None)
            self._origin.pop(name, None)

    def load(self) -> None:
        """Import promptlab's own plugins and every installed entry point of the group, once."""
        if self._loaded or (self._loading and current_plugin() is not None):
            return  # a plugin that looks a name up while it is imported sees what is registered so far
        with self._load_lock:
            if self._loaded or self._loading:
                return  # the same: a module of promptlab's own, looking a name up while it loads
            self._loading = True
            try:
                self._load_own()
                for ep in entry_points(group=self.group):
                    self._load_entry_point(ep)
                self._loaded = True
            finally:
                self._loading = False

    def _load_own(self) -> None:
        """Import promptlab's own plugin modules, as promptlab (not as the plugin whose import looked a name up)."""
        plugin = current_plugin()
        _context.plugin = None
        try:
            for module in OWN.get(self.group, ()):
                importlib.import_module(module)
        finally:
            _context.plugin = plugin

    def _load_entry_point(self, ep: Any) -> None:
        before = set(self._items)
        plugin = PluginImport(ep.name, ep.value)
        problem, obj = import_plugin(ep, plugin)
        if problem is not None:
            plugin.undo()
            self._failed[ep.name] = f"{ep.value}: {problem}"
            log.warning("promptlab: plugin %r (%s) failed to load: %s; left out", ep.name, self.group, problem)
            return
        if isinstance(obj, ModuleType) or set(self._items) != before or plugin.registered:
            return  # it registered itself when imported (a module, or `define_loop`'s registration)
        try:  # an object that registered nothing: registered under the entry point's name
            adopted = self._adopt(obj) if self._adopt is not None else obj
        except Exception as e:
            self._failed[ep.name] = f"{ep.value}: not a {self.kind}: {e}"
            return
        _context.plugin = plugin
        try:
            self.register(ep.name, adopted)
        finally:
            _context.plugin = None

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


def import_plugin(ep: Any, plugin: PluginImport) -> tuple[str | None, Any]:
    """(None, what the entry point names), or (why it failed, None): it raised anything (SystemExit and
    KeyboardInterrupt included), or its import took longer than `import_timeout()`. The import runs in a thread of its
    own, so a plugin that hangs costs the wait, and a real Ctrl-C still reaches the main thread."""
    module = str(ep.value).split(":")[0].strip()
    hung = next((m for m in _hung_modules if module == m or module.startswith(m + ".")), None)
    if hung is not None:
        return f"its module {hung} hung on import before; not imported again", None
    timeout = import_timeout()
    box: dict[str, Any] = {}

    def run() -> None:
        _context.plugin = plugin
        try:
            box["obj"] = ep.load()
        except BaseException as e:  # noqa: BLE001 -- a plugin is untrusted: whatever it raises is its failure
            box["error"] = e
        finally:
            _context.plugin = None

    worker = threading.Thread(target=run, name=f"promptlab-plugin-{ep.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        plugin.abandoned = True
        _hung_modules.add(module)
        return f"its import did not finish within {timeout:g} s ({IMPORT_TIMEOUT_ENV}); given up on", None
    error = box.get("error")
    if error is not None:
        said = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return f"{type(error).__name__}{': ' + said if said else ''}", None
    return None, box.get("obj")


__all__ = [
    "IMPORT_TIMEOUT_ENV",
    "IMPORT_TIMEOUT_S",
    "OVERRIDES_ENV",
    "PluginImport",
    "Registry",
    "UnknownNameError",
    "current_plugin",
    "import_plugin",
    "import_timeout",
    "overrides",
]
