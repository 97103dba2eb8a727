"""Issue 51's kinds, as one runnable list: a damaged line in a cell's runs.jsonl (30 MiB, cut mid-record) before the
MLflow and Inspect exports, the report and `load`; a cost past the per-call bound set by an alias's own price (both
transports, and a sweep); plugins that exit, raise KeyboardInterrupt or a BaseException, hang on import, or register
a built-in's name, beside a sweep; replay only without the key; kill -9 during a cell's write, then a resume; and the
first call of a fresh process against a hanging server under a 3 s deadline. Each kind is tried, and the host judges
whether it *held* and what was *lost* (a run not exported, a cell, a call accepted past the bound); the tests of
each kind are named in its detail.

Offline: the only sockets are fault servers on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from experiment_files import write_experiment
from fault_server import FaultServer, Reply
from hardening_battery import Row

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import ProviderError
from promptlab.llm.call.settings import Settings
from promptlab.llm.providers.aliases import register_model, unregister_model
from promptlab.results.store import load

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HUGE_LINE = 30 * 2**20
DEAR = {"input_per_million": 1000.0, "output_per_million": 2000.0}


@contextlib.contextmanager
def _env(**values: str | None) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _grounded_sweep(folder: Path) -> Path:
    """A 2-cell sweep of grounded P3RO runs on the scripted model (3 tasks with labelled examples each)."""
    tasks = [
        {
            "id": f"t{i}",
            "prompt": f"Answer yes or no about topic {i}: {{input}}",
            "goal": "Answer yes.",
            "examples": [{"input": f"item {j}", "target": "yes"} for j in range(4)],
            "scorer": {"kind": "exact"},
            "split": {"seed": 0, "dev": 2, "test": 2},
        }
        for i in range(3)
    ]
    spec = {"name": "damaged", "loops": ["p3ro"], "grid": {"finish_threshold": [6.0, 9.0]}}
    exp = write_experiment(folder, {**spec, "config": {"model": "fake/auto", "max_iterations": 1}}, tasks)
    out = folder / "out"
    code, _, err = _cli("sweep", str(exp), "--out", str(out), "--cache", str(folder / "cache"), "--no-progress")
    assert code == 0, err
    return out


def damaged_record(base: Path) -> Row:
    out = _grounded_sweep(base)
    cells = sorted((out / "cells").iterdir())
    path = cells[0] / "runs.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = b'{"version": 1, "run_id": "' + b"x" * HUGE_LINE  # cut mid-record, 30 MiB long
    path.write_bytes(b"\n".join(lines))
    total = len(load(out).runs)
    checks, said = [], []
    for target, done in (("mlflow", f"{total - 1} run(s) created"), ("inspect", f"{total - 1} Inspect log(s)")):
        code, stdout, err = _cli("export", target, str(out))
        named = f"cells/{cells[0].name}/runs.jsonl:2: not JSON" in err
        checks.append(code == 0 and done in stdout and named and len(err.encode()) < 1024)
        said.append(f"{target}: exit {code}, {len(err.encode())} bytes on stderr")
    code, _, _ = _cli("report", str(out), "--out", str(base / "report"))
    checks.append(code == 0 and len(load(out).runs) == total)
    return Row.of_checks(
        "a damaged line (30 MiB, cut mid-record) in one cell's runs.jsonl: MLflow, Inspect, report, load",
        checks,
        f"every other run exported ({total - 1} of {total}), the line named by file and line in under 1 KiB "
        f"({'; '.join(said)}); tests/exports/test_damaged_records.py",
    )


def priced_past_bound(base: Path) -> Row:
    checks, accepted = [], 0
    with FaultServer(default=Reply('{"score": 7}', prompt_tokens=5 * 10**8, completion_tokens=5 * 10**8)) as server:
        for transport in ("auto", "litellm"):
            register_model("battery-dear", model="openai/test-model", api_base=server.url, price=DEAR)
            before = server.requests
            try:
                pl.complete("battery-dear", "p", cache=False, settings=Settings(transport=transport))
                accepted += 1
                checks.append(False)
            except ProviderError as e:
                checks.append("cost is 1.5e+06 USD, out of range" in str(e) and server.requests - before == 1)
            finally:
                unregister_model("battery-dear")
        models = {"dear": {"model": "openai/test-model", "api_base": server.url, "price": DEAR}}
        spec = {"name": "dear", "loops": ["p3ro"], "models": models, "config": {"model": "dear", "max_iterations": 1}}
        exp = write_experiment(base, spec)
        out = base / "out"
        code, _, _ = _cli("sweep", str(exp), "--out", str(out), "--cache", str(base / "cache"), "--no-progress")
        cells = load(out)
        costs = [c for c in cells.runs["cost_usd"].dropna()] if len(cells.runs) else []
        named = all("cost is 1.5e+06 USD, out of range" in str(m) for m in cells.cells["error"])
        checks.append(code == 1 and named and all(c <= 1e6 for c in costs))
    return Row(
        "a cost past the 10^6 USD bound set by an alias's own price (1,000 / 2,000 USD per million, 5x10^8 tokens): "
        "both transports, and a sweep",
        len(checks),
        sum(checks),
        accepted,
        "an invalid reply (`cost is 1.5e+06 USD, out of range`) after 1 request; the sweep's cell failed naming it, "
        "exit 1, no cost past the bound recorded; tests/llm/test_figures_at_source.py",
    )


PLUGINS = {
    "exits": ("import sys\nsys.exit(7)\n", "SystemExit: 7"),
    "interrupts": ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    "odd": ("class Odd(BaseException):\n    pass\n\n\nraise Odd('odd')\n", "Odd: odd"),
    "hangs": ("import threading\nthreading.Event().wait()\n", "did not finish within 2 s"),
}
SHADOW = """
from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.define import define_loop


