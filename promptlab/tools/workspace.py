"""A per-run workspace: file tools confined to it, and a shell that runs in a sandbox on it.

File operations take paths relative to the workspace root. A path is refused when it is empty, absolute,
leaves the root through `..`, or passes through a symbolic link at any component (links are never
followed, also ones a shell command made: every component is opened with O_NOFOLLOW relative to the
folder before it). A file with more than one hard link is refused (it may be a file outside the
workspace), and sizes are capped per file and per workspace. A write goes to a temporary file that
then replaces the target, so it never writes through an existing inode.

The shell runs each command under bubblewrap (see `promptlab.tools.sandbox`): read-only system, a size- and
file-capped copy of the workspace as the only writable folder besides /tmp (copied back after the step; one
step at a time per workspace), no network, no secrets in its environment, rlimits, as root an unprivileged
user, and a wall-clock limit past which the whole sandbox is killed; nothing it started outlives the step. Where
bubblewrap is missing the shell is refused, unless the workspace was made with `unsafe_shell=True`,
which runs commands unsandboxed (cleared environment and rlimits only).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import posixpath
import shutil
import stat
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import PromptlabError
from ..sanitize import printable
from .bwrap import prlimit_path
from .limits import SandboxLimits
from .running import run_capped
from .sandbox import require_sandbox, run_sandboxed, sandbox_available

DEFAULT_BASE = Path(".promptlab") / "workspaces"
"""Where run workspaces go by default (relative to the working directory)."""
MAX_LIST_ENTRIES = 500
"""Most entries `list_files` returns."""
MAX_FILE_BYTES = 4 * 2**20
"""Default cap of one file written or read by the file tools."""
MAX_WORKSPACE_BYTES = 64 * 2**20
"""Default cap of the whole workspace for a write by the file tools."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceError(PromptlabError, ValueError):
    """A path that leaves the workspace, or a file operation that cannot be done; the message says which."""


