"""The Redis call cache against a real redis-server started on 127.0.0.1: the disk cache's keys, records and
write-once semantics; selection by URL, PROMPTLAB_CACHE and the CLI; sharing between processes; a server
that goes away; bad URLs. Skipped, with the reason, when no redis-server binary or redis client is there."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import CacheUnavailableError, ConfigError, MissingDependencyError
from promptlab.llm.cache.backend import encode_record
from promptlab.llm.cache.disk import Cache
from promptlab.llm.cache.location import open_cache

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
)
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A throwaway redis-server on 127.0.0.1 (no persistence)."""

    def __init__(self, password: str | None = None) -> None:
        if REDIS_SERVER is None:
            pytest.skip("no redis-server binary (apt-get install redis-server; .ci/run installs it)")
        redis = pytest.importorskip("redis", reason="the redis client is not installed (pip install redis)")
        self.port = free_port()
        self.url = f"redis://{f':{password}@' if password else ''}127.0.0.1:{self.port}/0"
        auth = ["--requirepass", password] if password else []
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", *auth],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = redis.Redis(host="127.0.0.1", port=self.port, db=0, password=password)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.client.ping()
                break
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"redis-server did not start on port {self.port}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    server = Server()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: Server) -> str:
    """The session server's URL, emptied for this test (our own throwaway server: FLUSHALL is fine here)."""
    redis_server.client.flushall()
    return redis_server.url


def dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


class Answer(BaseModel):
    value: int


