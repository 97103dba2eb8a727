"""#41 item 9: a papermill sweep stopped by SIGTERM or Ctrl-C ends its kernels with it: once the sweep process has
exited no kernel of it is alive and no further request reaches the provider (kernels used to go on sending
requests for a while after the sweep had exited)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from executions import FOREGROUND
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Reply

pytest.importorskip("papermill")

QUIET_S = 5.0
"""How long no request may arrive after the sweep has exited (a bound for the test, not a speed claim)."""


@pytest.fixture
def server() -> Iterator[FaultServer]:
    """Every reply a new valid Grade (so no prompt repeats and nothing is served from the cache), a little slow."""
    counter = itertools.count()

    def respond(body: dict[str, Any]) -> Reply:
        return Reply(json.dumps({"score": 3, "n": next(counter)}), delay_s=0.05)

    with FaultServer(responder=respond, model="gpt-4o-mini") as s:
        yield s


def template(tmp_path: Path) -> Path:
    """The run_cell notebook with the toy loop imported in the kernel."""
    import nbformat
    from nbformat import v4

    from promptlab.sweeps.notebook import run_cell_notebook

    nb = run_cell_notebook()
    nb.cells.insert(2, v4.new_code_cell("import toyloop"))
    for i, c in enumerate(nb.cells):
        c["id"] = f"c{i}"
    path = tmp_path / "template.ipynb"
    nbformat.write(nb, path)
    return path


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "twice"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGTERM, True)],
    ids=["sigterm", "sigint", "sigterm-then-sigkill"],
)
def test_a_stopped_papermill_sweep_ends_its_kernels(
    toy_dir: Path, server: FaultServer, tmp_path: Path, sig: signal.Signals, twice: bool
) -> None:
    """`twice`: SIGKILL once the sweep has said it stopped (a supervisor's grace period, `timeout -k`, ending
    it), which cut short the graceful kernel shutdown nbclient left for the interpreter's exit: the kernels went
    on with their cells until their parent poller noticed."""
    out = tmp_path / "out"
    exp = write_experiment(
        tmp_path,
        {
            "name": "kernels",
            "loops": ["toy"],
            "config": {"model": "openai/gpt-4o-mini", "max_iterations": 100},
            "grid": {"style": ["a", "b"]},
        },
        topics(2),
    )
    code = (
        FOREGROUND + "import sys, toyloop; from pathlib import Path; import promptlab.sweeps.papermill as p; "
        f"p.TEMPLATE = Path({str(template(tmp_path))!r}); from promptlab.cli import main; "
        f"sys.exit(main(['sweep', {str(exp)!r}, '--out', {str(out)!r}, '--executor', 'papermill', "
        "'--workers', '2', '--no-progress']))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]),
        "OPENAI_API_BASE": server.url,
        "OPENAI_API_KEY": "sk-test-kernels",
        "PROMPTLAB_CACHE_DIR": str(tmp_path / "cache"),
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # a hang guard only
    while server.requests < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]
    kernels = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert kernels, "the sweep runs its cells in kernel processes"
    said: list[str] = []

    def read_stderr() -> None:  # in a thread: EOF comes once every holder of the pipe, a kernel too, has exited
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, b""):
            said.append(line.decode())
            if twice and line.startswith(b"interrupted:"):
                proc.send_signal(signal.SIGKILL)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    proc.send_signal(sig)
    proc.wait(timeout=300)  # hang guards only: beside CPU hogs the kernels end slowly
    after_exit = server.requests
    assert not [pid for pid in kernels if alive(pid)], "a kernel outlived its sweep"
    time.sleep(QUIET_S)  # a bounded wait for a request that must not come  # noqa
    assert server.requests == after_exit
    reader.join(300)
    err = "".join(said)
    assert any(line.startswith("interrupted:") for line in said), err
    if not twice:
        assert proc.returncode == {signal.SIGTERM: 143, signal.SIGINT: 130}[sig], err
        assert "Traceback" not in err, err
