"""Issue 21's faults beyond the sandbox, as one runnable list: a full cache disk, a cache truncated mid-run, `verify`
on a corrupt cache, a record under another key, files that are not UTF-8, YAML alias bombs, bad flags, the
spend of cut cells, a Redis password and the papermill notebooks. Each kind is tried, and the host judges
whether it *held* (the documented behaviour) and what was *lost* (paid replies, results or spend that no record
keeps). tests/test_hardening_battery.py asserts that every kind held and nothing was lost; benchmarks/reliability.py
prints the table. The sandbox's kinds are in escape_battery.py.

Offline: the only sockets are a fault server and a redis-server on 127.0.0.1. The full-disk kind mounts a small
tmpfs as root; as another user it simulates SQLite's "database or disk is full" (said in its detail).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import yaml

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import CacheUnavailableError
from promptlab.llm.cache.disk import Cache, CacheDiskFullError
from promptlab.llm.cache.location import open_cache
from promptlab.llm.cache.readonly import ReadOnlyCache
from promptlab.llm.call.transport import Reply

KINDS = (
    "cache disk full",
    "cache truncated mid-run",
    "cache verify on a corrupt database",
    "record under another key",
    "file not UTF-8",
    "YAML alias bomb",
    "bad flag",
    "spend of cut cells",
    "Redis password in notebooks",
)
"""The kinds, in the order of issue 21's items 11-20."""
SUPPORT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Row:
    """One kind: how many attempts, how many held, what was lost, and what the host saw."""

    kind: str
    tried: int
    held: int
    lost: int
    detail: str

    @classmethod
    def of_checks(cls, kind: str, checks: list[bool], detail: str) -> Row:
        """A kind whose attempts each held (True) or not: tried, held and lost counted from them."""
        return cls(kind, len(checks), sum(checks), len(checks) - sum(checks), detail)


def record(key: str, text: str = "t") -> pl.Completion:
    return pl.Completion(model="fake/x", text=text, key=key)


@contextlib.contextmanager
def small_disk(base: Path) -> Iterator[Path | None]:
    """A 3 MiB tmpfs under `base` (root only; None otherwise), unmounted afterwards."""
    mount = base / "disk"
    mount.mkdir(parents=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)]).returncode:
        yield None
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> None:
    fd = os.open(folder / "filler.bin", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
    for i in range(10_000):
        try:
            (folder / f"f{i}").write_bytes(b"x" * 512)
        except OSError:
            break


def cli(*args: str, cwd: Path, limit_gb: float = 2.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """`promptlab ...` in a fresh process with at most `limit_gb` of memory; (result, seconds)."""

    def cap() -> None:
        size = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
    }
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "promptlab.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=180,
        preexec_fn=cap,
        env=env,
    )
    return done, time.perf_counter() - t0


