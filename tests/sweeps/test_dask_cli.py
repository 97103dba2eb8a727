"""The multi-machine front door, driven as a user drives it: a `dask scheduler` and two `dask worker` processes
started from the command line (each with only the environment a worker on another machine would have), and
`promptlab sweep EXP --executor dask --scheduler tcp://...` run as a command (docs/many-machines.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from executions import RUN_ORDER, WALL_CLOCK, comparable, killed_and_seen, worker_owning
from experiment_files import write_experiment
from fault_server import FaultServer, Reply, free_port
from overlap import eventually

from promptlab.llm.call.settings import DEFAULT_SETTINGS
from promptlab.results.store import cell_status, load, read_runs
from promptlab.sweeps.experiment import load_experiment
from promptlab.sweeps.run import sweep

pytest.importorskip("distributed")

BIN = Path(sys.executable).parent
"""The venv's bin dir: `dask` and `promptlab` as installed."""
DASK, PROMPTLAB = BIN / "dask", BIN / "promptlab"
REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "LOOPBACK_KEY"
"""The API key variable every machine of the test cluster has (the experiment's alias names it)."""
SUMMARY = re.compile(
    r"sweep (?P<name>\S+) \(dask\): (?P<cells>\d+) cells: (?P<done>\d+) done, (?P<failed>\d+) "
    r"failed, (?P<skipped>\d+) skipped \(finished before\) in [\d.]+ s; (?P<calls>\d+) calls "
    r"\((?P<hits>\d+) cached\), (?P<tokens>\d+) tokens, cost (?P<cost>\S+); results in (?P<out>.+)"
)

pytestmark = [
    pytest.mark.slow,  # a scheduler, workers and the CLI as processes
    pytest.mark.skipif(
        not DASK.exists() or not PROMPTLAB.exists(),
        reason=f"the `dask` and `promptlab` commands are not installed in {BIN}",
    ),
]


def machine_env(**extra: str) -> dict[str, str]:
    """A process's environment on a machine of its own: PATH and HOME, promptlab importable, offline litellm
    prices, and `extra`; nothing else of this test's environment (no cache location, no endpoint, no key)."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True", **extra)
    return env


@dataclass
class Cluster:
    """A scheduler and its workers, each a command in its own process group."""

    address: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        log = cwd / "log.txt"
        with log.open("wb") as f:
            self.procs.append(
                subprocess.Popen(
                    [str(DASK), *args], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
        self.logs.append(log)

    def tail(self) -> str:
        return "\n".join(
            f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]) for log in self.logs
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the workers (nanny and worker process), then the scheduler
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """`dask scheduler` on a free loopback port and 2 `dask worker`s of one thread each (PROMPTLAB_LIMIT_SHARE=2,
    the key of the loopback endpoint), each in a working dir of its own; all killed at the end."""
    from distributed import Client

    root = tmp_path_factory.mktemp("cluster")
    port = free_port()
    c = Cluster(f"tcp://127.0.0.1:{port}")
    try:
        c.start(
            [
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
                "--dashboard-address",
                "127.0.0.1:0",
            ],  # its HTTP endpoints (health, metrics) on a free port
            root / "scheduler",
            machine_env(),
        )
        for i in range(2):
            c.start(
                [
                    "worker",
                    c.address,
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--name",
                    f"w{i}",
                    "--local-directory",
                    str(root / f"worker{i}" / "scratch"),
                ],
                root / f"worker{i}",
                machine_env(PROMPTLAB_LIMIT_SHARE="2", **{KEY_ENV: "sk-loopback"}),
            )
        try:
            with Client(c.address, timeout="30s") as client:
                client.wait_for_workers(2, timeout=60)
        except Exception as e:  # noqa: BLE001 -- say why, with the processes' logs
            pytest.fail(f"the cluster at {c.address} did not come up with 2 workers: {e!r}\n{c.tail()}")
        yield c
    finally:
        c.stop()


def run_cli(*args: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`promptlab sweep ARGS` as a command, from `cwd` (the submitting machine)."""
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(PROMPTLAB), "sweep", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The summary line the command printed, by field."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    match = SUMMARY.search(proc.stdout)
    assert match, proc.stdout
    return match.groupdict()


