"""A tampered cache.db (#28 item 4): a row switched to diskcache's pickle mode never runs, a row pointing at a file
outside the cache is refused and its file (and its parent directory) left untouched, by a lookup, by the
read-only cache and by `cache verify --fix`."""

from __future__ import annotations

import os
import pickle
import sqlite3
from pathlib import Path

import pytest

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import CacheUnavailableError
from promptlab.llm.cache.backend import encode_record
from promptlab.llm.cache.disk import Cache
from promptlab.llm.cache.readonly import ReadOnlyCache

VICTIM = encode_record(pl.Completion(model="fake/x", text="planted", key="k1"), "k1")


class Payload:
    """A pickle that creates a marker file when it is loaded (what an attacker's payload would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, int]]:
        return os.mkdir, (str(self.marker), 0o700)


def stored(folder: Path, *keys: str) -> None:
    cache = Cache(folder)
    for key in keys:
        cache.add(key, pl.Completion(model="fake/x", text=f"text of {key}", key=key))
    cache.close()


def tamper(folder: Path, sql: str, *args: object) -> None:
    con = sqlite3.connect(folder / "cache.db")
    con.execute(sql, args)
    con.commit()
    con.close()


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the cache, alone in its directory (diskcache would remove the emptied directory too), that
    reads as a valid record of key k1 (so a reader that follows the row would serve it)."""
    target = tmp_path / "elsewhere" / "victim.txt"
    target.parent.mkdir()
    target.write_text(VICTIM)
    return target


def test_a_row_switched_to_pickle_mode_never_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder, marker = tmp_path / "cache", tmp_path / "ran"
    stored(folder, "k1", "k2")
    tamper(folder, "UPDATE Cache SET mode = 4, value = ? WHERE key = 'k1'", pickle.dumps(Payload(marker)))
    cache = Cache(folder)
    assert cache.get("k1") is None and not marker.exists()
    assert "pickled" in caplog.text
    assert cache.get("k2") is not None  # the untampered row still serves
    stored(folder, "k3")
    tamper(folder, "UPDATE Cache SET mode = 4, value = ? WHERE key = 'k3'", pickle.dumps(Payload(marker)))
    report = Cache(folder).verify(fix=True)
    assert "pickled" in report.problems["k3"] and not marker.exists()
    assert "k3" not in Cache(folder)
    stored(folder, "k4")
    tamper(folder, "UPDATE Cache SET mode = 4, value = ? WHERE key = 'k4'", pickle.dumps(Payload(marker)))
    assert ReadOnlyCache(folder, "test").get("k4") is None and not marker.exists()


def test_a_pickled_key_is_reported_never_unpickled(tmp_path: Path) -> None:
    folder, marker = tmp_path / "cache", tmp_path / "ran"
    stored(folder, "k1", "k2")
    tamper(folder, "UPDATE Cache SET raw = 0, key = ? WHERE key = 'k1'", pickle.dumps(Payload(marker)))
    report = Cache(folder).verify(fix=True)
    assert not marker.exists() and report.ok == 1
    assert [p for p in report.problems.values() if "key is stored pickled" in p]
    assert len(Cache(folder)) == 1


@pytest.mark.parametrize("how", ["absolute", "climbing", "symlink"])
def test_a_row_pointing_outside_the_cache_is_refused_and_the_file_untouched(
    tmp_path: Path, victim: Path, how: str
) -> None:
    folder = tmp_path / "cache"
    stored(folder, "k1", "k2", "k3")
    if how == "absolute":
        name = str(victim)
    elif how == "climbing":
        name = os.path.relpath(victim, folder)
    else:
        (folder / "ab").mkdir()
        (folder / "ab" / "link.val").symlink_to(victim)
        name = "ab/link.val"
    for key in ("k1", "k2", "k3"):
        tamper(folder, "UPDATE Cache SET mode = 3, value = NULL, filename = ? WHERE key = ?", name, key)
    assert ReadOnlyCache(folder, "test").get("k1") is None  # never read
    assert Cache(folder).get("k1") is None  # a miss: the "corrupt entry" path deletes the row, not the file
    assert main(["cache", "verify", "--fix", "--dir", str(folder)]) == 1
    assert victim.read_text() == VICTIM and victim.parent.is_dir()
    assert len(Cache(folder)) == 0


def test_a_value_file_inside_the_cache_is_still_read_and_removed(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    big = "x" * 100_000  # past diskcache's 32 KiB: stored in a value file
    cache = Cache(folder)
    cache.add("big", pl.Completion(model="fake/x", text=big, key="big"))
    files = [p for p in folder.rglob("*.val")]
    assert len(files) == 1
    got = cache.get("big")
    assert got is not None and got.text == big
    cache.discard("big")
    assert not files[0].exists() and not files[0].parent.exists() and folder.is_dir()


@pytest.mark.parametrize("kind", ["other-schema", "directory"])
def test_a_cache_db_that_cannot_be_opened_is_named_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """#28 item 5: a raw sqlite3 traceback before; now one line naming the file and what to do, exit 2."""
    folder = tmp_path / "cache"
    folder.mkdir()
    if kind == "directory":
        (folder / "cache.db").mkdir()
    else:
        con = sqlite3.connect(folder / "cache.db")
        con.execute("CREATE TABLE Cache (id INTEGER, payload TEXT)")
        con.commit()
        con.close()
    with pytest.raises(CacheUnavailableError, match=r"cannot open .*cache\.db.*(move it away|another cache)"):
        Cache(folder)
    assert main(["cache", "stats", "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "cache.db" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
