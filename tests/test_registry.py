"""One registry shape (`promptlab.registry.Registry`): register by name or decorator, filled lazily from an
entry-point group on first lookup, an unknown name listing the known ones, a broken plugin named, not fatal."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from promptlab import registry as registry_module
from promptlab.errors import ConfigError
from promptlab.registry import Registry, UnknownNameError


def test_register_find_and_an_unknown_name_listing_the_known_ones() -> None:
    things: Registry[int] = Registry("thing", "promptlab.test_things")
    things.register("one", 1)

    @things.register("double")
    def double(x: int) -> int:
        return 2 * x

    assert things["one"] == 1 and things["double"] is double and sorted(things) == ["double", "one"]
    with pytest.raises(UnknownNameError, match=r"unknown thing 'three'; known things: double, one") as e:
        things["three"]
    assert isinstance(e.value, ConfigError) and isinstance(e.value, KeyError)
    assert things.find("three") is None and "three" not in things


def test_entry_points_load_lazily_on_first_lookup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An entry point that names a module registers what the module registers; one that names an object is
    registered under its own name; one that fails to load is reported by name, the others still load."""
    (tmp_path / "plugin_of_things.py").write_text(
        "from tests.test_registry import THINGS\nTHINGS.register('from_module', 10)\nVALUE = 20\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    group = "promptlab.test_lazy_things"
    eps = [
        EntryPoint("mod", "plugin_of_things", group),
        EntryPoint("by_object", "plugin_of_things:VALUE", group),
        EntryPoint("broken", "no_such_module_of_things:X", group),
    ]
    asked: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return eps if group == "promptlab.test_lazy_things" else []

    monkeypatch.setattr(registry_module, "entry_points", fake_entry_points)
    THINGS.__init__("thing", group)  # type: ignore[misc]
    assert asked == [] and "plugin_of_things" not in sys.modules  # nothing loads before a lookup
    assert THINGS["from_module"] == 10 and THINGS["by_object"] == 20
    assert asked == [group]
    with pytest.raises(UnknownNameError, match=r"the plugin 'broken' failed to load: no_such_module_of_things:X"):
        THINGS["broken"]
    assert "broken" in THINGS.failed()
    sys.modules.pop("plugin_of_things", None)


THINGS: Registry[int] = Registry("thing", "promptlab.test_lazy_things")


def test_the_call_path_finds_simulated_critics_without_importing_them_itself() -> None:
    """`llm` imports nothing from `critics`; a `sim/...` name still resolves to an instrument that makes no call
    (its provider registered by `promptlab.critics.simulated`, found through the registry), and a call to it is
    refused before anything is sent."""
    import subprocess

    code = (
        "import sys, promptlab as pl\n"
        "from promptlab.llm.providers.resolved import resolve_model\n"
        "assert 'promptlab.critics.simulated' not in sys.modules\n"
        "m = resolve_model('sim/noisy?sd=2')\n"
        "print(m.makes_calls, m.in_process, type(m.instrument).__name__, m.instrument.params['sd'])\n"
        "try:\n    pl.complete('sim/oracle', 'hi')\nexcept pl.ConfigError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, second = out.splitlines()[:2]
    assert first == "False True SimCritic 2.0"
    assert second.startswith("'sim/oracle' is a simulated critic") and "makes no model call" in second
