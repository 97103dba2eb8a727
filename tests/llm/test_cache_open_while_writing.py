"""A directory cache opens while other processes write to it: a commit in progress is waited out, never taken for
a stranger's database (it once failed a Dask sweep's cell: 'database is locked ... it is not a promptlab cache')."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import diskcache
import pytest

import promptlab as pl
from promptlab.llm.cache.disk import Cache
from promptlab.llm.cache.entries import unopenable

WRITER = """
import sys, pathlib
from promptlab.llm.cache.disk import Cache
import promptlab as pl
directory, stop = sys.argv[1], pathlib.Path(sys.argv[2])
i = 0
while not stop.exists():
    c = Cache(directory)  # opening also races the other writer's commits
    for _ in range(5):
        c.add(f"{sys.argv[3]}-{i}", pl.Completion(model="m", text="x" * 300, key=f"{sys.argv[3]}-{i}"))
        i += 1
    c.close()
print(i)
"""


def test_opening_a_cache_while_two_processes_write_to_it_never_fails(tmp_path: Path) -> None:
    Cache(tmp_path).close()
    stop = tmp_path / "stop"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(stop), f"w{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    try:
        probe = Cache(tmp_path)
        while not all(probe.get(f"w{n}-0") is not None for n in range(2)):  # both writers are writing
            assert all(w.poll() is None for w in writers), [w.communicate()[1][-2000:] for w in writers]
            time.sleep(0.01)
        opened = []
        for i in range(400):
            c = Cache(tmp_path)
            opened.append(c.add(f"here-{i}", pl.Completion(model="m", text="y", key=f"here-{i}")))
            c.close()
    finally:
        stop.touch()
        outs = [w.communicate(timeout=120) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], [err[-2000:] for _, err in outs]
    assert opened == [True] * 400
    written = sum(int(out) for out, _ in outs)
    assert Cache(tmp_path).stats()["entries"] == written + 400


HOLDER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
con.execute("BEGIN EXCLUSIVE")  # what another process's commit holds, for a moment
print("held", flush=True)
time.sleep(0.3)
con.execute("COMMIT")
"""


def test_a_commit_that_lands_while_diskcache_sets_up_is_waited_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The moment that failed the Dask sweep, made certain: another process takes the write lock just before
    diskcache's one set-up statement without a retry (it runs with SQLite's busy timeout at 0)."""
    Cache(tmp_path).close()
    original, holders = diskcache.Cache.drop_tag_index, []

    def lock_first(self: diskcache.Cache) -> None:
        if not holders:
            cmd = [sys.executable, "-c", HOLDER, str(tmp_path / "cache.db")]
            holders.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
            assert holders[0].stdout is not None and holders[0].stdout.readline() == "held\n"
        original(self)

    monkeypatch.setattr(diskcache.Cache, "drop_tag_index", lock_first)
    c = Cache(tmp_path)
    assert holders[0].wait(timeout=60) == 0
    assert c.add("k", pl.Completion(model="m", text="y", key="k")) and Cache(tmp_path).get("k") is not None


def test_a_cache_locked_for_good_is_named_as_locked_not_as_a_stranger(tmp_path: Path) -> None:
    why = unopenable(tmp_path / "cache.db", sqlite3.OperationalError("database is locked"))
    assert "another process has held it locked" in why and "not a promptlab cache" not in why
