"""#41 item 6: only regular files, of bounded size, are read from a cache or a results directory, never through a
link out of it. A FIFO would hang the reader (a sweep, `cache verify`, `report`), a link to /dev/zero would fill
memory, a sparse 3 GiB value file would be read whole, and a cell directory linked outside the results directory
would be written through: each is refused by name (`promptlab.reading.read_bounded`), without blocking."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import promptlab as pl
from promptlab.errors import ConfigError
from promptlab.llm.cache.disk import Cache
from promptlab.llm.cache.entries import MAX_VALUE_BYTES
from promptlab.reading import RefusedFile, read_bounded
from promptlab.results.store import load, write_cell


def test_read_bounded_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RefusedFile, match="not a regular file \\(a FIFO\\)"):
        read_bounded(fifo, 100)  # no writer: a blocking open would never return
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(RefusedFile, match="symbolic link"):
        read_bounded(tmp_path / "zero", 100)
    with pytest.raises(RefusedFile, match="character device"):
        read_bounded("/dev/zero", 100)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(RefusedFile, match="101 bytes, over the 100-byte limit"):
        read_bounded(big, 100)
    assert read_bounded(big, 101) == b"x" * 101


def _value_file(cache_dir: Path) -> Path:
    [value] = list(cache_dir.rglob("*.val"))
    return value


@pytest.mark.parametrize("kind", ["fifo", "sparse", "link to /dev/zero"])
def test_a_cache_value_file_that_is_not_a_file_is_a_miss_and_verify_names_it(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from promptlab.cli import main

    cache_dir = tmp_path / "c"
    model = pl.scripted(f"special-{kind}", respond=lambda m: "y" * 100_000)  # large: stored in a value file
    first = pl.complete(model.name, "big", cache=Cache(cache_dir))
    value = _value_file(cache_dir)
    value.unlink()
    if kind == "fifo":
        os.mkfifo(value)
    elif kind == "sparse":
        with open(value, "wb") as f:
            f.truncate(3 * 2**30)  # 3 GiB, no blocks: read whole it would fill memory
        assert value.stat().st_size > MAX_VALUE_BYTES
    else:
        value.symlink_to("/dev/zero")
    assert main(["cache", "verify", "--dir", str(cache_dir)]) == 1  # named, not hung
    said = capsys.readouterr().out
    assert first.key in said or first.key[:12] in said
    again = pl.complete(model.name, "big", cache=Cache(cache_dir))
    assert not again.cache_hit and len(model.requests) == 2  # a miss, paid again: never a hang or a crash


def _status(cell: Path) -> Path:
    return cell / "status.json"


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_status_json_that_is_not_a_file_is_a_corrupt_cell_not_a_hang(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    cell = write_cell(out, "c1", {"loop": "toy"}, [])
    write_cell(out, "c2", {"loop": "toy"}, [])
    _status(cell).unlink()
    if kind == "fifo":
        os.mkfifo(_status(cell))
    else:
        _status(cell).symlink_to("/dev/zero")
    cells = load(out).cells.set_index("cell_id")
    assert cells.loc["c1", "status"] == "corrupt" and "status.json" in str(cells.loc["c1", "error"])
    assert cells.loc["c2", "status"] == "ok"


def test_a_cell_directory_linked_outside_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    write_cell(out, "c1", {"loop": "toy"}, [])
    elsewhere.mkdir()
    (out / "cells" / "c2").symlink_to(elsewhere, target_is_directory=True)
    with pytest.warns(RuntimeWarning, match=r"c2 -> .*elsewhere\): refused, not read"):
        cells = load(out).cells
    assert list(cells["cell_id"]) == ["c1"]
    with pytest.raises(ConfigError, match="is a symbolic link .*refused, nothing read or written through it"):
        write_cell(out, "c2", {"loop": "toy"}, [])
    assert list(elsewhere.iterdir()) == []
    (elsewhere / "status.json").write_text(json.dumps({"not": "read"}))
