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


# plugins are untrusted code ------------------------------------------------------------------------------------
UNTRUSTED: Registry[int] = Registry("thing", "promptlab.test_untrusted_things")
"""The registry the untrusted plugins below register into; "builtin" stands for an entry promptlab has itself."""


def untrusted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, plugins: dict[str, str]) -> Registry[int]:
    """UNTRUSTED, emptied, with "builtin" registered as promptlab registers its own, and one entry point per plugin:
    name -> the source of its module (`plugin_<name>`), which `from tests.test_registry import UNTRUSTED`."""
    group = UNTRUSTED.group
    for name, source in plugins.items():
        (tmp_path / f"plugin_{name}.py").write_text(f"from tests.test_registry import UNTRUSTED\n{source}\n")
        monkeypatch.delitem(sys.modules, f"plugin_{name}", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint(name, f"plugin_{name}", group) for name in plugins]
    eps.append(EntryPoint("an_object", "plugin_good:VALUE", group))  # registered under its name
    monkeypatch.setattr(registry_module, "entry_points", lambda *, group: eps if group == UNTRUSTED.group else [])
    UNTRUSTED.__init__("thing", group)  # type: ignore[misc]
    UNTRUSTED.register("builtin", 1)
    return UNTRUSTED


GOOD = "UNTRUSTED.register('good', 2)\nVALUE = 3"


@pytest.mark.parametrize(
    ("raises", "named"),
    [
        ("import sys\nsys.exit(7)", "SystemExit: 7"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("class Odd(BaseException):\n    pass\nraise Odd('not an Exception')", "Odd: not an Exception"),
        ("raise GeneratorExit", "GeneratorExit"),
    ],
)
def test_a_plugin_raising_anything_on_import_is_named_and_costs_only_its_own_entries(
    raises: str, named: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    things = untrusted(monkeypatch, tmp_path, {"bad": f"UNTRUSTED.register('partial', 9)\n{raises}", "good": GOOD})
    assert sorted(things) == ["an_object", "builtin", "good"]  # its half-made 'partial' taken back
    assert things.failed() == {"bad": f"plugin_bad: {named}"}
    with pytest.raises(UnknownNameError, match=rf"the plugin 'bad' failed to load: plugin_bad: {named}"):
        things["bad"]
    assert f"plugin 'bad' ({UNTRUSTED.group}) failed to load: {named}; left out" in caplog.text


def test_a_plugin_hanging_on_import_is_given_up_on_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bound is PROMPTLAB_PLUGIN_IMPORT_TIMEOUT; a registration the hung import makes once it goes on is ignored,
    and its module is not imported again (that would wait on its import lock)."""
    import threading

    monkeypatch.setenv("PROMPTLAB_PLUGIN_IMPORT_TIMEOUT", "0.5")
    things = untrusted(
        monkeypatch,
        tmp_path,
        {
            "stuck": "from tests.test_registry import RELEASE\nRELEASE.wait()\nUNTRUSTED.register('late', 5)",
            "good": GOOD,
        },
    )
    try:
        assert sorted(things) == ["an_object", "builtin", "good"]
        assert things.failed()["stuck"] == "plugin_stuck: its import did not finish within 0.5 s " + (
            "(PROMPTLAB_PLUGIN_IMPORT_TIMEOUT); given up on"
        )
        again = registry_module.import_plugin(
            EntryPoint("x", "plugin_stuck:Y", "g"), registry_module.PluginImport("x", "y")
        )
        assert again == ("its module plugin_stuck hung on import before; not imported again", None)
    finally:
        RELEASE.set()
        for thread in threading.enumerate():
            if thread.name == "promptlab-plugin-stuck":
                thread.join()
        registry_module._hung_modules.discard("plugin_stuck")
    assert "late" not in things and "plugin_stuck" in sys.modules  # it finished importing: its entry ignored


RELEASE = __import__("threading").Event()
"""Lets the hanging plugin's import go on once the test is done with it."""


def test_a_plugin_registering_a_name_promptlab_has_is_refused_and_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    things = untrusted(monkeypatch, tmp_path, {"shadow": "UNTRUSTED.register('builtin', 666)", "good": GOOD})
    assert things["builtin"] == 1 and things["good"] == 2
    said = things.failed()["shadow"]
    assert said.startswith("plugin_shadow: registers thing 'builtin', which is promptlab's own: refused")
    assert "PROMPTLAB_PLUGIN_OVERRIDES=test_untrusted_things:builtin" in said
    assert "plugin 'shadow'" in caplog.text and "refused" in caplog.text


def test_an_object_entry_point_named_as_a_built_in_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    things = untrusted(monkeypatch, tmp_path, {"plain": "VALUE = 4"})
    monkeypatch.setattr(
        registry_module,
        "entry_points",
        lambda *, group: [EntryPoint("builtin", "plugin_plain:VALUE", group)] if group == things.group else [],
    )
    things.__init__("thing", things.group)  # type: ignore[misc]
    things.register("builtin", 1)
    assert things["builtin"] == 1 and "which is promptlab's own: refused" in things.failed()["builtin"]


def test_a_plugin_replaces_a_built_in_only_when_the_override_names_it_and_that_is_logged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PROMPTLAB_PLUGIN_OVERRIDES", "test_untrusted_things:builtin, loops:other")
    things = untrusted(monkeypatch, tmp_path, {"shadow": "UNTRUSTED.register('builtin', 666)"})
    assert things["builtin"] == 666 and things.failed() == {}
    assert (
        "thing 'builtin' is now the plugin 'shadow''s (plugin_shadow), replacing promptlab's own, as "
        "PROMPTLAB_PLUGIN_OVERRIDES=test_untrusted_things:builtin asks"
    ) in caplog.text


def test_user_code_still_replaces_a_name_it_registers_itself() -> None:
    things: Registry[int] = Registry("thing", "promptlab.test_user_things")
    things.register("x", 1)
    things.register("x", 2)
    assert things["x"] == 2