class Workspace:
    """A directory that a run's tools work in.

    Args:
        root: the directory (created if missing).
        shell_timeout_s: wall-clock limit of a shell command, in seconds (the sandbox is killed past it).
        output_cap: most bytes kept of each of stdout and stderr (and characters of a file read).
        limits: the shell's resource limits.
        max_file_bytes: largest file the file tools write or read.
        max_workspace_bytes: largest total size of the workspace after a write by the file tools.
        unsafe_shell: where bubblewrap is missing, run shell commands unsandboxed instead of refusing them.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        shell_timeout_s: float = 10.0,
        output_cap: int = 8192,
        limits: SandboxLimits | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_workspace_bytes: int = MAX_WORKSPACE_BYTES,
        unsafe_shell: bool = False,
    ) -> None:
        if shell_timeout_s <= 0:
            raise WorkspaceError(f"shell_timeout_s must be > 0, got {shell_timeout_s}")
        if output_cap < 1:
            raise WorkspaceError(f"output_cap must be >= 1, got {output_cap}")
        if max_file_bytes < 1 or max_workspace_bytes < max_file_bytes:
            raise WorkspaceError(
                f"need 1 <= max_file_bytes ({max_file_bytes}) <= max_workspace_bytes ({max_workspace_bytes})"
            )
        path = Path(root).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self.root = path.resolve()
        self.shell_timeout_s = shell_timeout_s
        self.output_cap = output_cap
        self.limits = limits or SandboxLimits()
        self.max_file_bytes = max_file_bytes
        self.max_workspace_bytes = max_workspace_bytes
        self.unsafe_shell = unsafe_shell
        self._shell_lock = threading.Lock()

    @classmethod
    def for_run(cls, base: str | Path | None, run_id: str, **kwargs: Any) -> Workspace:
        """The workspace `<base>/<run_id>`, emptied first (a replay of a run gets a fresh one).

        Args:
            base: parent directory (default `.promptlab/workspaces`).
            run_id: the run's id (a plain name, no separators).
            **kwargs: the other arguments of `Workspace`.
        """
        if not run_id or any(sep in run_id for sep in ("/", "\\", "\0")) or run_id in (".", ".."):
            raise WorkspaceError(f"run_id {run_id!r} cannot name a workspace directory")
        root = Path(base if base is not None else DEFAULT_BASE).expanduser() / run_id
        if root.is_symlink() or root.is_file():
            root.unlink()
        elif root.exists():
            shutil.rmtree(root)
        return cls(root, **kwargs)

    @classmethod
    def claim(cls, base: str | Path | None, stem: str, **kwargs: Any) -> Workspace:
        """A new, empty workspace `<base>/<stem>-<n>` for one run (n = 1, 2, ...: the first free name).

        The folder is claimed by creating it (an atomic mkdir) and is never deleted or re-made afterwards, so
        two runs that claim a workspace at the same time always get two folders and neither wipes the other's
        files; an earlier run's workspace is kept.

        Args:
            base: parent directory (default `.promptlab/workspaces`).
            stem: the name's start (a plain name, no separators).
            **kwargs: the other arguments of `Workspace`.
        """
        if not stem or any(sep in stem for sep in ("/", "\\", "\0")) or stem in (".", ".."):
            raise WorkspaceError(f"stem {stem!r} cannot name a workspace directory")
        root = Path(base if base is not None else DEFAULT_BASE).expanduser()
        return cls(root / fresh_workspace_name(root, stem), **kwargs)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def shell_mode(self) -> str:
        """How shell commands run here: 'bubblewrap', 'unsafe' (opted in, no sandbox) or 'refused'."""
        if sandbox_available():
            return "bubblewrap"
        return "unsafe" if self.unsafe_shell else "refused"

    # paths ------------------------------------------------------------------------------------
    def _parts(self, path: str) -> list[str]:
        """The components of `path` after lexical normalisation; refuses absolute paths and `..` escapes."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError(f"a workspace path must be a non-empty string, got {path!r}")
        if "\0" in path:
            raise WorkspaceError(f"path {path!r} contains a NUL character")
        if path.startswith("/"):
            raise WorkspaceError(
                f"refused path {path!r}: absolute paths are not allowed; give a path relative to the workspace"
            )
        norm = posixpath.normpath(path)
        if norm == ".." or norm.startswith("../"):
            raise WorkspaceError(f"refused path {path!r}: it leaves the workspace")
        return [] if norm == "." else norm.split("/")

    @contextmanager
    def _folder(self, path: str, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """An fd of the folder `parts`, walked one component at a time without following links."""
        fd = os.open(self.root, _DIR_FLAGS)
        here = self.root
        try:
            for name in parts:
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise WorkspaceError(f"no such folder {path!r} in the workspace") from None
                    os.mkdir(name, 0o755, dir_fd=fd)
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    raise self._refusal(path, here, name, fd, e) from None
                os.close(fd)
                fd, here = nfd, here / name
            yield fd
        finally:
            os.close(fd)

    def _refusal(self, path: str, here: Path, name: str, dir_fd: int, e: OSError) -> WorkspaceError:
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            mode = 0
        if stat.S_ISLNK(mode) or e.errno == errno.ELOOP:
            return self._link_refusal(path, here / name)
        if e.errno == errno.ENOTDIR:
            return WorkspaceError(f"refused path {path!r}: {name!r} is not a folder")
        return WorkspaceError(f"cannot open {path!r}: {e.strerror}")

    def _link_refusal(self, path: str, link: Path) -> WorkspaceError:
        """The refusal of a path through the symbolic link `link`, saying whether it points outside."""
        try:
            target = link.resolve()
            outside = target != self.root and not target.is_relative_to(self.root)
        except (OSError, RuntimeError):
            outside = False
        why = "a symbolic link that leaves the workspace" if outside else "a symbolic link"
        return WorkspaceError(f"refused path {path!r}: {link.name!r} is {why} (the file tools never follow links)")

    def resolve(self, path: str) -> Path:
        """The absolute path of `path` inside the workspace (checked, nothing created).

        Raises:
            WorkspaceError: the path is empty, absolute, leaves the workspace through `..`, or passes
                through a symbolic link.
        """
        parts = self._parts(path)
        here = self.root
        for name in parts:
            here = here / name
            if here.is_symlink():
                raise self._link_refusal(path, here)
        return here

    def relative(self, target: Path) -> str:
        """`target` (inside the workspace) relative to the root, '.' for the root."""
        return str(target.relative_to(self.root)) if target != self.root else "."

    def usage_bytes(self) -> int:
        """Total size of the files in the workspace (links not followed)."""
        total, todo = 0, [str(self.root)]
        while todo:  # a stack, not os.walk (recursive before Python 3.12): any depth of folders
            with contextlib.suppress(OSError), os.scandir(todo.pop()) as entries:
                for e in entries:
                    todo += [e.path] if e.is_dir(follow_symlinks=False) else []
                    total += 0 if e.is_dir(follow_symlinks=False) else e.stat(follow_symlinks=False).st_size
        return total

    # files ------------------------------------------------------------------------------------
    def write_file(self, path: str, content: str) -> dict[str, Any]:
        """Write `content` to `path` (parent folders created); returns {"path", "bytes"}.

        Raises:
            WorkspaceError: a refused path, a target that is a folder, a link or has several hard
                links, or a size over the per-file or per-workspace cap.
        """
        parts = self._parts(path)
        if not parts:
            raise WorkspaceError(f"cannot write {path!r}: it is a directory")
        data = content.encode("utf-8")
        if len(data) > self.max_file_bytes:
            raise WorkspaceError(
                f"cannot write {path!r}: {len(data)} bytes is over the {self.max_file_bytes}-byte file cap"
            )
        name = parts[-1]
        with self._folder(path, parts[:-1], create=True) as dfd:
            old = self._existing(path, parts, dfd)
            total = self.usage_bytes() - old + len(data)
            if total > self.max_workspace_bytes:
                raise WorkspaceError(
                    f"cannot write {path!r}: the workspace would hold {total} bytes, over its "
                    f"{self.max_workspace_bytes}-byte cap"
                )
            tmp = f".{name}.{uuid.uuid4().hex[:8]}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)  # a new inode: never writes through a link
            except BaseException:
                os.unlink(tmp, dir_fd=dfd)
                raise
        return {"path": "/".join(parts), "bytes": len(data)}

    def _existing(self, path: str, parts: list[str], dfd: int) -> int:
        """Size of the file `parts[-1]` about to be replaced (0 if none); refuses anything but a plain file."""
        try:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return 0
        if stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"cannot write {path!r}: it is a directory")
        if stat.S_ISLNK(st.st_mode):
            raise self._link_refusal(path, self.root.joinpath(*parts))
        _check_plain(path, st)
        return st.st_size

    def read_file(self, path: str) -> dict[str, Any]:
        """Read `path` as UTF-8 text (cut at `output_cap` characters); returns {"path", "content", "truncated"}."""
        parts = self._parts(path)
        if not parts:
            raise WorkspaceError(f"cannot read {path!r}: it is a directory (use list_files)")
        with self._folder(path, parts[:-1]) as dfd:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except FileNotFoundError:
                raise WorkspaceError(f"cannot read {path!r}: no such file in the workspace") from None
            except OSError as e:
                raise self._refusal(path, self.root.joinpath(*parts[:-1]), parts[-1], dfd, e) from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"cannot read {path!r}: it is a directory (use list_files)")
            _check_plain(path, st)
            if st.st_size > self.max_file_bytes:
                raise WorkspaceError(
                    f"cannot read {path!r}: {st.st_size} bytes is over the {self.max_file_bytes}-byte file cap"
                )
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as f:
            text = f.read(self.max_file_bytes + 1).decode("utf-8", errors="replace")
        truncated = len(text) > self.output_cap
        if truncated:
            text = text[: self.output_cap] + f"\n[truncated: {len(text)} characters, first {self.output_cap} shown]"
        return {"path": "/".join(parts), "content": text, "truncated": truncated}

    def list_files(self, path: str = ".") -> dict[str, Any]:
        """Everything under `path`, recursively: files as 'a/b.txt', folders as 'a/', symlinks as
        'link -> target' (never followed); returns {"path", "entries", "truncated"}."""
        parts = self._parts(path)
        rel = "/".join(parts) or "."
        if parts:
            with self._folder(path, parts[:-1]) as dfd:
                try:
                    st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    raise WorkspaceError(f"cannot list {path!r}: no such folder in the workspace") from None
            if stat.S_ISLNK(st.st_mode):
                raise self._link_refusal(path, self.root.joinpath(*parts))
            if not stat.S_ISDIR(st.st_mode):
                return {"path": rel, "entries": [rel], "truncated": False}
        entries: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root.joinpath(*parts), followlinks=False):
            here = Path(dirpath)
            for name in dirnames + filenames:
                p = here / name
                entry = printable(str(p.relative_to(self.root)))
                if p.is_symlink():
                    entries.append(f"{entry} -> {printable(os.readlink(p))}")
                elif p.is_dir():
                    entries.append(entry + "/")
                else:
                    entries.append(entry)
        entries.sort()
        return {"path": rel, "entries": entries[:MAX_LIST_ENTRIES], "truncated": len(entries) > MAX_LIST_ENTRIES}

    # shell ------------------------------------------------------------------------------------
    async def shell(self, command: str, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Run `command` with /bin/sh in the workspace, in the sandbox (in a worker thread).

        Past the time limit the whole sandbox is killed; processes still running when the command
        exits (background, `setsid`, daemons) are killed too. Each stream keeps its first
        `output_cap` bytes, with a note when cut.

        Returns:
            {"command", "exit_code" (None when killed), "stdout", "stderr", "timed_out"} (no timing, so
            that a replayed run records the same output).

        Raises:
            SandboxUnavailable: bubblewrap is missing and `unsafe_shell` is off; says how to install it.
        """
        if not command.strip():
            raise WorkspaceError("shell command is empty")
        if not self.unsafe_shell:
            require_sandbox()
        limit = timeout_s if timeout_s is not None else self.shell_timeout_s
        return await asyncio.to_thread(self._shell_blocking, command, limit)

    def _shell_blocking(self, command: str, limit: float) -> dict[str, Any]:
        if sandbox_available():
            with self._shell_lock:  # one step at a time: each copies the workspace in and back
                return run_sandboxed(self.root, command, limits=self.limits, limit=limit, output_cap=self.output_cap)
        prlimit = prlimit_path()  # unsafe_shell: no isolation, but a cleared environment and rlimits
        argv = [prlimit, *self.limits.prlimit_args(processes=False), "--"] if prlimit else []
        return run_capped(
            [*argv, "/bin/sh", "-c", command], command, cwd=self.root, limit=limit, output_cap=self.output_cap
        )


def _check_plain(path: str, st: os.stat_result) -> None:
    """Refuse a link, a device, a fifo or a file with more than one hard link."""
    if stat.S_ISLNK(st.st_mode):
        raise WorkspaceError(f"refused path {path!r}: it is a symbolic link (the file tools never follow links)")
    if not stat.S_ISREG(st.st_mode):
        raise WorkspaceError(f"refused path {path!r}: not a regular file")
    if st.st_nlink > 1:
        raise WorkspaceError(
            f"refused path {path!r}: the file has {st.st_nlink} hard links, so it may be a file outside the workspace"
        )


def fresh_workspace_name(base: str | Path | None, stem: str) -> str:
    """`<stem>-<n>` with the first n (1, 2, ...) whose directory under `base` did not exist; the directory is
    made here, which claims the name also against a concurrent run, so a re-run never wipes an earlier one."""
    root = Path(base if base is not None else DEFAULT_BASE).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        try:
            (root / f"{stem}-{n}").mkdir()
            return f"{stem}-{n}"
        except FileExistsError:
            n += 1
