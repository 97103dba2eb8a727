"""The bubblewrap command line of one shell step: what the sandbox sees, its environment, its identity files.

A command runs in fresh namespaces (user, mount, pid, network, ipc, uts, cgroup), with every capability dropped,
and sees:

- the system software read-only (/usr and the /bin, /sbin, /lib* links or folders), a few files of /etc that
  programs need (the loader cache, alternatives, localtime, ...) and a synthetic /etc/passwd and /etc/group
  that list only root, nobody and the sandbox user; nothing else of the host (no /home, /root, /work, /var,
  /opt, /run, /mnt, /sys);
- the run's workspace at its own path, the only writable folder besides a private /tmp and /dev/shm;
- its own /proc (only the sandbox's processes) and a minimal, read-only /dev (null, zero, full, random,
  urandom, tty, pts); the sandbox's root folder itself is read-only (the folders leading to the workspace
  exist there, empty);
- no network: only a loopback device of its own, so even 127.0.0.1 of the host is unreachable;
- an environment of PATH, LANG and HOME (the workspace) only; where the system has python3 but no `python`,
  `python` runs python3 (a link in `SHIM_DIR`, last on the PATH).

With a stage (`promptlab.tools.stager`), the workspace, /tmp and /dev/shm are size- and file-capped tmpfs
filesystems; without one (a non-root user where no mount namespace can be made), the workspace is the host
folder itself and /tmp and /dev/shm are bubblewrap's size-capped tmpfs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .limits import SandboxLimits

SHIM_DIR = "/etc/promptlab/bin"
"""A sandbox-only folder (under the sandbox's own /etc, where nothing of the host is shown), last on its PATH,
holding `python` (a link to python3) where the system has none: the design document's plans run `python x.py`."""
SANDBOX_PATH = f"/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin:{SHIM_DIR}"
"""PATH inside the sandbox (the parent's PATH is not passed on: it may name folders the sandbox cannot see)."""
SANDBOX_LANG = "C.UTF-8"
"""LANG inside the sandbox."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host folders shown read-only (a symlink, as on merged-/usr systems, is recreated as a symlink)."""
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
    "/etc/ssl",
)
"""The only host files of /etc shown (read-only); /etc/passwd and /etc/group are synthetic."""


def bwrap_path() -> str | None:
    """The bwrap executable, or None."""
    return shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)


def prlimit_path() -> str | None:
    """The prlimit executable (util-linux), or None."""
    return shutil.which("prlimit") or ("/usr/bin/prlimit" if os.access("/usr/bin/prlimit", os.X_OK) else None)


@functools.lru_cache(maxsize=4)
def bwrap_options(bwrap: str) -> frozenset[str]:
    """The long options this bwrap knows (older versions lack --disable-userns and --size)."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(re.findall(r"^\s+(--[a-z-]+)", text, flags=re.MULTILINE))


def safe_env(home: Path) -> dict[str, str]:
    """The whole environment a command gets: PATH, LANG and HOME (the workspace)."""
    return {"PATH": SANDBOX_PATH, "LANG": SANDBOX_LANG, "HOME": str(home)}


def identity_texts(uid: int, gid: int, home: Path) -> tuple[str, str]:
    """The sandbox's /etc/passwd and /etc/group: root, nobody and the sandbox user (`uid`, `gid`)."""
    users = ["root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"]
    groups = ["root:x:0:", "nogroup:x:65534:"]
    if uid not in (0, 65534):
        users.append(f"sandbox:x:{uid}:{gid}:sandbox:{home}:/bin/sh")
    if gid not in (0, 65534):
        groups.append(f"sandbox:x:{gid}:")
    return "\n".join(users) + "\n", "\n".join(groups) + "\n"


@contextmanager
def identity_pipes(uid: int, gid: int, home: Path) -> Iterator[tuple[int, int]]:
    """Read ends of two pipes holding the sandbox's /etc/passwd and /etc/group (closed on exit)."""
    fds: list[int] = []
    try:
        for text in identity_texts(uid, gid, home):
            r, w = os.pipe()
            fds.append(r)
            os.write(w, text.encode())  # a few hundred bytes: always fits the pipe buffer
            os.close(w)
        yield fds[0], fds[1]
    finally:
        for fd in fds:
            os.close(fd)


def bwrap_argv(
    bwrap: str,
    root: Path,
    command: list[str],
    *,
    limits: SandboxLimits,
    writable: bool = True,
    data_fds: tuple[int, int] | None = None,
    stage: Path | None = None,
    ids: tuple[int, int] | None = None,
) -> list[str]:
    """The bwrap command line running `command` in the workspace `root`.

    Args:
        writable: bind the workspace (False: only probe that bwrap works).
        data_fds: read ends of pipes holding the synthetic /etc/passwd and /etc/group.
        stage: the stager's folder: its `ws` is bound on `root`, its `scratch/tmp` and `scratch/shm` on /tmp
            and /dev/shm (None: `root` itself is bound, and /tmp and /dev/shm are bwrap's tmpfs).
        ids: the uid and gid the command has inside its user namespace (None: bwrap's default, the caller's).
    """
    known = bwrap_options(bwrap)
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    if ids is not None:
        argv += ["--uid", str(ids[0]), "--gid", str(ids[1])]
    if "--disable-userns" in known:  # bubblewrap >= 0.8: no nested user namespaces
        argv.append("--disable-userns")
    for key, value in safe_env(root).items():
        argv += ["--setenv", key, value]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for f in ETC_FILES:
        if os.path.exists(f):
            argv += ["--ro-bind", f, f]
    argv += _python_shim()
    if data_fds is not None:
        argv += ["--ro-bind-data", str(data_fds[0]), "/etc/passwd", "--ro-bind-data", str(data_fds[1]), "/etc/group"]
    argv += ["--proc", "/proc", "--dev", "/dev"] + _scratch(stage, limits, known) + ["--remount-ro", "/dev"]
    if stage is not None:
        argv += ["--bind", str(stage / "ws"), str(root)]
    elif writable:
        argv += ["--bind", str(root), str(root)]
    argv += ["--remount-ro", "/", "--chdir", str(root), "--", "prlimit", *limits.prlimit_args(), "--", *command]
    return argv


def _python_shim() -> list[str]:
    """The options making `python` run python3 in the sandbox, when the system's PATH has python3 but no
    python (none otherwise: a real `python` is never shadowed)."""
    system = SANDBOX_PATH.removesuffix(f":{SHIM_DIR}")
    python3 = shutil.which("python3", path=system)
    if python3 is None or shutil.which("python", path=system) is not None:
        return []
    return ["--dir", SHIM_DIR, "--symlink", python3, f"{SHIM_DIR}/python"]


def _scratch(stage: Path | None, limits: SandboxLimits, known: frozenset[str]) -> list[str]:
    """The options giving the sandbox a writable /tmp and /dev/shm (and nothing else writable in /dev)."""
    if stage is not None:
        return ["--bind", str(stage / "scratch" / "tmp"), "/tmp", "--bind", str(stage / "scratch" / "shm"), "/dev/shm"]
    size = ["--size", str(limits.tmp_bytes)] if "--size" in known else []
    return [*size, "--tmpfs", "/tmp", *size, "--tmpfs", "/dev/shm"]


__all__ = [
    "ETC_FILES",
    "SANDBOX_LANG",
    "SANDBOX_PATH",
    "SHIM_DIR",
    "SYSTEM_DIRS",
    "bwrap_argv",
    "bwrap_options",
    "bwrap_path",
    "identity_pipes",
    "identity_texts",
    "prlimit_path",
    "safe_env",
]
