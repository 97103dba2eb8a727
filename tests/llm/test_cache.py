"""The cache heals: a corrupt database is copied aside (one warning) and work goes on; `cache stats`,
`clear` and `verify` work on a corrupt cache; a lost value file is logged as a miss."""

from __future__ import annotations

import logging
from pathlib import Path

import diskcache
import pytest

import promptlab as pl
from promptlab.cli import main
from promptlab.llm.cache.disk import Cache


def corrupt(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cache.db").write_bytes(b"this is not an sqlite database " * 200)


def test_a_corrupt_database_is_moved_aside_and_calls_go_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "c"
    corrupt(cache)
    m = pl.scripted("after-corruption", ["still works", "again"])
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        a = pl.complete(m.name, "hello", cache=cache)
        b = pl.complete(m.name, "hello", cache=cache)
    assert (a.text, a.cache_hit, b.cache_hit) == ("still works", False, True)
    aside = list(cache.glob("cache.db.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not")
    assert sum("corrupt" in r.getMessage() for r in caplog.records) == 1


def test_corruption_found_after_opening_heals_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = Cache(tmp_path / "c")
    store.add("k", pl.Completion(model="fake/x", text="t", key="k"))
    store._dc.close()
    corrupt(tmp_path / "c")  # the file goes bad under an open cache
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        assert store.get("k") is None
        store.add("k2", pl.Completion(model="fake/x", text="t2", key="k2"))
        assert store.get("k2") is not None
    assert sum("corrupt" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("action", ["stats", "clear", "verify"])
def test_cli_cache_commands_work_on_a_corrupt_cache(
    tmp_path: Path, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / f"c-{action}"
    corrupt(cache)
    assert main(["cache", action, "--dir", str(cache)]) == (1 if action == "verify" else 0)
    out = capsys.readouterr().out
    assert str(cache.resolve()) in out
    if action in ("stats", "verify"):
        assert "copied aside" in out
    if action == "verify":  # what it found and what it moved, never "ok" (#21 item 13)
        assert "was corrupt and was copied aside as cache.db.corrupt-" in out and "(file is not a database)" in out


def test_verify_finds_bad_entries_and_fix_removes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "v"
    m = pl.scripted("verify-model", ["short", "x" * 100_000])
    pl.complete(m.name, "one", cache=cache)
    big = pl.complete(m.name, "two", cache=cache)
    with diskcache.Cache(str(cache)) as dc:
        dc.set("garbage", "{not json")
        dc.set("wrong-shape", '{"hello": 1}')
    value_files = [p for p in cache.rglob("*.val")]
    assert len(value_files) == 1
    value_files[0].unlink()  # the big reply's value file is lost
    assert main(["cache", "verify", "--dir", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "4 entries, 1 ok, 3 bad" in out and "value file missing" in out
    assert main(["cache", "verify", "--fix", "--dir", str(cache)]) == 1
    assert main(["cache", "verify", "--dir", str(cache)]) == 0
    assert "1 entries, 1 ok, 0 bad" in capsys.readouterr().out
    assert big.key not in pl.open_cache(cache)


def test_a_lost_value_file_is_logged_as_a_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "m"
    m = pl.scripted("lost-value", ["y" * 100_000, "y" * 100_000])
    first = pl.complete(m.name, "big", cache=cache)
    for p in cache.rglob("*.val"):
        p.unlink()
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        again = pl.complete(m.name, "big", cache=cache)
    assert not again.cache_hit and len(m.requests) == 2 and again.key == first.key
    assert any("value file" in r.getMessage() for r in caplog.records)


def test_a_failed_write_keeps_the_paid_reply_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    store = Cache(tmp_path / "w")

    def locked(*args: object, **kwargs: object) -> bool:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(store._dc, "add", locked)
    m = pl.scripted("write-fails", ["paid reply", "second"])
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        c = pl.complete(m.name, "hello", cache=store)
    assert (c.text, c.cache_hit, len(m.requests)) == ("paid reply", False, 1)  # no retry, no provider error
    assert any("not cached" in r.getMessage() for r in caplog.records) and c.key not in store


def test_a_named_cache_directory_follows_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptlab.llm.cache.location import open_cache

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = open_cache("calls")
    assert open_cache("calls") is first and open_cache(str(tmp_path / "a" / "calls")) is first
    monkeypatch.chdir(tmp_path / "b")
    second = open_cache("calls")  # the same relative name elsewhere is another cache
    assert second is not first and second.directory == (tmp_path / "b" / "calls").resolve()
    assert first.directory == (tmp_path / "a" / "calls").resolve()


def test_a_full_disk_is_said_once_and_the_next_call_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#41 item 3: a cache that cannot store says so once, and the next call on it stops (as a full Redis does):
    paying for calls that cannot be stored would pay for them again on every resume."""
    import sqlite3

    from promptlab.errors import CacheUnavailableError

    store = Cache(tmp_path / "full")

    def full(*args: object, **kwargs: object) -> bool:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store._dc, "add", full)
    m = pl.scripted("said-once", respond=lambda msgs: "paid " + msgs[-1]["content"])
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        paid = pl.complete(m.name, "p0", cache=store)
        with pytest.raises(CacheUnavailableError, match="its disk is full .*1 paid reply could not be stored"):
            pl.complete(m.name, "p1", cache=store)
    assert paid.text == "paid p0" and store.unstored == 1 and len(m.requests) == 1
    assert caplog.text.count("its disk is full") == 1 and "next call on this cache stops" in caplog.text
