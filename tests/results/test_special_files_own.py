"""#41 item 6, the class beyond the cache's value files and status.json: every other file promptlab reads from a
results or cache directory (experiment.yaml, spending.json, sweep.lock, the executed notebook, the cache's heal
lock, the report files an export logs) is read as a regular file of bounded size, never through a link, and a
FIFO never holds a process up; the files a user names (experiment, tasks, examples) may be links to regular
files, but a FIFO or a device there is refused by name instead of "not found" or a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from experiment_files import topics, write_experiment

import promptlab as pl
from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.llm.cache.disk import Cache
from promptlab.llm.spending.cap import SpendingCap
from promptlab.reading import RefusedFile, open_regular, read_text
from promptlab.sweeps.dirlock import LOCK_NAME, hold_results_dir
from promptlab.sweeps.results_dir import PARTIAL_NOTEBOOK, experiment_provenance, keep_notebook


def _special(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_user_file_that_is_not_a_regular_file_is_refused_by_name(tmp_path: Path, kind: str) -> None:
    exp = write_experiment(tmp_path, {"name": "x", "loops": ["p3ro"], "config": {"model": "fake/auto"}}, topics(1))
    _special(exp, kind)
    with pytest.raises(ConfigError, match=r"exp\.yaml: the experiment file is (not a regular file|.*limit)"):
        pl.load_experiment(exp)  # was: "experiment file not found" (a FIFO, a device), or read forever
    tasks = tmp_path / "tasks.jsonl"
    _special(tasks, kind)
    with pytest.raises(ConfigError, match=r"tasks\.jsonl: the JSONL file is not a regular file"):
        read_text(tasks, "JSONL file")


def test_a_user_file_may_be_a_link_to_a_regular_file(tmp_path: Path) -> None:
    real = write_experiment(tmp_path, {"name": "linked", "loops": ["p3ro"], "config": {"model": "fake/auto"}})
    (tmp_path / "link.yaml").symlink_to(real)
    assert pl.load_experiment(tmp_path / "link.yaml").name == "linked"


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_the_results_dirs_own_files_are_refused_not_followed(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    _special(out / "experiment.yaml", kind)
    with pytest.raises(RefusedFile, match="experiment.yaml"):
        experiment_provenance(out)
    _special(out / "spending.json", kind)
    with pytest.raises(ConfigError, match="spending.json: the spending ledger .*refused"):
        SpendingCap(out / "spending.json", 1.0).spent()
    cell = out / "cells" / "c1"
    cell.mkdir(parents=True)
    _special(cell / PARTIAL_NOTEBOOK, kind)
    keep_notebook(cell)  # a partial notebook that is not a file is dropped, not read and not kept
    assert not (cell / PARTIAL_NOTEBOOK).exists() and not (cell / "run_cell.ipynb").exists()


def test_a_sweep_lock_linked_elsewhere_is_not_truncated_through(tmp_path: Path) -> None:
    out, victim = tmp_path / "out", tmp_path / "precious.txt"
    out.mkdir()
    victim.write_text("keep me")
    (out / LOCK_NAME).symlink_to(victim)
    with pytest.raises(ConfigError, match=rf"results dir .*out: .*{LOCK_NAME}: the {LOCK_NAME} is a symbolic link"):
        with hold_results_dir(out):
            pass
    assert victim.read_text() == "keep me"  # open("a+") then truncate(0) wrote through the link
    (out / LOCK_NAME).unlink()
    os.mkfifo(out / LOCK_NAME)
    with pytest.raises(ConfigError, match="not a regular file"):  # was: the holder's read blocked forever
        with hold_results_dir(out):
            pass


def test_the_cache_heal_lock_is_never_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    store = Cache(tmp_path / "c")
    (store.directory / "cache.db.heal-lock").unlink(missing_ok=True)
    (store.directory / "cache.db.heal-lock").symlink_to(victim)
    (store.directory / "cache.db").write_bytes(b"not a database" * 100)  # corrupt: the next use heals it
    m = pl.scripted("heal-through-link", respond=lambda msgs: "fresh")
    assert pl.complete(m.name, "p", cache=store).text == "fresh"
    assert victim.read_text() == "keep me"  # the heal count was written through the link before
    with pytest.raises(RefusedFile, match="symbolic link"):
        open_regular(store.directory / "cache.db.heal-lock", os.O_WRONLY, "heal lock")


def test_a_sweep_refuses_a_fifo_experiment_file_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "exp.yaml")
    assert main(["sweep", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "exp.yaml: the experiment file is not a regular file (a FIFO)" in err, err