def poem_experiment(tmp_path: Path, spec: dict[str, Any], n_tasks: int = 2) -> Path:
    # distinct goals: no two runs make the same request, so paid calls can be counted per run
    return write_experiment(
        tmp_path,
        spec,
        [
            {"id": f"t{i}", "prompt": f"Write a short poem about {w}.", "goal": f"A haiku about {w}."}
            for i, w in enumerate(["rain", "salt", "iron", "moss"][:n_tasks])
        ],
    )


def assert_all_ok(path: Path, out: Path) -> int:
    """Every cell of the experiment has an ok status.json in `out`; returns the number of cells."""
    cells = load_experiment(path, check_models=False).cells()
    statuses = {c.cell_id: (cell_status(out, c.cell_id) or {}).get("status") for c in cells}
    assert set(statuses.values()) == {"ok"}, statuses
    return len(cells)


def test_the_cli_on_a_scheduler_and_workers_gives_the_inline_results(cluster: Cluster, tmp_path: Path) -> None:
    path = poem_experiment(
        tmp_path,
        {
            "name": "dkcli",
            "loops": ["p3ro", "creator_critic"],
            "config": {"model": "fake/auto", "max_tokens": 64},
            "grid": {"max_iterations": [1, 2]},
        },
    )
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = (str(path), "--executor", "dask", "--scheduler", cluster.address, "--out", str(out), "--cache", str(cache))
    first = summary(run_cli(*args, cwd=tmp_path / "submit", env=machine_env()))
    assert (first["cells"], first["done"], first["failed"], first["skipped"]) == ("4", "4", "0", "0"), first
    assert Path(first["out"]) == out
    assert assert_all_ok(path, out) == 4
    runs = load(out).runs
    assert len(runs) == 8 and (runs["n_errors"] == 0).all()
    # the printed figures are the runs' totals
    assert int(first["calls"]) == int(runs["calls"].sum()) > 0
    assert int(first["hits"]) == int(runs["cache_hits"].sum())
    assert int(first["tokens"]) == int(runs["spent_tokens"].sum()) > 0
    assert first["cost"] == f"${float(runs['spent_cost_usd'].sum()):.4f}"

    again = summary(run_cli(*args, cwd=tmp_path / "submit", env=machine_env()))
    assert (again["done"], again["failed"], again["skipped"], again["calls"], again["tokens"]) == (
        "0",
        "0",
        "4",
        "0",
        "0",
    ), again

    inline = sweep(path, tmp_path / "inline", cache=tmp_path / "cache-inline", progress=False)
    assert (inline.done, inline.failed) == (4, 0), str(inline)
    for cell in inline.cells:
        a = {(r.task.id, r.sample): comparable(r) for r in read_runs(tmp_path / "inline", cell.cell_id)}
        b = {(r.task.id, r.sample): comparable(r) for r in read_runs(out, cell.cell_id)}
        assert a == b and len(a) == 2
    frames = [load(d).runs.sort_values(RUN_ORDER, ignore_index=True) for d in (tmp_path / "inline", out)]
    keep = [c for c in frames[0].columns if c not in WALL_CLOCK]
    assert frames[0][keep].equals(frames[1][keep])


