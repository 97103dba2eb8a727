"""#41 item 4 (#42 item 4): the directory cache's read/write race. diskcache's read gives nothing both when a key has
no row and when its row's value file is missing; `get` used to ask `key in dc` next, and when another task's `add`
landed between the two it found the fresh row, took it for a row without its value file and discarded a valid
entry ("lost its value file"), to be paid again. The interleaving is made exactly here: the other task's write lands
right after the read, as it did on a busy machine."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from promptlab.llm.cache.disk import Cache
from promptlab.llm.call.completion import Completion


def record(key: str, size: int) -> Completion:
    return Completion(model="fake/x", text="y" * size, input_tokens=3, output_tokens=2, cost_usd=0.0, key=key)


@pytest.mark.parametrize("size", [10, 200_000], ids=["inline", "value-file"])
def test_a_write_landing_between_a_miss_and_its_check_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, size: int
) -> None:
    cache, other = Cache(tmp_path / "c"), Cache(tmp_path / "c")  # two tasks (or processes) on one directory
    key = "a" * 64
    real, reads = Cache._read, list[str]()

    def read_then_the_other_write_lands(self: Cache, k: str) -> Any:
        raw = real(self, k)
        if self is cache and not reads:
            reads.append(k)
            assert raw is None  # a miss, then the other task's write
            assert other.add(k, record(k, size))
        return raw

    monkeypatch.setattr(Cache, "_read", read_then_the_other_write_lands)
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        got = cache.get(key)
    monkeypatch.undo()
    assert "lost its value file" not in caplog.text
    assert got is not None and len(got.text) == size  # the entry written meanwhile is read, not discarded
    assert other.get(key) is not None and key in cache


def test_a_row_whose_own_value_file_is_gone_is_still_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = Cache(tmp_path / "c")
    key = "b" * 64
    cache.add(key, record(key, 200_000))
    [value_file] = [p for p in (tmp_path / "c").rglob("*.val")]
    value_file.unlink()
    with caplog.at_level(logging.WARNING, logger="promptlab.llm.cache"):
        assert cache.get(key) is None
    assert "lost its value file" in caplog.text and key not in cache
