"""Writing the spending cap's ledger (`spending.json`) whole, also on a disk that fills up.

Each write goes to a temporary file beside the ledger, then replaces it. A paid request must be counted even when
the results disk has just filled (the sweep's own results writes then stop it, named, exit 4): so beside the
ledger lies a reserve file (RESERVE_BYTES, `.spending.json.reserve`), made while there is room. A ledger write
that finds the disk full removes the reserve and writes again into the room it held; only when there is no
reserve left, or that room went to another writer first, does the write fail, as `ResultsDiskFull` naming the
ledger. The next process that finds room makes the reserve again.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from ...errors import ResultsDiskFull, is_disk_full

log = logging.getLogger("promptlab.llm.spending.cap")

LEDGER_NAME = "spending.json"
"""The ledger's file name in a results dir."""
FORMER_LEDGER_NAME = "budget.json"
"""What the ledger's file was called before "budget" came to mean only a loop's budget; `ledger_in` renames it."""


def ledger_in(results_dir: Path | str) -> Path:
    """The spending ledger of a results dir; a ledger written under its former name (`FORMER_LEDGER_NAME`) is
    renamed first, so what a sweep paid before still counts."""
    path = Path(results_dir) / LEDGER_NAME
    former = path.with_name(FORMER_LEDGER_NAME)
    if former.exists() and not path.exists():
        os.replace(former, path)
        reserve_of(former).unlink(missing_ok=True)  # a reserve is made anew beside the ledger
    return path


RESERVE_BYTES = 64 * 1024
"""Room kept beside the ledger for its writes once the disk is full (a ledger is a few hundred bytes)."""


def reserve_of(ledger: Path) -> Path:
    """The reserve file kept beside `ledger`."""
    return ledger.with_name(f".{ledger.name}.reserve")


def write_whole(ledger: Path, data: bytes) -> None:
    """Replace `ledger` with `data`, whole or not at all; on a full disk, into the reserve's room.

    Raises:
        ResultsDiskFull: the disk is full and no reserve was left to give room (the ledger is as it was).
    """
    try:
        _replace(ledger, data)
        return
    except OSError as e:
        if not is_disk_full(e):
            raise
        full = e
    try:
        reserve_of(ledger).unlink()
    except FileNotFoundError:
        raise ResultsDiskFull(str(ledger), full) from full
    log.warning("%s: the disk is full; the ledger is written into the room kept for it", ledger)
    try:
        _replace(ledger, data)
    except OSError as e:
        if is_disk_full(e):
            raise ResultsDiskFull(str(ledger), e) from e
        raise


def keep_room(ledger: Path) -> None:
    """Make the reserve beside `ledger` when it is missing and there is room (else leave it for later)."""
    reserve = reserve_of(ledger)
    if reserve.exists():
        return
    tmp = reserve.with_name(f"{reserve.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(b"\0" * RESERVE_BYTES)  # real blocks (a sparse file would hold no room)
        os.replace(tmp, reserve)
    except OSError:
        tmp.unlink(missing_ok=True)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


__all__ = [
    "FORMER_LEDGER_NAME",
    "LEDGER_NAME",
    "RESERVE_BYTES",
    "keep_room",
    "ledger_in",
    "reserve_of",
    "write_whole",
]