class ShadowConfig(LoopConfig):
    ROLES = ("generator",)


@define_loop("creator_critic", ShadowConfig, "not promptlab's")
async def arun_shadow(ctx, task, cfg):
    it = ctx.new_iteration()
    it.candidate = "SHADOW RAN"
    ctx.decide(it, "FINISH", "one iteration")
    return ctx.finish("max_iterations", it.candidate)
"""


def _plugin_site(base: Path) -> Path:
    site = base / "site"
    (site / "bad_plugins").mkdir(parents=True)
    (site / "bad_plugins" / "__init__.py").write_text("")
    for name, (source, _) in PLUGINS.items():
        (site / "bad_plugins" / f"{name}.py").write_text(source)
    (site / "bad_plugins" / "shadow.py").write_text(textwrap.dedent(SHADOW))
    info = site / "bad_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-plugins\nVersion: 0.1\n")
    eps = "".join(f"{name} = bad_plugins.{name}\n" for name in [*PLUGINS, "shadow"])
    (info / "entry_points.txt").write_text(f"[promptlab.loops]\n{eps}")
    return site


def _sweep_beside(site: Path, folder: Path, **env: str) -> tuple[int, str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    exp = write_experiment(
        folder, {"name": "beside", "loops": ["creator_critic"], "config": {"model": "fake/auto", "max_iterations": 1}}
    )
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    base.update(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), LITELLM_LOCAL_MODEL_COST_MAP="True", **env)
    args = [sys.executable, "-m", "promptlab.cli", "sweep", str(exp), "--out", str(folder / "out"), "--no-progress"]
    proc = subprocess.run(args, env=base, capture_output=True, text=True, timeout=600, cwd=folder)
    runs = load(folder / "out").runs if (folder / "out").is_dir() else None
    return proc.returncode, proc.stderr, runs


def untrusted_plugins(base: Path) -> Row:
    site = _plugin_site(base)
    code, err, runs = _sweep_beside(site, base / "plain", PROMPTLAB_PLUGIN_IMPORT_TIMEOUT="2")
    finished = code == 0 and runs is not None and list(runs["loop"]) == ["creator_critic"]
    checks = [finished and f"plugin {name!r} (promptlab.loops) failed to load: " in err for name in PLUGINS]
    checks = [ok and why in err for ok, (_, why) in zip(checks, PLUGINS.values(), strict=True)]
    checks.append(finished and "which is promptlab's own: refused" in err)
    overridden = "PROMPTLAB_PLUGIN_OVERRIDES"
    code2, err2, _ = _sweep_beside(
        site, base / "override", PROMPTLAB_PLUGIN_IMPORT_TIMEOUT="2", **{overridden: "loops:creator_critic"}
    )
    out = base / "override" / "out"
    ran = any("SHADOW RAN" in p.read_text() for p in out.glob("cells/*/runs.jsonl"))
    checks.append(code2 == 0 and ran and f"as {overridden}=loops:creator_critic asks" in err2)
    return Row.of_checks(
        "plugins that exit, raise KeyboardInterrupt or a BaseException, hang on import (2 s bound), or register "
        "`creator_critic`, beside a sweep; then the override",
        checks,
        "the sweep finished (exit 0) with promptlab's loop, each plugin named on stderr and left out; the shadow "
        "refused, and ran only when PROMPTLAB_PLUGIN_OVERRIDES named it (logged); tests/test_registry.py, "
        "tests/sweeps/test_untrusted_plugins.py",
    )


def replay_without_key(base: Path) -> Row:
    from pydantic import BaseModel

    class Score(BaseModel):
        score: int

    checks = []
    with _env(PROMPTLAB_REPLAY="1", BATTERY_HANDED_KEY=None):
        register_model(
            "handed", model="openai/test-model", api_key_env="BATTERY_HANDED_KEY", api_base="http://127.0.0.1:9/v1"
        )
        try:
            for schema in (None, Score):
                try:
                    pl.complete("handed", "Something new.", cache=base / "cache", schema=schema)
                    checks.append(False)
                except ProviderError as e:
                    said = str(e)
                    checks.append(said.startswith("handed: this call (key ") and "BATTERY_HANDED_KEY" not in said)
        finally:
            unregister_model("handed")
    return Row.of_checks(
        "PROMPTLAB_REPLAY=1 without the key, a call not in the cache (plain and structured)",
        checks,
        "`handed: this call (key ...) is not in the cache, and PROMPTLAB_REPLAY is set`, no key asked, no request; "
        "tests/sweeps/test_handoff.py",
    )


KILLED = """
import os, signal, sys
sys.argv = ["promptlab", "sweep", {exp!r}, "--out", {out!r}, "--no-progress", "--workers", "1"]
real = os.replace
seen = []
def replace(src, dst, *a, **k):
    if str(dst).endswith({name!r}):
        seen.append(dst)
        if len(seen) == 2:  # the second cell's write: the first cell is ok
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
from promptlab.cli import main
main(sys.argv[1:])
"""


def killed_writes(base: Path) -> Row:
    checks, left = [], 0
    for name in ("runs.jsonl", "trajectories.parquet", "status.json"):
        folder = base / name.replace(".", "-")
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"name": "killed", "loops": ["p3ro"], "grid": {"finish_threshold": [6.0, 7.0, 8.0]}}
        exp = write_experiment(folder, {**spec, "config": {"model": "fake/auto", "max_iterations": 1}})
        out = folder / "out"
        code = KILLED.format(exp=str(exp), out=str(out), name=name)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        killed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=600)
        temps_after_kill = len(list(out.glob("cells/*/.*.tmp")))
        resumed, _, _ = _cli("sweep", str(exp), "--out", str(out), "--no-progress")
        cells = load(out).cells
        temps = list(out.glob("cells/*/.*.tmp"))
        left += len(temps)
        checks.append(killed.returncode == -9 and temps_after_kill > 0 and resumed == 0 and not temps)
        checks[-1] = checks[-1] and set(cells["status"]) == {"ok"} and len(cells) == 3
    return Row(
        "kill -9 while a cell's runs.jsonl, trajectories.parquet or status.json is written, then a resume",
        len(checks),
        sum(checks),
        left,
        "the killed write's temp file is there after the kill and gone after the resume; every cell ok; "
        "tests/results/test_results.py::test_a_write_killed_mid_file_leaves_no_temp_file_once_the_cell_is_written_again",
    )


FIRST_CALL = """
import sys, time, asyncio
t0 = time.perf_counter()
import promptlab as pl
from promptlab.llm import warm_up
from promptlab.llm.providers import litellm_lazy
mode = {mode!r}
imported = 0.0
if mode == "warm":
    t = time.perf_counter(); warm_up(["gpt-4o-mini"]); imported = time.perf_counter() - t
