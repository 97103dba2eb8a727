"""#41 item 3 on a real full disk (a small tmpfs, as root): the directory cache's write that meets the full disk
says so once and its paid reply is returned; the next call on the cache stops (CacheUnavailableError, naming the
directory and how many replies went unstored), so a sweep's cells fail as infrastructure and it exits 1, as on a
full Redis; once room is made the same cache goes on and stores again."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from experiment_files import topics, write_experiment
from full_disk import fill_up

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import CacheUnavailableError
from promptlab.llm.cache.disk import Cache
from promptlab.llm.cache.disk_errors import CacheReadOnlyError


def test_a_full_cache_disk_stops_the_next_call_until_room_is_made(
    tmpfs: Callable[[str], Path], caplog: pytest.LogCaptureFixture
) -> None:
    disk = tmpfs("2m")
    store = Cache(disk / "cache")
    m = pl.scripted("full-cache-disk", respond=lambda msgs: "paid " + msgs[-1]["content"] + " " + "x" * 50_000)
    assert pl.complete(m.name, "p0", cache=store).text.startswith("paid p0")
    filler = fill_up(disk)
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        assert pl.complete(m.name, "p1", cache=store).text.startswith("paid p1")  # paid, returned, not stored
        with pytest.raises(CacheUnavailableError) as stopped:
            pl.complete(m.name, "p2", cache=store)
    assert str(store.directory) in str(stopped.value) and "1 paid reply could not be stored" in str(stopped.value)
    assert len(m.requests) == 2 and len([r for r in caplog.records if "is full" in r.getMessage()]) == 1
    filler.unlink()  # room again: the same cache object goes on
    assert pl.complete(m.name, "p2", cache=store).text.startswith("paid p2")
    assert pl.complete(m.name, "p2", cache=store).text.startswith("paid p2") and len(m.requests) == 3  # stored


def test_a_sweep_whose_cache_disk_fills_exits_1(
    tmpfs: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The results on another disk: the cache's full disk alone fails the sweep's cells, named, and exits 1."""
    import toyloop  # noqa: F401 -- the "toy" loop

    disk = tmpfs("2m")
    cache = disk / "cache"
    Cache(cache)  # made while there is room
    fill_up(disk)
    exp = write_experiment(
        tmp_path,
        {"name": "fullcache", "loops": ["toy"], "config": {"model": "fake/auto", "max_iterations": 1}},
        topics(2),
    )
    code = main(["sweep", str(exp), "--out", str(tmp_path / "out"), "--cache", str(cache), "--no-progress"])
    said = capsys.readouterr()
    assert code == 1, said.err
    assert "its disk is full" in said.out + said.err


def test_promptlab_run_whose_cache_disk_fills_exits_1_not_2(
    tmpfs: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`promptlab run` that started and then met a full cache disk exits 1, as a run an infrastructure failure
    left incomplete: 2 says "refused before it started", which is not what happened (calls were paid)."""
    disk = tmpfs("2m")
    cache = disk / "cache"
    Cache(cache)  # made while there is room
    fill_up(disk)
    code = main(["run", "p3ro", "--prompt", "Say hi", "--model", "fake/auto", "--cache", str(cache), "--quiet"])
    said = capsys.readouterr()
    assert code == 1, said.err
    assert "its disk is full" in said.err and "run incomplete" in said.err


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[Callable[[Path], Path]]:
    """A read-only bind mount of a folder (as root), as a cache published on a read-only share is seen."""
    views: list[Path] = []

    def view(folder: Path) -> Path:
        at = tmp_path / f"read-only-{len(views)}"
        at.mkdir()
        for args in (["--bind", str(folder), str(at)], ["-o", "remount,bind,ro", str(at)]):
            done = subprocess.run(["mount", *args], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot make a read-only bind mount (needs root): {done.stderr.strip()}")
        views.append(at)
        return at

    yield view
    for at in views:
        subprocess.run(["umount", "-l", str(at)], capture_output=True)


def test_a_cache_on_a_read_only_file_system_replays_and_stops_at_the_first_paid_reply(
    read_only_view: Callable[[Path], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A published cache mounted read-only (or one this user may not write): it was refused as "not a promptlab
    cache (another program's database)". Now `Cache` raises CacheReadOnlyError naming it, and `open_cache` (the
    CLI, the sweep) opens it read-only: what is stored replays with no call; the first miss is paid, returned,
    not stored, and the next call stops, as on a full disk."""
    import toyloop  # noqa: F401 -- the "toy" loop

    written = tmp_path / "cache"
    exp = write_experiment(
        tmp_path,
        {"name": "published", "loops": ["toy"], "config": {"model": "fake/auto", "max_iterations": 1}},
        topics(2),
    )
    assert main(["sweep", str(exp), "--out", str(tmp_path / "first"), "--cache", str(written), "--no-progress"]) == 0
    cache = read_only_view(written)
    with pytest.raises(CacheReadOnlyError, match=r"is unavailable: it is read-only \(attempt to write a readonly"):
        Cache(cache)
    capsys.readouterr()
    assert main(["sweep", str(exp), "--out", str(tmp_path / "replay"), "--cache", str(cache), "--no-progress"]) == 0
    capsys.readouterr()
    replay = pl.load(tmp_path / "replay").runs
    assert replay["cache_hits"].sum() == replay["calls"].sum() > 0  # every call of the replay came from the cache
    (tmp_path / "more").mkdir()
    more = write_experiment(
        tmp_path / "more",
        {"name": "more", "loops": ["toy"], "config": {"model": "fake/auto", "max_iterations": 1}},
        topics(3, prompt="A new topic {i}."),
    )
    code = main(["sweep", str(more), "--out", str(tmp_path / "new"), "--cache", str(cache), "--no-progress"])
    said = capsys.readouterr()
    assert code == 1 and "it is read-only" in said.out + said.err
