"""An installed promptlab is visible to a type checker: a user's mypy, run in a directory of its own (outside the
checkout, nothing on MYPYPATH or PYTHONPATH), finds the package through the install itself and reveals
`pl.complete`'s real signature, not `Any`. scripts/setup installs in editable *compat* mode for this
(setuptools' default editable finder is an import hook no type checker follows)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # mypy as a process, over the package's sources

MYPY = Path(sys.executable).parent / "mypy"


@pytest.mark.skipif(not MYPY.exists(), reason=f"mypy is not installed in {MYPY.parent}")
def test_a_users_mypy_outside_the_checkout_sees_the_signatures(tmp_path: Path) -> None:
    user = tmp_path / "analysis.py"
    user.write_text(
        "import promptlab as pl\n\nreveal_type(pl.complete)\nreveal_type(pl.run_p3ro)\nreveal_type(pl.sweep)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    proc = subprocess.run(
        [str(MYPY), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", user.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert "Cannot find implementation or library stub" not in out, out
    complete, loop, sweep = [line.partition("Revealed type is ")[2] for line in out.splitlines() if "Revealed" in line]
    assert complete.startswith('"def (model: str, prompt: str | list[dict[str, Any]], *, schema: '), complete
    assert "promptlab.llm.call.completion.Completion" in complete
    assert loop.startswith('"promptlab.loops.runtime.define.LoopEntry[promptlab.loops.p3ro.config.P3ROConfig'), loop
    assert sweep.startswith('"def (') and sweep != '"Any"', sweep