class Battery:
    """The attempts, each in its own folder under `base`."""

    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)

    def folder(self, name: str) -> Path:
        d = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.base))
        return d

    # 11 -------------------------------------------------------------------------------------------------
    def disk_full(self) -> Row:
        with small_disk(self.folder("full")) as mount:
            if mount is None:
                return self._disk_full_simulated()
            cache = mount / "cache"
            store = Cache(cache)
            m = pl.scripted("hb-full", respond=lambda msgs: "reply to " + msgs[-1]["content"])
            first = pl.complete(m.name, "stored before", cache=store)
            fill(mount)
            kept = int(pl.complete(m.name, "paid on a full disk", cache=store).text == "reply to paid on a full disk")
            try:  # the reply it could not store said so; the next call stops, as on a full Redis
                pl.complete(m.name, "one more", cache=store)
                stopped = False
            except CacheUnavailableError as e:
                stopped = str(cache) in str(e) and "disk is full" in str(e)
            try:
                Cache(cache)
                named = False
            except CacheDiskFullError as e:
                named = str(cache) in str(e) and "disk is full" in str(e)
            code = (
                "import sys, promptlab as pl\nfrom promptlab.llm.cache.location import open_cache\n"
                "m = pl.scripted('hb-full', respond=lambda msgs: 'again')\n"
                "c = pl.complete(m.name, 'stored before', cache=open_cache(sys.argv[1]))\n"
                "print('HIT' if c.cache_hit and c.text == sys.argv[2] else 'MISS', type(open_cache(sys.argv[1])).__name__)"
            )
            done = subprocess.run(
                [sys.executable, "-c", code, str(cache), first.text],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            )
            reopened = done.returncode == 0 and "HIT ReadOnlyCache" in done.stdout
            return Row(
                "cache disk full",
                4,
                kept + stopped + named + reopened,
                (1 - kept) + (not stopped),
                f"3 MiB tmpfs: the reply paid on a full disk returned: {bool(kept)}; the next call stops, naming "
                f"the cache: {stopped}; a direct open names the cache and the cause: {named}; the next process "
                f"opens it read-only and replays: {reopened}",
            )

    def _disk_full_simulated(self) -> Row:
        d = self.folder("full-sim")
        m = pl.scripted("hb-full-sim", respond=lambda msgs: "r " + msgs[-1]["content"])
        first = pl.complete(m.name, "stored", cache=Cache(d))
        real = diskcache.Cache

        def full(*args: object, **kwargs: object) -> Any:
            raise sqlite3.OperationalError("database or disk is full")

        diskcache.Cache = full  # type: ignore[misc]
        try:
            ro = open_cache(d, origin="battery")
        finally:
            diskcache.Cache = real  # type: ignore[misc]
        hit = pl.complete(m.name, "stored", cache=ro)
        new = pl.complete(m.name, "new", cache=ro)
        held = (
            int(isinstance(ro, ReadOnlyCache))
            + int(hit.cache_hit and hit.text == first.text)
            + int(new.text == "r new")
        )
        return Row(
            "cache disk full",
            3,
            held,
            int(new.text != "r new"),
            "simulated (not root): SQLite's 'database or disk is full' on open gives a read-only cache that "
            f"replays ({hit.cache_hit}) and returns new paid replies ({new.text!r})",
        )

    # 12 -------------------------------------------------------------------------------------------------
    def truncated(self) -> Row:
        tried = readable = heals = 0
        for size in ("empty", "half"):
            d = self.folder(f"trunc-{size}")
            one, two = Cache(d), Cache(d)
            for i in range(300):
                one.add(f"old{i}", record(f"old{i}", "x" * 400))
            db = d / "cache.db"
            os.truncate(db, 0 if size == "empty" else db.stat().st_size // 2)
            keys: list[str] = []
            threads = [
                threading.Thread(target=_writes, args=(s, f"{size}-{t}", keys))
                for s, t in ((one, "a"), (two, "b"), (one, "c"), (two, "d"))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            fresh = Cache(d)
            tried += len(keys)
            readable += sum(fresh.get(k) is not None for k in keys)
            heals += len(list(d.glob("cache.db.corrupt-*[0-9]")))
        return Row(
            "cache truncated mid-run",
            tried,
            readable,
            tried - readable,
            f"cache.db truncated to 0 and to half under two openers x 2 threads: {readable}/{tried} writes after "
            f"the truncation readable by a new process; {heals} file(s) copied aside (one per truncation)",
        )

    # 13 -------------------------------------------------------------------------------------------------
    def verify_corrupt(self) -> Row:
        d = self.folder("verify")
        (d / "cache.db").write_bytes(b"this is not an sqlite database " * 200)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["cache", "verify", "--dir", str(d)])
        said = "was corrupt and was copied aside as cache.db.corrupt-" in out.getvalue()
        return Row(
            "cache verify on a corrupt database",
            1,
            int(code == 1 and said),
            0,
            f"exit {code}; reports what it copied aside: {said}",
        )

    # 14 -------------------------------------------------------------------------------------------------
    def wrong_key(self) -> Row:
        d = self.folder("key")
        m = pl.scripted("hb-key", respond=lambda msgs: "answer to " + msgs[-1]["content"])
        a = pl.complete(m.name, "question A", cache=d)
        b = pl.complete(m.name, "question B", cache=d)
        store = Cache(d)
        store.add("reply-1", Reply(text="raw 1"))
        store.add("reply-2", Reply(text="raw 2"))
        with diskcache.Cache(str(d)) as dc:
            dc.set(a.key, dc.get(b.key))
            dc.set("reply-1", dc.get("reply-2"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["cache", "verify", "--dir", str(d)])
        again = pl.complete(m.name, "question A", cache=d)
        served = int(again.text != "answer to question A") + int(store.get("reply-1", Reply) is not None)
        found = out.getvalue().count("stored under the wrong key")
        return Row(
            "record under another key",
            2,
            2 - served,
            0,
            f"{served} of 2 swapped records served as hits; verify flagged {found} (exit {code})",
        )

    # 16 -------------------------------------------------------------------------------------------------
    def not_utf8(self) -> Row:
        d = self.folder("utf8")
        (d / "tasks.jsonl").write_text(json.dumps({"id": "t", "prompt": "p", "goal": "g"}) + "\n", encoding="utf-8")
        exp = d / "exp.yaml"
        exp.write_bytes(
            b"name: u\nloops: [p3ro]\ntasks: tasks.jsonl\ndescription: caf\xe9\nconfig:\n  model: fake/auto\n"
        )
        bad_tasks = d / "bad.jsonl"
        bad_tasks.write_bytes(b'{"id": "t", "prompt": "caf\xe9", "goal": "g"}\n')
        exp2 = d / "exp2.yaml"
        exp2.write_text("name: u2\nloops: [p3ro]\ntasks: bad.jsonl\nconfig:\n  model: fake/auto\n", encoding="utf-8")
        held, seen = 0, []
        for path, named in ((exp, f"{exp}:4:"), (exp2, f"{bad_tasks}:1:")):
            done, _ = cli("sweep", str(path), "--list", cwd=d)
            ok = done.returncode == 2 and named in done.stderr and "not UTF-8" in done.stderr
            held += ok
            seen.append(
                done.stderr.strip().splitlines()[-1][:120] if done.stderr.strip() else f"exit {done.returncode}"
            )
        return Row("file not UTF-8", 2, held, 0, "; ".join(seen))

    # 17 -------------------------------------------------------------------------------------------------
    def yaml_bombs(self) -> Row:
        d = self.folder("bomb")
        (d / "tasks.jsonl").write_text(json.dumps({"id": "t", "prompt": "p", "goal": "g"}) + "\n", encoding="utf-8")

        def bomb(indent: str) -> str:
            lines = [f"{indent}l0: &l0 [" + ", ".join(['"lol"'] * 9) + "]"]
            lines += [f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
            return "\n".join(lines) + "\n"

        head = "name: b\nloops: [p3ro]\ntasks: tasks.jsonl\nconfig:\n  model: fake/auto\n"
        bodies = {
            "unknown field": "laughs:\n" + bomb("  "),
            "models.params": "models:\n  judge:\n    model: fake/auto\n    params:\n" + bomb("      "),
        }
        held, seen = 0, []
        for where, body in bodies.items():
            path = d / f"{where.replace(' ', '_')}.yaml"
            path.write_text(head + body, encoding="utf-8")
            done, seconds = cli("sweep", str(path), "--no-progress", cwd=d)
            ok = done.returncode == 2 and "alias" in done.stderr and seconds < 30
            held += ok
            seen.append(f"{where}: exit {done.returncode} in {seconds:.1f} s")
        value = "{" + bomb("").replace("\n", ", ").rstrip(", ") + "}"
        done, seconds = cli(
            "run", "p3ro", "--prompt", "x", "--model", "fake/auto", "--set", f"prompts={value}", "--quiet", cwd=d
        )
        held += done.returncode == 2 and "alias" in done.stderr and seconds < 30
        seen.append(f"--set: exit {done.returncode} in {seconds:.1f} s")
        return Row("YAML alias bomb", 3, held, 0, "; ".join(seen))

    # 18 -------------------------------------------------------------------------------------------------
    def bad_flags(self) -> Row:
        d = self.folder("flags")
        (d / "tasks.jsonl").write_text(json.dumps({"id": "t", "prompt": "p", "goal": "g"}) + "\n", encoding="utf-8")
        exp = d / "exp.yaml"
        exp.write_text(
            "name: f\nloops: [p3ro]\ntasks: tasks.jsonl\nconfig:\n  model: fake/auto\n  max_iterations: 1\n",
            encoding="utf-8",
        )
        cases = [
            (["--max-concurrency", "nosuchmodel=3"], "nosuchmodel"),
            (["--cell-concurrency", "-3"], "--cell-concurrency"),
            (["--workers", "0"], "--workers"),
        ]
        held, seen = 0, []
        for extra, named in cases:
            done, _ = cli("sweep", str(exp), "--out", str(d / "out"), "--no-progress", *extra, cwd=d)
            ok = done.returncode == 2 and named in done.stderr and not (d / "out").exists()
            held += ok
            seen.append(f"{' '.join(extra)}: exit {done.returncode}")
        return Row("bad flag", len(cases), held, 0, "; ".join(seen) + " (no results dir, no call)")

    # 19 -------------------------------------------------------------------------------------------------
    def cut_spend(self) -> Row:
        import toyloop  # noqa: F401 -- registers the "toy" loop
        from fault_server import FaultServer
        from fault_server import Reply as ServerReply

        from promptlab.llm.spending.cap import SpendingCap
        from promptlab.llm.spending.ledger import LEDGER_NAME
        from promptlab.results.store import load
        from promptlab.sweeps.run import sweep

        d = self.folder("budget")
        (d / "tasks.jsonl").write_text(
            "".join(
                json.dumps({"id": f"t{i}", "prompt": f"Write about {i}.", "goal": "Be concrete."}) + "\n"
                for i in range(2)
            )
        )
        (d / "exp.yaml").write_text(
            yaml.safe_dump(
                {
                    "name": "budgeted",
                    "loops": ["toy"],
                    "tasks": "tasks.jsonl",
                    "config": {"model": "openai/gpt-4o-mini", "max_iterations": 1, "max_tokens": 2000},
                    "grid": {"style": ["a", "b", "c"]},
                }
            )
        )
        reply = ServerReply('{"score": 7}', prompt_tokens=10_000, completion_tokens=1_000)
        with (
            FaultServer(default=reply, model="gpt-4o-mini") as server,
            _env(OPENAI_API_BASE=server.url, OPENAI_API_KEY="sk-test-budget"),
        ):
            sweep(d / "exp.yaml", d / "out", workers=1, cell_concurrency=1, progress=False, max_cost=0.0094)
        cells = load(d / "out").cells
        ledger = SpendingCap(d / "out" / LEDGER_NAME, 0.0094).spent()
        cut = cells[cells["status"] == "cut"]
        spends = [float(v) for v in cut["spent_cost_usd"].dropna()]
        missing = round(ledger - float(cells["spent_cost_usd"].fillna(0).sum()), 10)
        held = len(spends) if missing == 0 and any(v > 0 for v in spends) else 0
        return Row(
            "spend of cut cells",
            len(cut),
            held,
            int(missing != 0),
            f"{len(cut)} cells cut, spend in the cells frame: {[round(v, 4) for v in spends]} USD; all cells "
            f"{float(cells['spent_cost_usd'].sum()):.4f} USD = spending.json {ledger:.4f} USD: {missing == 0}",
        )

    # 20 -------------------------------------------------------------------------------------------------
    def redis_password(self) -> Row:
        from promptlab.sweeps.experiment import Experiment
        from promptlab.sweeps.run import sweep

        binary = shutil.which("redis-server")
        if binary is None:
            return Row("Redis password in notebooks", 0, 0, 0, "not run: no redis-server")
        d = self.folder("redis")
        password = "pw-" + base64.b16encode(os.urandom(12)).decode()
        with _redis(binary, password) as url:
            (d / "tasks.jsonl").write_text(
                json.dumps({"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}) + "\n"
            )
            exp = Experiment.from_dict(
                {
                    "name": "pw",
                    "loops": ["p3ro"],
                    "tasks": "tasks.jsonl",
                    "config": {"model": "fake/auto", "max_tokens": 64, "max_iterations": 1},
                },
                d,
            )
            result = sweep(exp, d / "out", executor="papermill", workers=1, cache=url, progress=False)
        needles = [password.encode(), base64.b64encode(password.encode())]
        files = [p for p in (d / "out").rglob("*") if p.is_file()]
        leaks = [str(p.relative_to(d)) for p in files if any(n in p.read_bytes() for n in needles)]
        return Row(
            "Redis password in notebooks",
            1,
            int(result.done == 1 and not leaks),
            0,
            f"papermill sweep with redis://:<password>@...: {result.done} cell done; {len(files)} files scanned, "
            f"{len(leaks)} hold the password {leaks if leaks else ''}".rstrip(),
        )

    def attempts(self) -> list[Callable[[], Row]]:
        """Every kind, in the order of `KINDS`."""
        return [
            self.disk_full,
            self.truncated,
            self.verify_corrupt,
            self.wrong_key,
            self.not_utf8,
            self.yaml_bombs,
            self.bad_flags,
            self.cut_spend,
            self.redis_password,
        ]


def _writes(store: Cache, tag: str, keys: list[str]) -> None:
    """Eight reads and writes through `store` (errors swallowed: the later read is the judge); keys go to `keys`."""
    for i in range(8):
        key = f"{tag}{i}"
        with contextlib.suppress(Exception):
            store.get(key)
            store.add(key, record(key))
        keys.append(key)


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _redis(binary: str, password: str) -> Iterator[str]:
    """A throwaway password-protected redis-server on 127.0.0.1; yields its URL."""
    import socket

    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--bind",
            "127.0.0.1",
            "--requirepass",
            password,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=password)
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://:{password}@127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def run_battery(base: Path) -> list[Row]:
    """Every kind, each in a fresh folder under `base`."""
    battery = Battery(base)
    return [attempt() for attempt in battery.attempts()]
