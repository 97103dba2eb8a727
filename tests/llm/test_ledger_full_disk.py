"""The spending cap's ledger on a disk that fills up (a real 1 MiB tmpfs, as root): the first full-disk write goes
into the reserve kept beside the ledger, so no charge is lost; once that room is gone too, the write fails as
ResultsDiskFull naming the ledger, which is left as it was."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest
from full_disk import fill

from promptlab.errors import ResultsDiskFull
from promptlab.llm.providers.resolved import resolve_model
from promptlab.llm.spending.cap import SpendingCap
from promptlab.llm.spending.ledger import LEDGER_NAME, RESERVE_BYTES, reserve_of

MODEL = resolve_model("openai/gpt-4o-mini")


def test_a_full_disk_is_met_with_the_reserve_then_named(tmpfs: Callable[[str], Path]) -> None:
    disk = tmpfs("1m")
    ledger = disk / LEDGER_NAME
    cap = SpendingCap(ledger, 10.0)
    cap.charge(MODEL, 0.5)
    assert reserve_of(ledger).stat().st_size == RESERVE_BYTES  # made while there was room
    filler = fill(disk, 0)
    with pytest.raises(OSError) as no_room:
        (disk / "probe").write_bytes(b"x" * 4096)
    assert no_room.value.errno == errno.ENOSPC  # the disk is full for anyone else
    cap.charge(MODEL, 0.25)  # written into the reserve's room
    assert not reserve_of(ledger).exists() and SpendingCap(ledger, 10.0).spent() == pytest.approx(0.75)
    fill_again = disk / "filler2"
    with pytest.raises(OSError):  # another writer takes the room the reserve left
        fill_again.write_bytes(b"\0" * RESERVE_BYTES * 2)
    with pytest.raises(ResultsDiskFull) as full:
        cap.charge(MODEL, 0.125)
    assert str(ledger) in str(full.value) and "no space left" in str(full.value)
    assert SpendingCap(ledger, 10.0).spent() == pytest.approx(0.75)  # as it was, whole
    assert not [p.name for p in disk.iterdir() if p.name.endswith(".tmp")]
    filler.unlink()
    fill_again.unlink(missing_ok=True)
    again = SpendingCap(ledger, 10.0)  # the next process with room keeps the reserve again
    again.charge(MODEL, 0.125)
    assert again.spent() == pytest.approx(0.875) and reserve_of(ledger).exists()
