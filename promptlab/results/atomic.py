"""Writing a results file whole or not at all: a temporary file beside it, fsync'd, then renamed over it; a full disk
is a `ResultsDiskFull` naming the file, with nothing half-written left behind. A process killed mid-write (kill -9)
leaves its temporary file: `remove_leftovers` takes those away when the file is written again."""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import ResultsDiskFull, is_disk_full

TMP_SUFFIX = ".tmp"
"""The end of an `atomic_write` temporary file's name (`.<name>.<random>.tmp`, beside the file)."""


def remove_leftovers(directory: Path, names: Iterable[str]) -> list[Path]:
    """Remove the temporary files an interrupted `atomic_write` of `names` left in `directory` (a process killed
    between creating one and renaming it); the caller must be the only writer of these files (a sweep holds the
    results directory's lock). Returns what was removed."""
    removed = []
    for name in names:
        for tmp in directory.glob(f".{glob.escape(name)}.*{TMP_SUFFIX}"):
            if tmp.is_file() and not tmp.is_symlink():
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
    return removed


def atomic_write(path: Path, data: bytes | Callable[[str], object]) -> None:
    """Write bytes (or call `data(tmp_path)`) to a temp file beside `path`, fsync it, then os.replace; a full
    disk raises ResultsDiskFull naming `path` (the temp file removed, `path` as it was)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    except OSError as e:
        if is_disk_full(e):
            raise ResultsDiskFull(str(path), e) from e
        raise
    try:
        if isinstance(data, bytes):
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        else:
            os.close(fd)
            data(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are meant to be shared
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if is_disk_full(e):
            raise ResultsDiskFull(str(path), e) from e
        raise


__all__ = ["TMP_SUFFIX", "atomic_write", "remove_leftovers"]
