"""A small grounded sweep for the export tests: two labelled tasks, Creator/Critic and P³RO judged by the simulated
oracle, run for real (`promptlab.sweeps.sweep`) so the records hold every example reply as the loops write them.

`register_target()` adds the scripted target `fake/exports-target`, whose replies make some examples right and some
wrong (in this process only: the papermill and Dask tests use `fake/auto`, whose replies are all wrong)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from fault_server import free_port

import promptlab

TARGET = "fake/exports-target"
"""The scripted target of `register_target`."""


def tasks() -> list[dict[str, Any]]:
    """Two tasks of 8 labelled examples each (4 dev, 4 test), scored exactly; one has example ids, one has not."""
    return [
        {
            "id": name,
            "prompt": f"Answer yes or no about {name}: {{input}}",
            "goal": "Answer yes.",
            "examples": [
                {"input": f"item {i}", "target": "yes" if i % 3 else "no", **({"id": f"{name}-{i}"} if ids else {})}
                for i in range(8)
            ],
            "scorer": {"kind": "exact"},
            "split": {"seed": 0, "dev": 4, "test": 4},
        }
        for name, ids in (("alpha", True), ("beta", False))
    ]


def target_reply(messages: list[dict[str, Any]]) -> str:
    """'yes' or 'no' by the length of the prompt and the item number: candidates differ, examples differ."""
    text = messages[-1]["content"]
    item = int(text.rsplit("item ", 1)[1].split()[0]) if "item " in text else 0
    return "yes" if (len(text) + item) % 3 else "no"


def register_target() -> Any:
    """Register the scripted target `fake/exports-target` in this process."""
    return promptlab.scripted(TARGET.removeprefix("fake/"), respond=target_reply)


def write_experiment(directory: Path, *, target: str = "fake/auto", replicates: int = 2, name: str = "exp") -> Path:
    """directory/exp.yaml: Creator/Critic and P³RO x max_iterations 1, 2 on the two tasks, `replicates` each."""
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks()), encoding="utf-8")
    data = {
        "name": name,
        "loops": ["creator_critic", "p3ro"],
        "tasks": "tasks.jsonl",
        "config": {"model": "fake/auto", "critic_model": "sim/oracle", "target_model": target, "max_tokens": 64},
        "grid": {"max_iterations": [1, 2]},
        "replicates": replicates,
    }
    path = directory / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def start_mlflow_server(root: Path, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """An MLflow tracking server on 127.0.0.1 over a SQLite store in `root` (started again on the same store and
    port, it serves what was there); returns the process and its URI once /health answers."""
    port = port or free_port()
    root.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(Path(sys.executable).parent / "mlflow"),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--default-artifact-root",
        str(root / "artifacts"),
        "--workers",
        "1",
    ]
    log = (root / f"server-{port}.log").open("ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"mlflow server exited {proc.returncode}: {(root / f'server-{port}.log').read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError(f"mlflow server on port {port} did not answer within 240 s")


def stop_server(proc: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """Stop a server started here (its whole process group: the server runs workers), and wait for it."""
    import os
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
