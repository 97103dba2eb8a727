"""Writing a results file whole or not at all: a temporary file beside it, fsync'd, then renamed over it; a full disk
is a `ResultsDiskFull` naming the file, with nothing half-written left behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import ResultsDiskFull, is_disk_full


def atomic_write(path: Path, data: bytes | Callable[[str], object]) -> None:
    """Write bytes (or call `data(tmp_path)`) to a temp file beside `path`, fsync it, then os.replace; a full
    disk raises ResultsDiskFull naming `path` (the temp file removed, `path` as it was)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


__all__ = ["atomic_write"]
