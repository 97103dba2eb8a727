"""Issue 28's kinds (trustworthy under faults), as one runnable list: usage that is not usage under a
spending cap, tampered cache rows, a password in a server URL, reply shapes on both transports, a lone surrogate
plain and streamed, a gzip bomb, a cache.db that cannot be opened, bad input, two sweeps on one results directory,
and a full results disk (inline, and papermill: a 2 MiB tmpfs as root, else ENOSPC in the kernels). Each
kind is tried, and the host judges whether it *held* and what was *lost* (money past the cap's bound, a file
outside the cache, a password on disk). benchmarks/reliability.py prints the table; the tests of each kind are
named in its detail.

Offline: the only sockets are fault servers on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import pickle
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import toyloop  # noqa: F401 (registers the "toy" loop)
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Raw, Reply
from full_disk import enospc_in_kernels, fill, mount_tmpfs, unmount
from hardening_battery import Row

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import CacheUnavailableError, ConfigError, ProviderError, SpendingCapExceeded
from promptlab.llm.cache.backend import encode_record
from promptlab.llm.cache.disk import Cache
from promptlab.llm.call.settings import Settings
from promptlab.llm.providers.litellm_lazy import litellm
from promptlab.llm.spending.cap import SpendingCap
from promptlab.reading import load_yaml
from promptlab.sweeps.dirlock import ResultsDirBusy, hold_results_dir

TRANSPORTS = ("auto", "litellm")
LONG = '{"score": 7, "note": "' + "lorem ipsum dolor " * 600 + '"}'
USAGES: dict[str, dict[str, Any]] = {
    "none": {"usage": False},
    "zero": {"prompt_tokens": 0, "completion_tokens": 0},
    "negative": {"prompt_tokens": -1_000_000, "completion_tokens": 5},
    "string": {"prompt_tokens": "10", "completion_tokens": "x"},
    "fraction": {"prompt_tokens": 10.5, "completion_tokens": 5},
}


def _body(content: Any = "hi", **over: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    return {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice], **over}


SHAPES: dict[str, Raw] = {
    "deep JSON": Raw('{"a":' * 100_000 + "1" + "}" * 100_000),
    "list content": Raw(_body(["a"])),
    "number content": Raw(_body(5)),
    "error in a 200": Raw({"error": {"message": "overloaded"}}),
    "byte-order mark": Raw(b"\xef\xbb\xbf" + json.dumps(_body()).encode()),
    "string usage": Raw(_body(usage={"prompt_tokens": "3", "completion_tokens": "x"})),
    "lone surrogate": Raw(json.dumps(_body("a\ud83d"))),
    "only [DONE]": Raw(b"data: [DONE]\n\n", content_type="text/event-stream"),
}


@contextlib.contextmanager
def _routed(server: FaultServer) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in ("OPENAI_API_BASE", "OPENAI_API_KEY")}
    os.environ.update(OPENAI_API_BASE=server.url, OPENAI_API_KEY="sk-faults")
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _paid(server: FaultServer, text: str) -> list[float]:
    lm, price_in, price_out = litellm(), 0.15e-6, 0.6e-6  # gpt-4o-mini's price per token
    return [
        lm.token_counter(model="gpt-4o-mini", messages=b["messages"]) * price_in
        + lm.token_counter(model="gpt-4o-mini", text=text) * price_out
        for b in server.bodies
    ]


def usage_under_a_cap(base: Path) -> Row:
    held = lost = tried = 0
    for kind, usage in USAGES.items():
        for transport in TRANSPORTS:
            tried += 1
            budget = SpendingCap(base / f"{kind}-{transport}.json", cap=0.004)
            settings = Settings(transport=transport, retries=0, timeout_s=10, deadline_s=30)
            with FaultServer(default=Reply(LONG, **usage), model="gpt-4o-mini") as server, _routed(server):
                with budget.scope(), contextlib.suppress(SpendingCapExceeded):
                    for i in range(40):
                        try:
                            pl.complete(server.model, f"p{i}", max_tokens=100, settings=settings, cache=False)
                        except ProviderError:  # a count out of range (#41): an invalid reply, charged as estimated
                            continue
                paid = _paid(server, LONG)
            ok = sum(paid) <= 0.004 + max(paid) * 1.05 and budget.spent() >= 0.95 * sum(paid)
            held += ok
            lost += not ok
    return Row(
        "usage that is not usage, under a cap", tried, held, lost, "5 usages x 2 transports; test_spending_cap_usage"
    )


def tampered_cache(base: Path) -> Row:
    held = tried = 0
    for how in ("pickled value", "pickled key", "absolute path", "climbing path", "link out"):
        tried += 1
        folder, marker, victim = base / how / "cache", base / how / "ran", base / how / "elsewhere" / "victim.txt"
        victim.parent.mkdir(parents=True)
        victim.write_text(encode_record(pl.Completion(model="fake/x", text="planted", key="k1"), "k1"))
        Cache(folder).add("k1", pl.Completion(model="fake/x", text="t", key="k1"))
        con = sqlite3.connect(folder / "cache.db")
        payload = pickle.dumps(_Marker(str(marker)))
        name = {"absolute path": str(victim), "climbing path": os.path.relpath(victim, folder)}.get(how, "ab/l.val")
        if how == "link out":
            (folder / "ab").mkdir()
            (folder / "ab" / "l.val").symlink_to(victim)
        sql = {
            "pickled value": ("UPDATE Cache SET mode = 4, value = ?", (payload,)),
            "pickled key": ("UPDATE Cache SET raw = 0, key = ?", (payload,)),
        }.get(how, ("UPDATE Cache SET mode = 3, value = NULL, filename = ?", (name,)))
        con.execute(*sql)
        con.commit()
        con.close()
        got = Cache(folder).get("k1")
        Cache(folder).verify(fix=True)
        held += got is None and not marker.exists() and victim.exists()
    return Row("tampered cache.db row", tried, held, tried - held, "pickle, paths out, a link; test_cache_tampered")


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return os.mkdir, (self.path,)


def password_in_url(base: Path) -> Row:
    held = tried = 0
    with FaultServer() as server:
        url = f"http://alice:pw-faults-secret@127.0.0.1:{server.port}/v1"
        attempts: list[Callable[[], Any]] = [
            *(
                (lambda t=t: pl.complete(server.model, "hi", api_base=url, api_key="k", settings=Settings(transport=t)))
                for t in TRANSPORTS
            ),
            lambda: pl.register_model("faults-pw", model=server.model, api_base=url),
        ]
        for attempt in attempts:
            tried += 1
            try:
                attempt()
            except ConfigError as e:
                held += "pw-faults-secret" not in str(e) and "***@" in str(e)
        if server.requests:  # a request reached the server: nothing held
            held = 0
    return Row("password in api_base", tried, held, tried - held, "refused, masked, no request; test_url_credentials")


def reply_shapes(base: Path) -> Row:
    held = 0
    for shape, raw in SHAPES.items():
        on_token: Callable[[str], None] | None = (lambda piece: None) if shape == "only [DONE]" else None
        seen = []
        for transport in TRANSPORTS:
            with FaultServer(default=raw) as server:
                settings = Settings(transport=transport, retries=1, backoff_s=0.001, timeout_s=10, deadline_s=30)
                try:
                    c = pl.complete(
                        server.model,
                        "hi",
                        api_base=server.url,
                        api_key="k",
                        cache=False,
                        settings=settings,
                        on_token=on_token,
                    )
                    seen.append((c.text, c.input_tokens, server.requests))
                except ProviderError as e:
                    seen.append((e.cause, None, server.requests))
        held += seen[0] == seen[1]
    return Row("reply shapes, both transports alike", len(SHAPES), held, 0, "8 shapes; test_reply_rule")


def lone_surrogate_replayed(base: Path) -> Row:
    held = tried = 0
    for transport in TRANSPORTS:
        for streamed in (False, True):
            tried += 1
            pieces: list[str] = []
            settings = Settings(transport=transport, retries=1, backoff_s=0.001, timeout_s=10, deadline_s=30)
            with FaultServer(default=Reply("ab\ud83d", pieces=3)) as server:
                texts = []
                for _ in range(2):  # the second from the cache
                    c = pl.complete(
                        server.model,
                        "hi",
                        api_base=server.url,
                        api_key="k",
                        cache=base / f"{transport}-{streamed}",
                        settings=settings,
                        on_token=pieces.append if streamed else None,
                    )
                    texts.append(c.text)
                sent = server.requests
            held += all(t == "ab\ufffd" for t in texts) and _utf8("".join(pieces)) and sent == 1
    return Row("lone surrogate, plain and streamed", tried, held, 0, "2 transports x 2 modes; test_reply_rule")


def gzip_bomb(base: Path) -> Row:
    held = 0
    bomb = Raw(gzip.compress(json.dumps(_body("x" * 64 * 2**20)).encode(), 9), headers={"Content-Encoding": "gzip"})
    for transport in TRANSPORTS:
        with FaultServer(default=bomb) as server:
            try:
                pl.complete(
                    server.model,
                    "hi",
                    api_base=server.url,
                    api_key="k",
                    cache=False,
                    settings=Settings(transport=transport, retries=2),
                )
            except ProviderError as e:
                held += "larger than the cap" in e.cause and server.requests == 1
    return Row("gzip bomb (64 MiB inflated)", 2, held, 2 - held, "refused at 8 MiB, not retried; test_reply_rule")


def unopenable_cache(base: Path) -> Row:
    held = 0
    for how in ("directory", "other schema"):
        folder = base / how.replace(" ", "-")
        folder.mkdir(parents=True)
        if how == "directory":
            (folder / "cache.db").mkdir()
        else:
            con = sqlite3.connect(folder / "cache.db")
            con.execute("CREATE TABLE Cache (id INTEGER)")
            con.commit()
            con.close()
        try:
            Cache(folder)
        except CacheUnavailableError as e:
            held += "cache.db" in str(e) and "move it away" in str(e)
    return Row("cache.db that cannot be opened", 2, held, 0, "named with what to do; test_cache_tampered")


def bad_input(base: Path) -> Row:
    cases = [
        "a: " + "[" * 20_000 + "]" * 20_000,
        "models:\n  m: &a {model: x, params: {p: *a}}\n",
        "grid:\n  style: [a]\n  style: [b]\n",
    ]
    held = 0
    for text in cases:
        try:
            load_yaml(text, "exp.yaml")
        except ConfigError:
            held += 1
    return Row("bad input: deep, circular, duplicate YAML", len(cases), held, 0, "test_bad_input")


def two_sweeps(base: Path) -> Row:
    with hold_results_dir(base / "out"):
        try:
            with hold_results_dir(base / "out"):
                return Row("two sweeps on one results dir", 1, 0, 1, "not stopped")
        except ResultsDirBusy:
            return Row("two sweeps on one results dir", 1, 1, 0, "stopped, naming the holder; test_results_dir_lock")


def full_results_disk(base: Path) -> Row:
    spec = {"name": "full", "loops": ["toy"], "config": {"model": "fake/auto", "max_iterations": 1}}
    exp = write_experiment(base, {**spec, "grid": {"style": ["a", "b"]}}, topics(1))
    args = ["sweep", str(exp), "--out", str(base / "out"), "--workers", "1", "--no-progress"]
    real, calls = os.fsync, [0]

    def full(fd: int) -> None:
        calls[0] += 1
        if calls[0] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    os.fsync = full  # type: ignore[assignment]
    try:
        with contextlib.redirect_stderr(open(os.devnull, "w")):  # noqa: SIM115
            first = main([*args, "--cache", str(base / "c")])
    finally:
        os.fsync = real
    again = main([*args, "--cache", str(base / "c")])
    ok = first == 4 and again == 0 and not list((base / "out").rglob("*.tmp"))
    return Row("full results disk", 1, int(ok), int(not ok), "exit 4, resumed; test_results_disk_full")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def full_results_disk_papermill(base: Path) -> Row:
    """A papermill sweep meeting a full results disk: a 2 MiB tmpfs nearly filled when root can mount one, else
    ENOSPC in the kernels' results writer. Held: exit 4 naming a file, no notebook cut short, no cell failed for
    it, and the same sweep resumes to every cell ok."""
    spec = {"name": "fullpm", "loops": ["p3ro"], "config": {"model": "fake/auto", "max_tokens": 64}}
    exp = write_experiment(base, {**spec, "grid": {"max_iterations": [1, 2, 3, 4]}}, topics(2))
    disk = base / "disk"
    tmpfs = mount_tmpfs(disk, "2m")
    out, err = disk / "out", io.StringIO()
    args = ["sweep", str(exp), "--out", str(out), "--executor", "papermill", "--workers", "2", "--no-progress"]
    args += ["--cache", str(base / "cache")]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            if tmpfs:
                filler = fill(disk, 120 * 2**10)
                first = main(args)
                filler.unlink()
            else:
                with enospc_in_kernels(base / "site", out / "cells"):
                    first = main(args)
            whole = _notebooks_whole(out) and all(s == "ok" for s in _statuses(out))
            again = main(args)
        ok = first == 4 and f": {out}" in err.getvalue() and whole and again == 0 and set(_statuses(out)) == {"ok"}
    finally:
        if tmpfs:
            unmount(disk)
    how = "2 MiB tmpfs" if tmpfs else "ENOSPC in the kernels"
    return Row("full results disk, papermill", 1, int(ok), int(not ok), f"{how}; test_results_disk_full_papermill")


def _notebooks_whole(out: Path) -> bool:
    try:
        for notebook in out.rglob("*.ipynb"):
            json.loads(notebook.read_bytes())
    except ValueError:
        return False
    return True


def _statuses(out: Path) -> list[str]:
    return [json.loads(p.read_text())["status"] for p in out.glob("cells/*/status.json")]


def run_battery(base: Path) -> list[Row]:
    """Every kind, each in a fresh folder under `base`."""
    kinds = [
        usage_under_a_cap,
        tampered_cache,
        password_in_url,
        reply_shapes,
        lone_surrogate_replayed,
        gzip_bomb,
        unopenable_cache,
        bad_input,
        two_sweeps,
        full_results_disk,
        full_results_disk_papermill,
    ]
    rows = []
    for kind in kinds:
        folder = base / kind.__name__
        folder.mkdir(parents=True, exist_ok=True)
        rows.append(kind(folder))
    return rows