@pytest.mark.slow
def test_write_once_the_first_of_two_writers_wins(redis_url: str) -> None:
    from promptlab.llm.cache.redis import RedisCache

    one, two = RedisCache(redis_url), RedisCache(redis_url)  # two clients, as two processes have
    first = pl.Completion(model="fake/x", text="first", key="k", input_tokens=3, output_tokens=5)
    assert one.add("k", first) is True
    assert two.add("k", first.model_copy(update={"text": "second"})) is False
    assert two.get("k") == first and one.get("k") == first
    assert two.get("absent") is None and "k" in two and "absent" not in two and len(two) == 1

    racers = [RedisCache(redis_url) for _ in range(8)]
    wins: list[bool] = []
    threads = [
        threading.Thread(
            target=lambda i=i: wins.append(
                racers[i].add("race", pl.Completion(model="fake/x", text=f"writer {i}", key="race"))
            )
        )
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    winner = one.get("race")
    assert winner is not None and all(r.get("race") == winner for r in racers)


@pytest.mark.slow
def test_records_are_the_disk_caches_json_under_the_prefix(
    redis_url: str, redis_server: Server, tmp_path: Path
) -> None:
    from promptlab.llm.cache.redis import RedisCache

    disk, red = Cache(tmp_path / "disk"), RedisCache(redis_url)
    record = pl.Completion(
        model="fake/x",
        text="t",
        key="abc",
        input_tokens=1,
        output_tokens=2,
        cost_usd=0.5,
        cache_hit=True,
        spent_cost_usd=0.1,
    )  # what one call spent is not stored
    disk.add("abc", record)
    red.add("abc", record)
    raw = redis_server.client.get("promptlab:v1:abc")
    assert raw is not None and raw.decode() == disk._dc.get("abc") == encode_record(record, "abc")
    assert red.get("abc") == disk.get("abc")


@pytest.mark.slow
def test_complete_hits_through_the_url_and_through_promptlab_cache(
    redis_url: str, redis_server: Server, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = pl.scripted("redis-hit", ["the reply", "a second reply"])
    a = pl.complete(m.name, "hello", cache=redis_url)
    b = pl.complete(m.name, "hello", cache=redis_url)
    assert (a.text, a.cache_hit, b.text, b.cache_hit, len(m.requests)) == ("the reply", False, "the reply", True, 1)
    assert redis_server.client.exists(f"promptlab:v1:{a.key}")

    monkeypatch.setenv("PROMPTLAB_CACHE", redis_url)
    c = pl.complete(m.name, "hello")  # the default cache is now the Redis one
    assert (c.text, c.cache_hit, len(m.requests)) == ("the reply", True, 1)
    assert not isolated_cache.exists() or len(Cache(isolated_cache)) == 0  # PROMPTLAB_CACHE_DIR was not used
    assert pl.open_cache().location == redis_url


@pytest.mark.slow
def test_structured_calls_replay_their_replies_from_redis(redis_url: str) -> None:
    m = pl.scripted("redis-structured", ["not json", '{"value": 7}'])
    first = pl.complete(m.name, "a number", schema=Answer, cache=redis_url)
    pl.open_cache(redis_url).discard(first.key)  # only the replies are left: the repair replays them
    again = pl.complete(m.name, "a number", schema=Answer, cache=redis_url)
    assert first.parsed == again.parsed == Answer(value=7) and len(m.requests) == 2
    assert (again.input_tokens, again.output_tokens) == (first.input_tokens, first.output_tokens)
    assert again.billed_input_tokens == 0 and again.billed_output_tokens == 0  # replayed replies cost nothing


def _loop_frames(cache: str) -> tuple[object, object]:
    from promptlab.results.frames import tidy

    config = {"model": "fake/auto", "max_tokens": 64, "max_iterations": 2}
    first = pl.run_loop("p3ro", {"id": "t1", "prompt": "Write a haiku", "goal": "about rain"}, config, cache=cache)
    again = pl.run_loop("p3ro", {"id": "t1", "prompt": "Write a haiku", "goal": "about rain"}, config, cache=cache)
    assert again.totals.cache_hits == again.totals.calls > 0 and first.totals.cache_hits == 0
    traj, runs = tidy([again], {}, "c")
    drop = [c for c in ("run_id", "wall_time_s") if c in runs.columns]
    return traj.drop(columns=["run_id"]), runs.drop(columns=drop)


@pytest.mark.slow
def test_a_replayed_loop_gives_the_same_frames_from_redis_as_from_disk(redis_url: str, tmp_path: Path) -> None:
    import pandas as pd

    disk_traj, disk_runs = _loop_frames(str(tmp_path / "disk"))
    red_traj, red_runs = _loop_frames(redis_url)
    assert len(disk_traj) > 1 and len(disk_runs) == 1  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(disk_traj, red_traj)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(disk_runs, red_runs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_disk_records_copied_to_redis_read_back_identically(redis_url: str, tmp_path: Path) -> None:
    from promptlab.llm.cache.redis import RedisCache

    disk = tmp_path / "disk"
    m = pl.scripted("redis-copy", ["plain text", "nope", '{"value": 3}'])
    calls = [
        lambda cache: pl.complete(m.name, "one", cache=cache),
        lambda cache: pl.complete(m.name, "two", schema=Answer, cache=cache, logprobs=True),
    ]
    for call in calls:
        call(disk)
    store, red = Cache(disk), RedisCache(redis_url)
    keys = list(store._dc.iterkeys())
    assert len(keys) == 4  # two completions, two replies of the structured call
    for key in keys:  # verbatim: the JSON text itself
        red._r.set(f"promptlab:v1:{key}", store._dc.get(key))
    for call in calls:
        from_disk, from_redis = call(disk), call(redis_url)
        assert from_disk.cache_hit and from_redis.cache_hit
        assert from_disk.model_dump() == from_redis.model_dump()
    assert len(m.requests) == 3


SHARED = """
import json, sys
import promptlab as pl
m = pl.scripted("redis-shared", [sys.argv[1]] if sys.argv[1] != "-" else [RuntimeError("the model was called")])
c = pl.complete(m.name, "shared question", **({"cache": sys.argv[2]} if len(sys.argv) > 2 else {}))
print(json.dumps({"text": c.text, "hit": c.cache_hit, "calls": len(m.requests), "key": c.key}))
"""


def _process(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", SHARED, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_second_process_replays_without_calling_the_model(redis_url: str, tmp_path: Path) -> None:
    first = _process("from the first process", redis_url)
    assert first == {"text": "from the first process", "hit": False, "calls": 1, "key": first["key"]}
    # the second process has its own working directory and disk cache, and only PROMPTLAB_CACHE in common
    second = _process("-", env={"PROMPTLAB_CACHE": redis_url, "PROMPTLAB_CACHE_DIR": str(tmp_path / "other")})
    assert second == {"text": "from the first process", "hit": True, "calls": 0, "key": first["key"]}


@pytest.mark.slow
def test_cli_stats_verify_and_clear_touch_only_promptlabs_keys(
    redis_url: str, redis_server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    m = pl.scripted("redis-cli", ["a", "b"])
    pl.complete(m.name, "one", cache=redis_url)
    pl.complete(m.name, "two", cache=redis_url)
    client = redis_server.client
    client.set("someone-else:key", "keep me")
    client.set("promptlab:v2:future", "not ours either")
    client.set("promptlab:v1:garbage", "{not json")
    client.hset("promptlab:v1:a-hash", "field", "value")

    assert main(["cache", "stats", "--dir", redis_url]) == 0
    assert f"cache {redis_url}: 4 entries" in capsys.readouterr().out

    assert main(["cache", "verify", "--dir", redis_url]) == 1
    out = capsys.readouterr().out
    assert "4 entries, 2 ok, 2 bad" in out and "garbage" in out and "a-hash" in out
    assert main(["cache", "verify", "--fix", "--dir", redis_url]) == 1
    assert "(removed)" in capsys.readouterr().out
    assert main(["cache", "verify", "--dir", redis_url]) == 0
    assert "2 entries, 2 ok, 0 bad; database integrity: ok" in capsys.readouterr().out

    assert main(["cache", "clear", "--dir", redis_url]) == 0
    assert f"cleared 2 entries from {redis_url}" in capsys.readouterr().out
    assert sorted(k.decode() for k in client.keys("*")) == ["promptlab:v2:future", "someone-else:key"]
    assert client.get("someone-else:key") == b"keep me"


def test_an_unreachable_server_fails_before_any_model_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("redis", reason="the redis client is not installed (pip install redis)")
    url = dead_url()
    m = pl.scripted("redis-dead", ["never"])
    monkeypatch.setenv("PROMPTLAB_CACHE", url)
    with pytest.raises(CacheUnavailableError) as e:
        pl.complete(m.name, "hello")
    assert "PROMPTLAB_CACHE" in str(e.value) and f"127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}" in str(e.value)
    assert e.value.infrastructure and m.requests == []
    with pytest.raises(CacheUnavailableError, match="the cache argument"):
        pl.complete(m.name, "hello", cache=url)
    assert m.requests == []
    assert main(["cache", "stats", "--dir", url]) == 2
    err = capsys.readouterr().err
    assert "--dir" in err and url in err and "unavailable" in err


@pytest.mark.parametrize(
    ("location", "says"),
    [
        ("redis://127.0.0.1:notaport/0", "not a usable Redis URL"),
        ("redis://127.0.0.1:6379/zero", "database must be a number"),
        ("memcached://127.0.0.1:11211", "unknown scheme 'memcached'"),
    ],
)
def test_a_bad_url_is_a_config_error_naming_promptlab_cache(
    location: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("redis", reason="the redis client is not installed (pip install redis)")
    monkeypatch.setenv("PROMPTLAB_CACHE", location)
    m = pl.scripted("redis-bad-url", ["never"])
    with pytest.raises(ConfigError, match=says) as e:
        pl.complete(m.name, "hello")
    assert "PROMPTLAB_CACHE" in str(e.value) and m.requests == []


def test_a_url_in_promptlab_cache_dir_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLAB_CACHE_DIR", "redis://127.0.0.1:6379/0")
    with pytest.raises(ConfigError, match="PROMPTLAB_CACHE_DIR is a directory.*PROMPTLAB_CACHE"):
        pl.complete(pl.scripted("redis-dir-url", ["never"]).name, "hello")


def test_a_password_is_masked_in_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("redis", reason="the redis client is not installed (pip install redis)")
    url = dead_url().replace("redis://", "redis://:hunter2@")
    with pytest.raises(CacheUnavailableError) as e:
        open_cache(url)
    assert "hunter2" not in str(e.value) and ":***@127.0.0.1" in str(e.value)


def test_without_the_redis_package_the_error_says_pip_install_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptlab.llm.cache.redis import RedisCache

    monkeypatch.setitem(sys.modules, "redis", None)  # import redis now raises ImportError
    with pytest.raises(MissingDependencyError, match="pip install redis"):
        RedisCache("redis://127.0.0.1:6379/0", origin="PROMPTLAB_CACHE")


@pytest.mark.slow
def test_the_disk_cache_never_imports_redis(tmp_path: Path) -> None:
    code = (
        "import sys, promptlab as pl; m = pl.scripted('no-redis', ['x']); "
        f"pl.complete(m.name, 'hi', cache={str(tmp_path)!r}); print('redis' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_a_server_lost_after_the_reply_keeps_the_reply_then_stops_the_work(caplog: pytest.LogCaptureFixture) -> None:
    """Redis goes away mid-sweep: the paid reply is returned (with a warning that it is not cached); the next
    call's read raises CacheUnavailableError -- an infrastructure failure, not a miss that pays again."""
    server = Server()  # its own server: this test shuts it down
    try:

        def reply_then_lose_the_server(messages: list[dict[str, object]]) -> str:
            server.client.shutdown(nosave=True)
            server.proc.wait(10)
            return "paid for"

        m = pl.scripted("redis-lost", [reply_then_lose_the_server, "must not be asked"])
        with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
            c = pl.complete(m.name, "hello", cache=server.url)
        assert (c.text, c.cache_hit, len(m.requests)) == ("paid for", False, 1)
        assert c.output_tokens and any("not cached" in r.getMessage() for r in caplog.records)
        with pytest.raises(CacheUnavailableError) as e:
            pl.complete(m.name, "another question", cache=server.url)
        assert not isinstance(e.value, pl.ProviderError) and len(m.requests) == 1
    finally:
        server.stop()


@pytest.mark.slow
def test_a_server_lost_between_the_replies_of_a_structured_call_is_no_provider_error() -> None:
    """A reply read mid-call that fails is a cache outage (raised as such), never a provider error to retry."""
    server = Server()
    try:

        def bad_then_lose_the_server(messages: list[dict[str, object]]) -> str:
            server.client.shutdown(nosave=True)
            server.proc.wait(10)
            return "not json"

        m = pl.scripted("redis-lost-structured", [bad_then_lose_the_server, '{"value": 1}'])
        with pytest.raises(CacheUnavailableError):
            pl.complete(m.name, "a number", schema=Answer, cache=server.url)
        assert len(m.requests) == 1  # the repair was not sent: its replay could not be looked up
    finally:
        server.stop()


def test_a_cache_outage_fails_a_sweep_cell_as_infrastructure() -> None:
    from promptlab.sweeps.cells import Cell
    from promptlab.sweeps.execute import cell_error

    cell = Cell(cell_id="c1", loop="p3ro", params={"loop": "p3ro"}, config={})
    err = CacheUnavailableError("redis://127.0.0.1:1/0", "connection refused", origin="PROMPTLAB_CACHE")
    assert cell_error(cell, err)["kind"] == "infrastructure"
    assert cell_error(cell, ename="CacheUnavailableError", evalue="...")["kind"] == "infrastructure"  # papermill


@pytest.mark.slow
def test_acomplete_hits_through_redis(redis_url: str) -> None:
    import asyncio

    m = pl.scripted("redis-async", ["async reply", "never"])

    async def twice() -> tuple[pl.Completion, pl.Completion]:
        first = await pl.acomplete(m.name, "hello", cache=redis_url)
        return first, await pl.acomplete(m.name, "hello", cache=redis_url)

    a, b = asyncio.run(twice())
    assert (a.cache_hit, b.cache_hit, b.text, len(m.requests)) == (False, True, "async reply", 1)


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["inline", "papermill", "dask"])
def test_a_sweep_in_a_new_results_dir_replays_every_call_from_redis(
    executor: str, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptlab.results.store import load
    from promptlab.sweeps.experiment import Experiment
    from promptlab.sweeps.run import sweep

    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}) + "\n")
    exp = Experiment.from_dict(
        {
            "name": "rs",
            "loops": ["p3ro"],
            "tasks": "tasks.jsonl",
            "config": {"model": "fake/auto", "max_tokens": 64},
            "grid": {"max_iterations": [1, 2] if executor == "inline" else [1]},
        },
        tmp_path,
    )
    first = sweep(exp, tmp_path / "out1", executor=executor, cache=redis_url, progress=False)
    assert first.failed == 0 and first.done > 0, str(first)
    monkeypatch.setenv("PROMPTLAB_CACHE", redis_url)  # the second sweep finds it through the environment
    monkeypatch.chdir(tmp_path)
    second = sweep(exp, tmp_path / "out2", executor=executor, progress=False)
    assert second.failed == 0 and second.done == first.done, str(second)
    runs = load(tmp_path / "out2").runs
    assert (runs["cache_hits"] == runs["calls"]).all() and (runs["calls"] > 0).all()
    assert not (tmp_path / ".promptlab").exists()  # no disk cache was made in the working directory


def test_a_sweep_with_an_unreachable_cache_fails_before_any_cell(tmp_path: Path) -> None:
    pytest.importorskip("redis", reason="the redis client is not installed (pip install redis)")
    from promptlab.sweeps.experiment import Experiment
    from promptlab.sweeps.run import sweep

    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "p", "goal": "g"}) + "\n")
    exp = Experiment.from_dict(
        {"name": "dead", "loops": ["p3ro"], "tasks": "tasks.jsonl", "config": {"model": "fake/auto"}}, tmp_path
    )
    with pytest.raises(CacheUnavailableError):
        sweep(exp, tmp_path / "out", cache=dead_url(), progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_papermill_sweep_keeps_the_redis_password_out_of_every_notebook(tmp_path: Path) -> None:
    """#21 item 20: the password reaches each kernel in its environment; no file of the results dir holds it."""
    import base64

    from promptlab.sweeps.experiment import Experiment
    from promptlab.sweeps.run import sweep

    password = "pw-" + "Xk29vQ7t" * 3
    server = Server(password=password)
    try:
        (tmp_path / "tasks.jsonl").write_text(
            json.dumps({"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}) + "\n"
        )
        exp = Experiment.from_dict(
            {
                "name": "pw",
                "loops": ["p3ro"],
                "tasks": "tasks.jsonl",
                "config": {"model": "fake/auto", "max_tokens": 64, "max_iterations": 1},
            },
            tmp_path,
        )
        result = sweep(exp, tmp_path / "out", executor="papermill", workers=1, cache=server.url, progress=False)
        assert result.failed == 0 and result.done == 1, str(result)
        assert len(list(server.client.scan_iter("promptlab:v1:*"))) > 0  # the kernel did use the Redis cache
        notebooks = list((tmp_path / "out").rglob("*.ipynb"))
        assert notebooks
        needles = [password.encode(), base64.b64encode(password.encode())]
        leaks = [
            str(p) for p in (tmp_path / "out").rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)
        ]
        assert leaks == []
    finally:
        server.stop()


# #41 item 3: a full Redis says so once, and stops the work -------------------------------------------------------
def _fill_to(server: Server, room: int) -> None:
    """Let the server hold only `room` more bytes (maxmemory with noeviction, Redis's default policy)."""
    used = int(server.client.info("memory")["used_memory"])
    server.client.config_set("maxmemory-policy", "noeviction")
    server.client.config_set("maxmemory", str(used + room))


@pytest.mark.slow
def test_a_full_redis_stores_nothing_more_says_so_once_and_stops_the_next_call(
    redis_server: Server, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from promptlab.llm.cache.redis import RedisCache

    store = RedisCache(redis_url)
    model = pl.scripted("redis-full", respond=lambda m: "r" * 2000 + m[-1]["content"])
    _fill_to(redis_server, 20_000)
    paid: list[pl.Completion] = []
    try:
        with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"), pytest.raises(CacheUnavailableError) as e:
            for i in range(200):
                paid.append(pl.complete(model.name, f"p{i}", cache=store))
        unstored = [c for c in paid if c.key not in store]
        assert len(unstored) == 1 and unstored[0] is paid[-1]  # only the reply in flight when it filled
        assert len(model.requests) == len(paid)  # no request after the full write: the next call stopped first
        assert "is full" in str(e.value) and "1 paid reply could not be stored" in str(e.value)
        assert caplog.text.count("is full") == 1  # said once
        redis_server.client.config_set("maxmemory", "0")  # room again: a resume replays what was stored
        again = RedisCache(redis_url)
        replayed = [pl.complete(model.name, f"p{i}", cache=again) for i in range(len(paid))]
        assert sum(not c.cache_hit for c in replayed) == 1  # the documented bound: the call in flight
    finally:
        redis_server.client.config_set("maxmemory", "0")


@pytest.mark.slow
def test_a_sweep_on_a_full_redis_exits_non_zero_naming_it(
    redis_server: Server, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    (tmp_path / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"Write poem {i}.", "goal": "A haiku."}) + "\n" for i in range(4))
    )
    (tmp_path / "exp.yaml").write_text(
        "name: full\nloops: [p3ro]\ntasks: tasks.jsonl\nconfig: {model: fake/auto, max_tokens: 64}\n"
        "grid: {max_iterations: [1, 2]}\n"
    )
    args = ["sweep", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "out"), "--no-progress", "--workers", "1"]
    _fill_to(redis_server, 6_000)
    try:
        code = main([*args, "--cache", redis_url])
        said = capsys.readouterr()
        assert code == 1 and "is full" in said.out + said.err
        redis_server.client.config_set("maxmemory", "0")
        assert main([*args, "--cache", redis_url]) == 0  # resumed once there is room
    finally:
        redis_server.client.config_set("maxmemory", "0")


@pytest.mark.slow
def test_an_evicting_policy_is_named_once_at_open(
    redis_server: Server, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from promptlab.llm.cache.redis import RedisCache

    redis_server.client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
            RedisCache(redis_url)
        assert "maxmemory-policy allkeys-lru" in caplog.text and "paid again" in caplog.text
    finally:
        redis_server.client.config_set("maxmemory-policy", "noeviction")


def test_a_cache_read_waiting_on_redis_never_holds_the_event_loop(redis_url: str, redis_server: Server) -> None:
    """#41 item 4 for the cache: a lookup waits on the server (here paused for 2 s, as a busy or distant Redis
    makes it wait) in a worker thread, so the event loop goes on with the other calls meanwhile. Shown by what
    overlapped: the other coroutine finishes while the read still waits (before, it could not even start)."""
    store = open_cache(redis_url)
    model = pl.scripted("redis-paused", respond=lambda msgs: "stored")
    pl.complete(model.name, "p", cache=store)
    order: list[str] = []

    async def read() -> pl.Completion:
        c = await pl.acomplete(model.name, "p", cache=store)
        order.append("read")
        return c

    async def other() -> None:
        for _ in range(3):
            await asyncio.sleep(0.01)
        order.append("other")

    async def main() -> pl.Completion:
        redis_server.client.execute_command("CLIENT", "PAUSE", 2000, "ALL")
        hit, _ = await asyncio.gather(read(), other())
        return hit

    try:
        hit = asyncio.run(main())
    finally:
        redis_server.client.execute_command("CLIENT", "UNPAUSE")
    assert hit.cache_hit and len(model.requests) == 1
    assert order == ["other", "read"]
