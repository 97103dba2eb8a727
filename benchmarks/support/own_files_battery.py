"""Files that are not files, beyond the cache's value files and status.json (round 5 of #41's item 6): the other
files promptlab reads or writes in a results or cache directory (experiment.yaml, spending.json, sweep.lock, a
papermill partial notebook, the cache's heal lock) as a FIFO or a link (to /dev/zero, or out of the directory),
and the files a user names (experiment, tasks) as a FIFO or a link to /dev/zero. Each must be refused by name,
without a hang, with nothing written through a link."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from experiment_files import topics, write_experiment
from hardening_battery import Row

import promptlab as pl
from promptlab.errors import ConfigError
from promptlab.llm.cache.disk import Cache
from promptlab.llm.spending.cap import SpendingCap
from promptlab.reading import RefusedFile, read_text
from promptlab.sweeps.dirlock import LOCK_NAME, hold_results_dir
from promptlab.sweeps.results_dir import PARTIAL_NOTEBOOK, experiment_provenance, keep_notebook


def _special(path: Path, kind: str) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path) if kind == "fifo" else path.symlink_to("/dev/zero")
    return path


def _refused(action: Callable[[], object]) -> bool:
    try:
        action()
    except (ConfigError, RefusedFile):
        return True
    return False


def _locked(out: Path) -> None:
    with hold_results_dir(out):
        pass


def _heal_through_link(base: Path) -> bool:
    victim = base / "precious-heal.txt"
    victim.write_text("keep me")
    store = Cache(base / "cache")
    lock = store.directory / "cache.db.heal-lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    (store.directory / "cache.db").write_bytes(b"not a database" * 100)
    model = pl.scripted("issue41-own-heal", respond=lambda m: "fresh")
    return pl.complete(model.name, "p", cache=store).text == "fresh" and victim.read_text() == "keep me"


def _as(d: Path, kind: str) -> list[bool]:
    """Each file as `kind` (a FIFO, or a link to /dev/zero): refused, or dropped unread."""
    d.mkdir()
    exp = write_experiment(d, {"name": "x", "loops": ["p3ro"], "config": {"model": "fake/auto"}}, topics(1))
    out = d / "out"
    (out / "cells" / "c1").mkdir(parents=True)
    keep_notebook(_special(out / "cells" / "c1" / PARTIAL_NOTEBOOK, kind).parent)
    return [
        _refused(lambda: pl.load_experiment(_special(exp, kind))),
        _refused(lambda: read_text(_special(d / "tasks.jsonl", kind), "JSONL file")),
        _refused(lambda: experiment_provenance(_special(out / "experiment.yaml", kind).parent)),
        _refused(lambda: SpendingCap(_special(out / "spending.json", kind), 1.0).spent()),
        not os.path.lexists(out / "cells" / "c1" / PARTIAL_NOTEBOOK),
        _refused(lambda: _locked(_special(out / LOCK_NAME, kind).parent)),
    ]


def own_files(base: Path) -> Row:
    checks = _as(base / "fifo", "fifo") + _as(base / "zero", "zero")
    victim = base / "precious-lock.txt"
    victim.write_text("keep me")
    (base / "linked").mkdir()
    (base / "linked" / LOCK_NAME).symlink_to(victim)
    checks.append(_refused(lambda: _locked(base / "linked")) and victim.read_text() == "keep me")
    checks.append(_heal_through_link(base))
    return Row.of_checks(
        "a results or cache dir's own files (experiment.yaml, spending.json, sweep.lock, partial notebook, heal "
        "lock) and a user's experiment and task files, as a FIFO or a link (to /dev/zero, out of the dir)",
        checks,
        "refused by name, no hang, nothing written through; test_special_files_own",
    )


if __name__ == "__main__":  # run alone: python benchmarks/support/own_files_battery.py
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(own_files(Path(tmp)))
