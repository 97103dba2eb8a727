"""A researcher's own package adds a loop and a scorer that every executor finds, with no change to promptlab and
no import in the experiment file: the package declares them under the `promptlab.loops` and `promptlab.scorers`
entry-point groups, is installed with pip from its wheel (into a directory the test puts on PYTHONPATH, so the shared venv is not
changed), and `promptlab sweep` runs it inline, in papermill kernels and on Dask workers."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from experiment_files import write_experiment

from promptlab.results.store import load

pytestmark = pytest.mark.slow  # pip, the CLI, papermill kernels and Dask workers as processes

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]

DIST = "promptlab_plugin_of_a_researcher-0.1"
ENTRY_POINTS = """[promptlab.loops]
shout_loop = shout_plugin.loop

[promptlab.scorers]
shouty = shout_plugin.scorers:Shouty
"""

LOOP = '''
"""A loop of a researcher's own: the target model answers each dev example once per iteration."""
import os

from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.define import define_loop


class ShoutConfig(LoopConfig):
    ROLES = ("generator",)


@define_loop("shout_loop", ShoutConfig, "a researcher's loop, found through an entry point")
async def arun_shout(ctx, task, cfg):
    """Write the prompt in capitals and record it."""
    with open(os.environ["SHOUT_LOG"], "a") as f:
        f.write(f"loop {os.getpid()}\\n")
    it = ctx.new_iteration()
    text, _ = await ctx.call("generator", "generate", f"Say it louder: {task.prompt}", iteration=it)
    it.candidate = (text or task.prompt).upper()
    ctx.decide(it, "FINISH", "one iteration")
    return ctx.finish("max_iterations", it.candidate)
'''

SCORERS = '''
"""A scorer of a researcher's own: 1 when the reply is written in capitals."""
import os
from typing import ClassVar

from promptlab.eval.scoring import Scorer


class Shouty(Scorer):
    kind: ClassVar[str] = "shouty"

    def score(self, output, target):
        with open(os.environ["SHOUT_LOG"], "a") as f:
            f.write(f"scorer {os.getpid()}\\n")
        return (1.0, "in capitals") if output.isupper() else (0.0, "not in capitals")
'''


def wheel(directory: Path) -> Path:
    """The researcher's package as a wheel (a zip with its files and its dist-info, entry points included:
    what a build backend makes; built here so the test needs no build backend and no index)."""
    files = {
        "shout_plugin/__init__.py": "",
        "shout_plugin/loop.py": textwrap.dedent(LOOP),
        "shout_plugin/scorers.py": textwrap.dedent(SCORERS),
        f"{DIST}.dist-info/METADATA": "Metadata-Version: 2.1\nName: promptlab-plugin-of-a-researcher\nVersion: 0.1\n",
        f"{DIST}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: a test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{DIST}.dist-info/entry_points.txt": ENTRY_POINTS,
    }

    def record_line(name: str, text: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        return f"{name},sha256={digest},{len(text.encode())}"

    record = "".join(record_line(n, t) + "\n" for n, t in files.items()) + f"{DIST}.dist-info/RECORD,,\n"
    path = directory / f"{DIST}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in {**files, f"{DIST}.dist-info/RECORD": record}.items():
            whl.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The researcher's package, installed by pip into a directory of its own (the shared venv is unchanged)."""
    root = tmp_path_factory.mktemp("plugin")
    target = root / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target)]
    subprocess.run([*pip, str(wheel(root))], check=True, capture_output=True, timeout=300)
    assert (target / "shout_plugin" / "loop.py").exists()
    assert (target / f"{DIST}.dist-info" / "entry_points.txt").read_text() == ENTRY_POINTS
    yield target


def tasks() -> list[dict[str, object]]:
    """A grounded task scored by the plugin's scorer (by kind name only)."""
    examples = [{"input": f"word {i}", "target": "LOUD"} for i in range(6)]
    return [
        {
            "id": "loud",
            "prompt": "Repeat: {input}",
            "goal": "Shout.",
            "examples": examples,
            "scorer": {"kind": "shouty"},
            "split": {"seed": 0, "dev": 3, "test": 3},
        }
    ]


@pytest.mark.parametrize("executor", ["inline", "papermill", "dask"])
def test_a_plugin_loop_and_scorer_run_on_every_executor(plugin_dir: Path, tmp_path: Path, executor: str) -> None:
    path = write_experiment(
        tmp_path,
        {
            "name": f"plugin-{executor}",
            "loops": ["shout_loop", "resample"],  # the plugin's loop, and a built-in one scored by its scorer
            "config": {"model": "fake/auto", "max_tokens": 32, "max_iterations": 1},
        },
        tasks(),
    )
    assert "import" not in path.read_text()
    log, out = tmp_path / "shout.log", tmp_path / "out"
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(
        PYTHONPATH=os.pathsep.join([str(plugin_dir), str(REPO)]),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        SHOUT_LOG=str(log),
    )
    args = [str(BIN / "promptlab"), "sweep", str(path), "--executor", executor, "--out", str(out)]
    args += ["--cache", str(tmp_path / "cache"), "--workers", "2"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"{stdout}\n{stderr}"
    runs = load(out).runs
    assert sorted(runs["loop"]) == ["resample", "shout_loop"] and (runs["n_errors"] == 0).all(), runs
    lines = [line.split() for line in log.read_text().splitlines()]
    loop_pids = {int(pid) for what, pid in lines if what == "loop"}
    scorer_pids = {int(pid) for what, pid in lines if what == "scorer"}
    assert loop_pids and scorer_pids  # the plugin's loop ran, and its scorer scored the built-in loop's candidates
    if executor == "inline":
        assert loop_pids | scorer_pids == {proc.pid}  # all in the command's own process
    else:  # in papermill kernels or Dask workers, which found the plugin themselves (the command itself only
        # checks the scorer on the task's targets before anything runs)
        assert proc.pid not in loop_pids and scorer_pids - {proc.pid}