start = time.perf_counter()
kw = dict(api_base={url!r}, api_key="sk-first", cache=False, settings=pl.Settings(deadline_s=3, timeout_s=3))
ticks = 0
async def main():
    global ticks
    async def beat():
        global ticks
        while True:
            ticks += not litellm_lazy.litellm_loaded()
            await asyncio.sleep(0)
    hb = asyncio.create_task(beat())
    await asyncio.sleep(0)
    try:
        await pl.acomplete({model!r}, "hi", **kw)
    finally:
        hb.cancel()
try:
    if mode == "async":
        asyncio.run(main())
    else:
        pl.complete({model!r}, "hi", **kw)
except pl.ProviderError as e:
    said = str(e)
print(f"{{imported:.2f}} {{time.perf_counter() - start:.2f}} {{ticks}} {{'deadline of 3s exceeded' in said}}")
"""


def first_call(base: Path) -> Row:
    """Checked: after `warm_up`, the call overruns its 3 s deadline by far less than the import took (at most a
    quarter of it, or 1 s); acomplete's import leaves the event loop running. Measured, not checked: a cold bare
    call, which still pays the import before its clock starts."""
    checks, said, runs = [], [], {}
    with FaultServer(default="hang", model="gpt-4o-mini") as server:
        for mode in ("warm", "cold", "async"):
            code = FIRST_CALL.format(mode=mode, url=server.url, model=server.model)
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
            fields = proc.stdout.split()[-4:] if proc.returncode == 0 else ["0", "0", "0", ""]
            runs[mode] = (float(fields[0]), float(fields[1]), int(fields[2]), fields[3] == "True")
    imported, took, _, named = runs["warm"]
    checks.append(named and took - 3.0 <= max(1.0, imported / 4))
    said.append(f"after warm_up ({imported:.1f} s) the call took {took:.1f} s")
    checks.append(runs["async"][3] and runs["async"][2] > 0)
    said.append(f"acomplete, cold: the event loop ticked {runs['async'][2]:,} times during the import")
    said.append(f"measured, not checked: a cold bare call took {runs['cold'][1]:.1f} s, the import before its clock")
    return Row.of_checks(
        "the first call of a fresh process against a hanging server, deadline 3 s (warm_up first; acomplete cold)",
        checks,
        "; ".join(said) + "; tests/llm/test_first_call_deadline.py",
    )


KINDS = [damaged_record, priced_past_bound, untrusted_plugins, replay_without_key, killed_writes, first_call]


def run_battery(base: Path, names: list[str] | None = None) -> list[Row]:
    """Every kind (or those `names` names), each in a fresh folder under `base`."""
    rows = []
    for kind in [k for k in KINDS if not names or k.__name__ in names]:
        folder = base / kind.__name__
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        row = kind(folder)
        rows.append(Row(row.kind, row.tried, row.held, row.lost, f"{row.detail} ({time.perf_counter() - t0:.0f} s)"))
    return rows


if __name__ == "__main__":  # run alone: python benchmarks/support/trust_battery.py [KIND ...]
    import tempfile

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as tmp:
        for row in run_battery(Path(tmp), sys.argv[1:]):
            print(json.dumps(row.__dict__))
