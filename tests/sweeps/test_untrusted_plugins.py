"""Plugins are untrusted code: an installed package whose loop plugins exit, raise KeyboardInterrupt or a
BaseException while imported, or register a loop promptlab already has (`creator_critic`), is named on stderr, and
a sweep of the built-in loop beside it finishes with promptlab's own loop. The built-in is replaced only when
PROMPTLAB_PLUGIN_OVERRIDES names it, and that is logged. The package is installed as pip installs one (its
dist-info with entry_points.txt in a directory on PYTHONPATH), the sweep run by the `promptlab` command."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from experiment_files import write_experiment

from promptlab.results.store import load

pytestmark = pytest.mark.slow  # the command in processes of its own

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
DIST = "promptlab_untrusted_plugins-0.1"
ENTRY_POINTS = """[promptlab.loops]
exits = untrusted_plugins.exits
interrupts = untrusted_plugins.interrupts
odd = untrusted_plugins.odd
shadow = untrusted_plugins.shadow
"""
SHADOW = '''
"""A loop that calls itself creator_critic: it records that it ran."""
import os

from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.define import define_loop


class ShadowConfig(LoopConfig):
    ROLES = ("generator",)


@define_loop("creator_critic", ShadowConfig, "not promptlab's creator_critic")
async def arun_shadow(ctx, task, cfg):
    """Record the run, then finish after one iteration."""
    with open(os.environ["SHADOW_LOG"], "a") as f:
        f.write("shadow ran\\n")
    it = ctx.new_iteration()
    it.candidate = task.prompt
    ctx.decide(it, "FINISH", "one iteration")
    return ctx.finish("max_iterations", it.candidate)
'''
MODULES = {
    "__init__": "",
    "exits": "import sys\nsys.exit(7)\n",
    "interrupts": "raise KeyboardInterrupt\n",
    "odd": "class Odd(BaseException):\n    pass\n\n\nraise Odd('a BaseException of its own')\n",
    "shadow": textwrap.dedent(SHADOW),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, installed: its modules and its dist-info (entry points included) in a site directory."""
    target = tmp_path_factory.mktemp("site")
    (target / "untrusted_plugins").mkdir()
    for name, text in MODULES.items():
        (target / "untrusted_plugins" / f"{name}.py").write_text(text)
    info = target / f"{DIST}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: promptlab-untrusted-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return target


def sweep(site: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    path = write_experiment(
        tmp_path,
        {"name": "beside", "loops": ["creator_critic"], "config": {"model": "fake/auto", "max_iterations": 1}},
    )
    out, log = tmp_path / "out", tmp_path / "shadow.log"
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    base.update(
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), LITELLM_LOCAL_MODEL_COST_MAP="True", SHADOW_LOG=str(log)
    )
    args = [str(BIN / "promptlab"), "sweep", str(path), "--out", str(out), "--cache", str(tmp_path / "cache")]
    proc = subprocess.run(args, cwd=tmp_path, env={**base, **env}, capture_output=True, text=True, timeout=600)
    return proc, out, log


def test_a_sweep_beside_plugins_that_exit_raise_or_shadow_finishes_and_names_them(site: Path, tmp_path: Path) -> None:
    proc, out, log = sweep(site, tmp_path)
    assert proc.returncode == 0, proc.stderr
    runs = load(out).runs
    assert list(runs["loop"]) == ["creator_critic"] and not log.exists()  # promptlab's own loop ran
    err = proc.stderr
    for name, why in [
        ("exits", "SystemExit: 7"),
        ("interrupts", "KeyboardInterrupt"),
        ("odd", "Odd: a BaseException of its own"),
    ]:
        assert f"plugin {name!r} (promptlab.loops) failed to load: {why}; left out" in err, err
    assert (
        "plugin 'shadow': untrusted_plugins.shadow: registers loop 'creator_critic', which is promptlab's own: "
        "refused, promptlab's own kept (to use the plugin's, set PROMPTLAB_PLUGIN_OVERRIDES=loops:creator_critic)"
    ) in err


def test_the_override_names_the_built_in_a_plugin_replaces_and_it_is_logged(site: Path, tmp_path: Path) -> None:
    proc, out, log = sweep(site, tmp_path, PROMPTLAB_PLUGIN_OVERRIDES="loops:creator_critic")
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == ["shadow ran"]  # the plugin's loop ran, as asked
    assert (
        "loop 'creator_critic' is now the plugin 'shadow''s (untrusted_plugins.shadow), replacing promptlab's own"
        in (proc.stderr)
    )
