"""A full results disk, two ways, for the tests and the reliability battery: a real small tmpfs (root only), and
ENOSPC from every fsync under a folder in the kernels a papermill sweep starts (a `sitecustomize` on their
PYTHONPATH), which works for any user. Only the standard library is used."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

SITECUSTOMIZE = """
import errno, os
real_fsync = os.fsync
def full_disk(fd):
    under = os.environ.get("FULL_DISK_UNDER")
    if under and os.readlink(f"/proc/self/fd/{fd}").startswith(under):
        raise OSError(errno.ENOSPC, "No space left on device")
    real_fsync(fd)
os.fsync = full_disk
"""
"""Imported by every Python process started with its folder on PYTHONPATH: fsync under $FULL_DISK_UNDER fails."""


def mount_tmpfs(folder: Path, size: str = "2m") -> bool:
    """Mount a tmpfs of `size` on `folder` (made if missing); False when that is not possible (not root)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


def unmount(folder: Path) -> None:
    """Unmount what `mount_tmpfs` mounted (lazily: a kernel may still hold a file there)."""
    subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def fill(folder: Path, leave_bytes: int) -> Path:
    """A filler file that leaves about `leave_bytes` free on `folder`'s file system; returns its path."""
    st = os.statvfs(folder)
    path = folder / "filler"
    path.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave_bytes))
    return path


def fill_up(folder: Path) -> Path:
    """Append to a filler file on `folder`'s file system until not one more byte fits; returns its path. Called
    again once some room was freed (a file removed), it takes that room too."""
    path = folder / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (2**16, 2**12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return path


@contextlib.contextmanager
def enospc_in_kernels(site: Path, under: Path) -> Iterator[None]:
    """While the block runs, every Python process started from here (a papermill kernel) gets ENOSPC from an
    fsync of a file under `under`; this process is untouched."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    with mock.patch.dict(os.environ, {"PYTHONPATH": path, "FULL_DISK_UNDER": str(under)}):
        yield
