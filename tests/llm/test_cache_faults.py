"""The disk cache under faults (#21 items 11-14): a full disk, a database truncated mid-run, `verify` on a
corrupt database, a record stored under another request's key."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import diskcache
import pytest

import promptlab as pl
from promptlab.cli import main
from promptlab.llm.cache.disk import Cache, CacheDiskFullError
from promptlab.llm.cache.location import open_cache
from promptlab.llm.cache.readonly import ReadOnlyCache
from promptlab.llm.call.transport import Reply

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs: run as root")


def record(key: str, text: str = "t") -> pl.Completion:
    return pl.Completion(model="fake/x", text=text, key=key)


def fill(folder: Path) -> None:
    """Fill the file system holding `folder` until a write fails for lack of space."""
    fd = os.open(folder / "filler.bin", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
    for i in range(10_000):  # and its inodes' last bytes: small files until none fits
        try:
            (folder / f"f{i}").write_bytes(b"x" * 512)
        except OSError:
            break


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`promptlab ...` in a fresh process (as the next sweep would be)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "promptlab.cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


# 11. a full disk ----------------------------------------------------------------------------------------------
@as_root
@pytest.mark.slow
def test_a_full_cache_disk_keeps_paid_replies_and_the_next_run_opens_read_only(small_disk: Path) -> None:
    cache = small_disk / "cache"
    first = cli(
        "run",
        "p3ro",
        "--prompt",
        "Write a poem",
        "--model",
        "fake/auto",
        "--cache",
        str(cache),
        "--quiet",
        "--set",
        "max_iterations=1",
        cwd=small_disk.parent,
    )
    assert first.returncode == 0, first.stderr
    store = Cache(cache)  # open before the disk fills: a write then fails, the paid reply is kept
    fill(small_disk)
    m = pl.scripted("full-disk", ["paid reply", "paid again"])
    c = pl.complete(m.name, "not stored", cache=store)
    assert (c.text, c.cache_hit) == ("paid reply", False) and c.key not in store
    with pytest.raises(CacheDiskFullError, match=f"call cache {cache} .*is unavailable: its disk is full"):
        Cache(cache)
    again = cli(
        "run",
        "p3ro",
        "--prompt",
        "Write a poem",
        "--model",
        "fake/auto",
        "--cache",
        str(cache),
        "--quiet",
        "--set",
        "max_iterations=1",
        cwd=small_disk.parent,
    )
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert f"{cache} (set by --cache) is read-only" in again.stderr and "disk is full" in again.stderr
    calls = again.stdout.split("totals: ")[1].split()[0]
    assert f"{calls} calls ({calls} cached" in again.stdout  # every stored reply replayed: none paid twice
    other = cli(
        "run",
        "p3ro",
        "--prompt",
        "Another prompt",
        "--model",
        "fake/auto",
        "--cache",
        str(cache),
        "--quiet",
        "--set",
        "max_iterations=1",
        cwd=small_disk.parent,
    )
    said = other.stderr  # its first paid reply cannot be stored: said once, and the next call stops (as a full Redis)
    assert other.returncode == 1 and said.count("a paid reply was not stored") == 1, said  # ran: not "refused" (2)
    assert "promptlab: run incomplete: " in said
    assert "no more calls are made on it: free space there, then resume" in said and "Traceback" not in said


def test_opening_on_a_full_disk_gives_a_read_only_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The same as above without root: SQLite's own 'database or disk is full' while diskcache opens."""
    directory = tmp_path / "c"
    m = pl.scripted("ro-cache", ["first", "second"])
    stored = pl.complete(m.name, "stored", cache=Cache(directory))
    real = diskcache.Cache

    def full(*args: object, **kwargs: object) -> diskcache.Cache:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(diskcache, "Cache", full)
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        ro = open_cache(directory, origin="--cache")
    assert (
        isinstance(ro, ReadOnlyCache)
        and "read-only" in caplog.text
        and "(set by --cache) is read-only (its disk is full" in caplog.text
    )
    hit = pl.complete(m.name, "stored", cache=ro)
    new = pl.complete(m.name, "new", cache=ro)
    assert (hit.cache_hit, hit.text, new.cache_hit, new.text, len(m.requests)) == (
        True,
        stored.text,
        False,
        "second",
        2,
    )
    assert new.key not in ro and len(ro) == 1 and ro.verify().ok == 1
    monkeypatch.setattr(diskcache, "Cache", real)


