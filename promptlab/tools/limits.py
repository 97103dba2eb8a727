"""Resource limits of one shell step: rlimits set with `prlimit` inside the sandbox, the size and file caps of
its writable tmpfs filesystems, and, as root, a pids cgroup that bounds its processes.

The process limit (RLIMIT_NPROC) counts the sandbox's processes only (a fresh user namespace). The kernel does
not apply it to root: as root a pids cgroup (`pids.max`) bounds the step where one can be made, see
`process_cap_available`. (Commands run as an unprivileged user when promptlab runs as root, see
`promptlab.tools.sandbox`, but the cgroup bounds the step's helpers too.)
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one shell step (each rlimit soft = hard, so the command cannot raise it)."""

    cpu_s: int = 30
    """CPU seconds (RLIMIT_CPU); the wall-clock limit is the Workspace's shell_timeout_s."""
    file_bytes: int = 16 * 2**20
    """Largest file a command may write (RLIMIT_FSIZE); a bigger write fails with EFBIG / SIGXFSZ."""
    open_files: int = 256
    """Open file descriptors (RLIMIT_NOFILE)."""
    processes: int = 64
    """Processes (RLIMIT_NPROC in the sandbox's user namespace; a pids cgroup when running as root)."""
    address_space_bytes: int = 2 * 2**30
    """Virtual memory per process (RLIMIT_AS)."""
    tmp_bytes: int = 64 * 2**20
    """Size of the private /tmp and /dev/shm together (one tmpfs)."""
    workspace_bytes: int = 256 * 2**20
    """Most bytes the workspace may hold while a command runs (a tmpfs of this size; past it writes fail with
    ENOSPC). The workspace is copied in before the command and back after it."""
    max_files: int = 20_000
    """Most files, folders and links in the workspace, and separately in /tmp and /dev/shm (tmpfs inodes)."""

    def __post_init__(self) -> None:
        for name in (
            "cpu_s",
            "file_bytes",
            "open_files",
            "processes",
            "address_space_bytes",
            "tmp_bytes",
            "workspace_bytes",
            "max_files",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SandboxLimits.{name} must be a positive integer, got {value!r}")

    def prlimit_args(self, *, processes: bool = True) -> list[str]:
        """`prlimit` options setting these limits."""
        args = [
            f"--cpu={self.cpu_s}",
            f"--fsize={self.file_bytes}",
            f"--nofile={self.open_files}",
            f"--as={self.address_space_bytes}",
        ]
        return args + [f"--nproc={self.processes}"] if processes else args


_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")


def _pids_cgroup_root() -> Path | None:
    for base in _CGROUP_ROOTS:  # cgroup v1's pids hierarchy, or v2 with the pids controller delegated
        p = Path(base)
        if not ((p / "cgroup.procs").exists() and os.access(p, os.W_OK)):
            continue
        if base.endswith("/pids") or "pids" in _read(p / "cgroup.subtree_control").split():
            return p
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def process_cap_available() -> bool:
    """Whether the process limit is enforced: always for a non-root user, for root only with a pids cgroup."""
    return os.geteuid() != 0 or _pids_cgroup_root() is not None


@contextmanager
def pids_cgroup(limit: int) -> Iterator[Path | None]:
    """A fresh pids cgroup with `pids.max = limit` (its cgroup.procs file), or None where none can be made
    or none is needed (non-root: RLIMIT_NPROC does the job). Removed on exit."""
    root = _pids_cgroup_root() if os.geteuid() == 0 else None
    group = root / f"promptlab-{uuid.uuid4().hex[:12]}" if root is not None else None
    try:
        if group is not None:
            group.mkdir()
            (group / "pids.max").write_text(str(limit))
    except OSError:
        group = None
    try:
        yield group / "cgroup.procs" if group is not None else None
    finally:
        if group is not None:
            _remove_cgroup(group)


def _remove_cgroup(group: Path) -> None:
    for _ in range(50):  # the killed processes leave the group within milliseconds
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.02)


def in_cgroup(procs_file: Path | None, argv: list[str]) -> list[str]:
    """`argv` started inside the cgroup whose cgroup.procs is `procs_file` (unchanged for None)."""
    if procs_file is None:
        return argv
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs_file), *argv]


__all__ = ["SandboxLimits", "in_cgroup", "pids_cgroup", "process_cap_available"]
