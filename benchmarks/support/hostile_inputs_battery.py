"""Hostile inputs and surroundings, as one runnable list: a reply's numbers out of range (10^30 tokens, with and
without a spending cap; a Retry-After of inf), a schema the local engine cannot compile, a full
Redis, the cache's read/write race, a slow regex scorer beside a heartbeat, files that are not files (a FIFO, a
sparse 3 GiB file and a link to /dev/zero as a value file; status.json as a FIFO or a link to /dev/zero; a cell
directory linked outside), a 1,500-deep chain copied back from a shell step, redirects on both transports, a key in
an api_base's query string, and grid x replicates past the cap. Each kind is tried, and the host judges whether it
*held* and what was *lost* (a cell, a valid cache entry, a request sent where it should not go); the tests of each
kind are named in its detail.

Offline: the only sockets are fault servers and a redis-server on 127.0.0.1. The local-model kind runs only where
the bundled SmolLM2 and llama-cpp-python are installed; the Redis kind only where redis-server is.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import toyloop  # noqa: F401 (registers the "toy" loop)
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Raw, Reply, Status, free_port
from figures_battery import logprob_figures
from hardening_battery import Row
from own_files_battery import own_files
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import CacheUnavailableError, ConfigError, ProviderError
from promptlab.eval.scorers import Regex
from promptlab.eval.scoring import score_safely
from promptlab.llm.cache.disk import Cache
from promptlab.llm.call.settings import Settings
from promptlab.record import Example
from promptlab.results.store import load, write_cell
from promptlab.tools import stager

HUGE = 10**30


@contextlib.contextmanager
def _routed(server: FaultServer) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in ("OPENAI_API_BASE", "OPENAI_API_KEY")}
    os.environ.update(OPENAI_API_BASE=server.url, OPENAI_API_KEY="sk-issue41")
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _quiet(*args: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(list(args))


def huge_usage(base: Path) -> Row:
    held = tried = 0
    for cap in (None, "0.5"):
        tried += 1
        folder = base / f"cap-{cap}"
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"name": "huge", "loops": ["toy"], "grid": {"style": ["a", "b", "c"]}}
        exp = write_experiment(
            folder,
            {**spec, "config": {"model": "openai/gpt-4o-mini", "max_iterations": 1, "max_tokens": 50}},
            topics(2),
        )
        out = folder / "out"
        reply = Reply('{"score": 7}', prompt_tokens=HUGE, completion_tokens=HUGE)
        with FaultServer(default=reply, model="gpt-4o-mini") as server, _routed(server):
            args = ["sweep", str(exp), "--out", str(out), "--no-progress", "--cache", str(folder / "c")]
            code = _quiet(*args, *(["--max-cost", cap] if cap else []))
        cells = load(out).cells
        named = all("usage.prompt_tokens is 1e+30, out of range" in str(m) for m in cells["error"])
        report = _quiet("report", str(out), "--out", str(folder / "report"))
        held += code == 1 and len(cells) == 3 and named and report == 0
    with FaultServer([Status(429, retry_after="inf")]) as server:
        tried += 1
        try:
            pl.complete(server.model, "p", api_base=server.url, api_key="sk-x", cache=False)
        except ProviderError as e:
            held += "out of range" in str(e) and server.requests == 1
    return Row(
        "a reply's numbers out of range (10^30 tokens, with and without a cap; Retry-After inf)",
        tried,
        held,
        tried - held,
        "a named invalid reply per cell, exit 1, report works; test_figures_bounded",
    )


def unservable_schema(base: Path) -> Row:
    try:
        from promptlab.llm.local import pool as local

        local.resolve_model_path("smollm2")
        import llama_cpp  # noqa: F401
    except Exception as e:  # noqa: BLE001 -- no local model here: not tried
        return Row("a schema the local engine cannot compile", 0, 0, 0, f"not tried: {type(e).__name__}")

    class Unanchored(BaseModel):
        code: str = Field(pattern=r"[A-Z]{3}")

    class Node(BaseModel):
        name: str
        children: list[Node] = []

    os.environ["PROMPTLAB_LOCAL_ENGINE"] = "batch"

    async def run() -> list[Any]:
        ordinary = [pl.acomplete("local/smollm2", f"Say {i}.", max_tokens=3, cache=False) for i in range(6)]
        bad = [pl.acomplete("local/smollm2", "Answer.", schema=m, cache=False) for m in (Unanchored, Node)]
        return list(await asyncio.gather(*ordinary, *bad, return_exceptions=True))

    try:
        *ordinary, a, b = asyncio.run(run())
    finally:
        os.environ.pop("PROMPTLAB_LOCAL_ENGINE", None)
    kept = sum(isinstance(c, pl.Completion) for c in ordinary)
    alone = sum(isinstance(e, ProviderError) and "cannot be made into a grammar" in str(e) for e in (a, b))
    ok = kept == 6 and alone == 2
    return Row(
        "a schema the local engine cannot compile (pattern without ^$, recursive), beside 6 calls",
        2,
        alone if kept == 6 else 0,
        6 - kept + (2 - alone),
        f"{kept} of 6 ordinary calls answered, {alone} of 2 failed alone{'' if ok else ' (NOT HELD)'}; "
        "test_engine_bad_schema",
    )


def full_redis(base: Path) -> Row:
    binary = shutil.which("redis-server")
    if binary is None:
        return Row("a full Redis (maxmemory, noeviction)", 0, 0, 0, "not tried: no redis-server")
    import redis

    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(300):
            with contextlib.suppress(redis.exceptions.ConnectionError):
                client.ping()
                break
            time.sleep(0.05)
        url = f"redis://127.0.0.1:{port}/0"
        from promptlab.llm.cache.redis import RedisCache

        store = RedisCache(url)
        client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) + 60_000))
        model = pl.scripted("issue41-redis", respond=lambda m: "r" * 2000 + m[-1]["content"])
        paid = []
        stopped = False
        logging.getLogger("promptlab.llm.cache").setLevel(logging.ERROR)
        try:
            for i in range(200):
                paid.append(pl.complete(model.name, f"p{i}", cache=store))
        except CacheUnavailableError as e:
            stopped = "is full" in str(e)
        finally:
            logging.getLogger("promptlab.llm.cache").setLevel(logging.NOTSET)
        client.config_set("maxmemory", "0")
        again = RedisCache(url)
        repaid = sum(not pl.complete(model.name, f"p{i}", cache=again).cache_hit for i in range(len(paid)))
    finally:
        proc.terminate()
        proc.wait(10)
    ok = stopped and repaid <= 1
    return Row(
        "a full Redis (maxmemory, noeviction)",
        1,
        int(ok),
        int(not ok),
        f"stopped at the next call after {len(paid)} paid; a replay paid {repaid} again (bound: the call in flight); "
        "test_cache_redis (full)",
    )


def cache_race(base: Path) -> Row:
    cache, other = Cache(base / "c"), Cache(base / "c")
    key, real, reads = "a" * 64, Cache._read, list[str]()

    def read_then_write(self: Cache, k: str) -> Any:
        raw = real(self, k)
        if self is cache and not reads:
            reads.append(k)
            other.add(k, pl.Completion(model="fake/x", text="y" * 200_000, key=k))
        return raw

    Cache._read = read_then_write  # type: ignore[method-assign,assignment]
    try:
        got = cache.get(key)
    finally:
        Cache._read = real  # type: ignore[method-assign]
    ok = got is not None and key in cache
    return Row(
        "the cache's read/write race (a write lands between a miss and its check)",
        1,
        int(ok),
        int(not ok),
        "the entry written meanwhile is read, not discarded; test_cache_race",
    )


def slow_regex(base: Path) -> Row:
    scorer, example = Regex(pattern=r"(a|aa)+$"), Example(input="x", target=None)

    async def run() -> int:
        ticks, done = 0, asyncio.Event()

        async def beat() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(beat())
        await asyncio.sleep(0)
        before = ticks
        await score_safely(scorer, "a" * 60 + "b", example)
        during = ticks - before
        done.set()
        await task
        return during

    during = asyncio.run(run())
    return Row(
        "a regex scorer at its 1 s limit beside a heartbeat on the loop",
        1,
        int(during >= 5),
        int(during < 5),
        f"the loop ticked {during} times while it ran (0 before); test_scoring_off_the_loop",
    )


def _value_file(cache_dir: Path) -> Path:
    return next(cache_dir.rglob("*.val"))


def special_files(base: Path) -> Row:
    held = tried = 0
    for kind in ("fifo", "sparse", "zero"):
        tried += 1
        d = base / f"cache-{kind}"
        model = pl.scripted(f"issue41-special-{kind}", respond=lambda m: "y" * 100_000)
        pl.complete(model.name, "big", cache=Cache(d))
        value = _value_file(d)
        value.unlink()
        if kind == "fifo":
            os.mkfifo(value)
        elif kind == "sparse":
            with open(value, "wb") as f:
                f.truncate(3 * 2**30)
        else:
            value.symlink_to("/dev/zero")
        verify = _quiet("cache", "verify", "--dir", str(d))
        again = pl.complete(model.name, "big", cache=Cache(d))
        held += verify == 1 and not again.cache_hit
    for kind in ("fifo", "zero"):
        tried += 1
        out = base / f"results-{kind}"
        cell = write_cell(out, "c1", {"loop": "toy"}, [])
        (cell / "status.json").unlink()
        os.mkfifo(cell / "status.json") if kind == "fifo" else (cell / "status.json").symlink_to("/dev/zero")
        held += load(out).cells.iloc[0]["status"] == "corrupt"
    tried += 1
    out, elsewhere = base / "results-link", base / "elsewhere"
    write_cell(out, "c1", {"loop": "toy"}, [])
    elsewhere.mkdir()
    (out / "cells" / "c2").symlink_to(elsewhere, target_is_directory=True)
    try:
        write_cell(out, "c2", {"loop": "toy"}, [])
    except ConfigError:
        held += not list(elsewhere.iterdir())
    return Row(
        "files that are not files (value file: FIFO, sparse 3 GiB, link to /dev/zero; status.json: FIFO, link to "
        "/dev/zero; a cell directory linked outside)",
        tried,
        held,
        tried - held,
        "refused by name, no hang, nothing written through; test_special_files",
    )


def deep_chain(base: Path) -> Row:
    stage, ws = base / "stage", base / "ws"
    stage.mkdir()
    ws.mkdir()
    (ws / "old.txt").write_text("before")
    fd = os.open(stage, os.O_RDONLY)
    for _ in range(1_500):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    try:
        stager.copy_out(str(stage), str(ws))
        whole = (ws / "d").is_dir() and not any(p.name.startswith(".promptlab-") for p in ws.iterdir())
    except Exception:  # noqa: BLE001 -- what the host saw
        whole = False
    stager.remove_tree(str(ws))
    stager.remove_tree(str(stage))
    return Row(
        "a 1,500-deep folder chain copied back from a shell step",
        1,
        int(whole),
        int(not whole),
        "copied whole, nothing partial left behind (a failed copy leaves the workspace as it was); "
        "test_workspace_atomic",
    )


def redirects(base: Path) -> Row:
    held = tried = 0
    for transport in ("auto", "litellm"):
        for status in (301, 302, 307, 308):
            tried += 1
            with FaultServer() as target, FaultServer() as server:
                server.default = Raw(b"", status=status, headers={"Location": f"{target.url}/chat/completions"})
                try:
                    pl.complete(
                        server.model,
                        "hi",
                        api_base=server.url,
                        api_key="sk-x",
                        cache=False,
                        settings=Settings(transport=transport, retries=3, backoff_s=0.001),
                    )
                except ProviderError as e:
                    held += target.host in str(e) and e.attempts == server.requests == 1 and target.requests == 0
    return Row(
        "redirects (301/302/307/308) on both transports",
        tried,
        held,
        tried - held,
        "named with the target, never followed, never retried (attempts = server requests = 1); test_redirects",
    )


def input_caps(base: Path) -> Row:
    held = tried = 0
    secret = "qs-secret-41"
    with FaultServer(default=Reply('{"score": 7}')) as server:
        tried += 1
        alias = {"judge": {"model": server.model, "api_base": f"{server.url}?api-key={secret}"}}
        (base / "q").mkdir()
        exp = write_experiment(
            base / "q",
            {"name": "q", "loops": ["toy"], "models": alias, "config": {"max_iterations": 1, "model": "judge"}},
            topics(1),
        )
        code = _quiet("sweep", str(exp), "--out", str(base / "q" / "out"), "--no-progress")
        held += code == 2 and not (base / "q" / "out" / "experiment.yaml").exists() and server.requests == 0
    tried += 1
    (base / "r").mkdir()
    spec = {"name": "r", "loops": ["toy"], "config": {"model": "fake/auto"}}
    exp = write_experiment(
        base / "r", {**spec, "grid": {"style": [f"s{i}" for i in range(1_000)]}, "replicates": 10_000}
    )
    held += _quiet("sweep", str(exp), "--out", str(base / "r" / "out"), "--no-progress") == 2
    return Row(
        "a key in an api_base's query string; grid x replicates of 10^3 x 10^4",
        tried,
        held,
        tried - held,
        "refused before any call, masked; test_url_query_credentials, test_bad_input",
    )


KINDS = (
    huge_usage,
    logprob_figures,
    unservable_schema,
    full_redis,
    cache_race,
    slow_regex,
    special_files,
    own_files,
    deep_chain,
    redirects,
    input_caps,
)


def run_battery(base: Path) -> list[Row]:
    """Every kind, each in a fresh folder under `base`."""
    rows = []
    for kind in KINDS:
        folder = base / kind.__name__
        folder.mkdir(parents=True, exist_ok=True)
        rows.append(kind(folder))
    return rows


if __name__ == "__main__":  # run alone: python benchmarks/support/hostile_inputs_battery.py
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for row in run_battery(Path(tmp)):
            print(json.dumps(row.__dict__))