# 12. truncated mid-run ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", ["empty", "half"])
def test_a_database_truncated_mid_run_heals_for_every_thread_and_every_opener(
    tmp_path: Path, size: str, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = Cache(tmp_path), Cache(tmp_path)  # two openers, as two processes of a sweep
    for i in range(300):
        one.add(f"old{i}", record(f"old{i}", "x" * 400))
    db = tmp_path / "cache.db"
    os.truncate(db, 0 if size == "empty" else db.stat().st_size // 2)
    results: dict[str, object] = {}

    def work(store: Cache, tag: str) -> None:
        for i in range(8):
            key = f"{tag}{i}"
            try:
                store.get(key)
                results[key] = store.add(key, record(key))
            except Exception as e:  # noqa: BLE001 -- recorded, the assertion shows it
                results[key] = repr(e)

    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        threads = [
            threading.Thread(target=work, args=(s, t)) for s, t in ((one, "a"), (two, "b"), (one, "c"), (two, "d"))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert set(results.values()) == {True}, results
    fresh = Cache(tmp_path)  # what a later process reads: every write after the heal, none in the moved file
    assert all(fresh.get(k) is not None and one.get(k) is not None and two.get(k) is not None for k in results)
    assert len(list(tmp_path.glob("cache.db.corrupt-*[0-9]"))) == 1
    assert "no such table" not in caplog.text.replace("is corrupt (no such table", "")


def test_a_connection_open_from_before_a_heal_cannot_take_the_fresh_database_with_it(tmp_path: Path) -> None:
    """A connection another opener held on the damaged file from before the heal closes after it: with a write-ahead
    log it would delete the fresh database's -wal (named by path) and every entry written since; with the
    rollback journal the cache keeps, the entries stay."""
    here, there = Cache(tmp_path), Cache(tmp_path)
    here.add("before", record("before"))
    assert there.get("before") is not None  # `there` has a connection open on the file about to go bad
    stale = there._dc
    os.truncate(tmp_path / "cache.db", 0)
    assert here.get("x") is None  # heals: the empty file is copied aside and started afresh in place
    for i in range(5):
        here.add(f"after{i}", record(f"after{i}"))
    stale.close()  # the last connection from before the heal goes
    assert all(Cache(tmp_path).get(f"after{i}") is not None for i in range(5))
    assert there.get("after0") is not None and here._dc._sql("PRAGMA journal_mode").fetchone()[0] == "truncate"


def test_a_heal_in_another_process_is_followed_here(tmp_path: Path) -> None:
    """Another process moves the corrupt file aside: this one's writes go to the fresh file, not the old one."""
    here = Cache(tmp_path)
    here.add("before", record("before"))
    os.truncate(tmp_path / "cache.db", 0)
    code = (
        "import sys; from promptlab.llm.cache.disk import Cache; import promptlab as pl\n"
        "c = Cache(sys.argv[1]); c.get('x'); c.add('theirs', pl.Completion(model='m', text='t', key='theirs'))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60)
    assert len(list(tmp_path.glob("cache.db.corrupt-*[0-9]"))) == 1
    assert here.add("mine", record("mine")) and here.get("theirs") is not None
    assert Cache(tmp_path).get("mine") is not None  # a later opener reads it: it is in the live file


def test_calls_after_a_heal_are_not_paid_again(tmp_path: Path) -> None:
    store = Cache(tmp_path)
    m = pl.scripted("after-heal", ["one", "two", "three"])
    pl.complete(m.name, "a", cache=store)
    os.truncate(tmp_path / "cache.db", 0)
    b1 = pl.complete(m.name, "b", cache=store)
    b2 = pl.complete(m.name, "b", cache=store)
    assert (b1.cache_hit, b2.cache_hit, b2.text, len(m.requests)) == (False, True, b1.text, 2)


# 13. verify on a corrupt database -----------------------------------------------------------------------------
def test_verify_on_a_truncated_database_says_what_it_moved_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Cache(tmp_path / "v")
    for i in range(50):
        store.add(f"k{i}", record(f"k{i}", "y" * 300))
    store.close()
    db = tmp_path / "v" / "cache.db"
    db.write_bytes(b"garbage" * 100 + db.read_bytes()[700:])
    assert main(["cache", "verify", "--dir", str(tmp_path / "v")]) == 1
    out = capsys.readouterr().out
    assert "the database was corrupt and was copied aside as cache.db.corrupt-" in out
    assert "its entries are gone" in out and "integrity ok" not in out


# 14. a record under another request's key ----------------------------------------------------------------------
def test_a_record_under_another_key_is_a_miss_with_a_warning_and_a_verify_problem(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "k"
    m = pl.scripted("swapped", ["answer A", "answer B", "answer A again"])
    a = pl.complete(m.name, "question A", cache=directory)
    b = pl.complete(m.name, "question B", cache=directory)
    store = Cache(directory)
    store.add("reply-1", Reply(text="raw 1"))
    store.add("reply-2", Reply(text="raw 2"))
    with diskcache.Cache(str(directory)) as dc:
        dc.set(a.key, dc.get(b.key))  # B's record under A's key
        dc.set("reply-1", dc.get("reply-2"))
    assert main(["cache", "verify", "--dir", str(directory)]) == 1
    out = capsys.readouterr().out
    assert out.count("stored under the wrong key") == 2 and "4 entries, 2 ok, 2 bad" in out
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        again = pl.complete(m.name, "question A", cache=directory)
        assert store.get("reply-1", Reply) is None and store.get("reply-2", Reply) is not None
    assert (again.cache_hit, again.text, len(m.requests)) == (False, "answer A again", 3)  # never B's answer
    assert caplog.text.count("stored under the wrong key") == 2
    assert pl.complete(m.name, "question A", cache=directory).text == "answer A again"  # the right record now