def test_a_worker_killed_mid_sweep_ends_in_a_complete_sweep_without_paying_twice(
    cluster: Cluster, tmp_path: Path
) -> None:
    from promptlab.llm.providers.scripted import reply

    def answer(body: dict[str, Any]) -> Reply:
        # fake/auto's deterministic, schema-valid answer to the request, after a latency
        generated = reply("auto", body["messages"], body)
        return Reply(generated.text, *generated.usage, delay_s=0.15)

    killed: list[int] = []
    lock = threading.Lock()

    def kill_at_the_sixth(index: int, address: tuple[str, int]) -> None:
        # the worker that sent request 6 dies while its reply is held back: that reply is never delivered
        with lock:
            if index == 5 and not killed:
                pid = worker_owning(address, server.port)
                assert pid is not None and pid != os.getpid()
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                # the reply goes out only once the worker is gone and the server has seen its connection close
                # (its main thread is a zombie before its other threads end and its sockets close)
                assert eventually(lambda: killed_and_seen(pid, address, server.port), within_s=60)

    with FaultServer(responder=answer, on_request=kill_at_the_sixth) as server:
        path = poem_experiment(
            tmp_path,
            {
                "name": "dkkill",
                "loops": ["p3ro"],
                "models": {
                    "loopback": {
                        "model": server.model,
                        "api_base": server.url,
                        "api_key_env": KEY_ENV,
                        "native_schema": True,
                        "price": {"input_per_million": 1.0, "output_per_million": 2.0},
                    }
                },
                "config": {"model": "loopback", "max_iterations": 1, "max_tokens": 64},
                "grid": {"temperature": [0.0, 0.2, 0.4, 0.6]},
            },
        )  # every cell's requests differ from the others'
        out = tmp_path / "out"
        proc = run_cli(
            str(path),
            "--executor",
            "dask",
            "--scheduler",
            cluster.address,
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "cache"),
            "--cell-concurrency",
            "1",
            cwd=tmp_path / "submit",
            env=machine_env(**{KEY_ENV: "sk-loopback"}),
            timeout=600,  # a hang guard only: a loaded machine restarts the worker slowly
        )
        bodies = [json.dumps(b, sort_keys=True) for b in server.bodies]
        delivered = [b for b, ok in zip(bodies, server.delivered, strict=True) if ok]

    assert killed, f"no worker was killed ({len(bodies)} requests)"
    result = summary(proc)
    assert (result["done"], result["failed"]) == ("4", "0"), proc.stdout
    assert assert_all_ok(path, out) == 4
    runs = load(out).runs
    assert len(runs) == 8 and (runs["n_errors"] == 0).all()
    assert not server.delivered[5]  # the killed worker's request
    twice = {b: n for b, n in Counter(delivered).items() if n > 1}
    # paid twice: at most the killed worker's other calls in flight (answered, their replies not stored yet when
    # it died), as the promise says; the sixth itself was never delivered
    in_flight = DEFAULT_SETTINGS.max_concurrency - 1
    assert sum(n - 1 for n in twice.values()) <= in_flight, f"{len(twice)} paid request(s) answered more than once"
    # the retried cell replayed from the shared cache whatever its killed attempt had paid for and stored (on a
    # busy machine the killed worker may have stored nothing yet, so no count of hits is required): every call of
    # the final runs (paid or replayed) was paid for at least once, and nothing else was paid for
    assert int(runs["calls"].sum()) == int(result["calls"]) == len(set(delivered))
    assert float(runs["cost_usd"].sum()) > 0


@pytest.mark.parametrize("listener", ["nothing", "http"])
def test_an_unreachable_scheduler_fails_fast_naming_the_address(tmp_path: Path, listener: str) -> None:
    """Nothing listening on the port, or a server that is not a scheduler (an HTTP server, as on the
    dashboard's port): exit 2 in seconds, naming the address; dask's own client waits forever for the latter."""
    path = poem_experiment(
        tmp_path, {"name": "dknone", "loops": ["p3ro"], "config": {"model": "fake/auto", "max_tokens": 64}}
    )
    with FaultServer() as http:
        address = f"tcp://127.0.0.1:{http.port if listener == 'http' else free_port()}"
        proc = run_cli(
            str(path),
            "--executor",
            "dask",
            "--scheduler",
            address,
            "--out",
            str(tmp_path / "out"),
            "--cache",
            str(tmp_path / "cache"),
            cwd=tmp_path / "submit",
            env=machine_env(),
            timeout=120,  # a hang guard: dask's own client would wait forever
        )
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert f"cannot reach the Dask scheduler at '{address}'" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()  # checked before the results dir is written
