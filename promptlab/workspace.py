"""A per-run sandbox directory: file operations confined to it, and a shell that runs in it.

Every path is taken relative to the workspace root, resolved (following symlinks, also ones a shell
command created) and refused unless it stays inside the root: `..` escapes, absolute paths and
symlinks pointing outside all raise `WorkspaceError`.

The shell runs with the workspace as its working directory, in its own process group, under a time
limit (the whole group is killed when it passes) and an output cap. It is a working directory, not a
security boundary: a command can still name absolute paths itself. Only the file operations are
confined.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from .errors import PromptlabError

DEFAULT_BASE = Path(".promptlab") / "workspaces"
"""Where run workspaces go by default (relative to the working directory)."""
MAX_LIST_ENTRIES = 500
"""Most entries `list_files` returns."""
_DRAIN_S = 1.0
"""How long to wait for the output pipes to close once the shell has exited or been killed."""


class WorkspaceError(PromptlabError, ValueError):
    """A path that leaves the workspace, or a file operation that cannot be done; the message says which."""


class Workspace:
    """A directory that a run's tools work in.

    Args:
        root: the directory (created if missing).
        shell_timeout_s: time limit of a shell command, in seconds.
        output_cap: most bytes kept of each of stdout and stderr (and characters of a file read).
    """

    def __init__(self, root: str | Path, *, shell_timeout_s: float = 10.0, output_cap: int = 8192) -> None:
        if shell_timeout_s <= 0:
            raise WorkspaceError(f"shell_timeout_s must be > 0, got {shell_timeout_s}")
        if output_cap < 1:
            raise WorkspaceError(f"output_cap must be >= 1, got {output_cap}")
        path = Path(root).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self.root = path.resolve()
        self.shell_timeout_s = shell_timeout_s
        self.output_cap = output_cap

    @classmethod
    def for_run(cls, base: str | Path | None, run_id: str, **kwargs: Any) -> Workspace:
        """The workspace `<base>/<run_id>`, emptied first (a replay of a run gets a fresh one).

        Args:
            base: parent directory (default `.promptlab/workspaces`).
            run_id: the run's id (a plain name, no separators).
            **kwargs: shell_timeout_s, output_cap.
        """
        if not run_id or any(sep in run_id for sep in ("/", "\\", "\0")) or run_id in (".", ".."):
            raise WorkspaceError(f"run_id {run_id!r} cannot name a workspace directory")
        root = Path(base if base is not None else DEFAULT_BASE).expanduser() / run_id
        if root.is_symlink() or root.is_file():
            root.unlink()
        elif root.exists():
            shutil.rmtree(root)
        return cls(root, **kwargs)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # paths ------------------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """The absolute path of `path` inside the workspace.

        Raises:
            WorkspaceError: the path is empty, absolute, or resolves (through `..` or symlinks)
                outside the workspace.
        """
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError(f"a workspace path must be a non-empty string, got {path!r}")
        if "\0" in path:
            raise WorkspaceError(f"path {path!r} contains a NUL character")
        rel = Path(path)
        if rel.is_absolute():
            raise WorkspaceError(f"refused path {path!r}: absolute paths are not allowed; give a path "
                                 "relative to the workspace")
        target = (self.root / rel).resolve()
        if target != self.root and not target.is_relative_to(self.root):
            raise WorkspaceError(f"refused path {path!r}: it leaves the workspace (resolves to {target})")
        return target

    def relative(self, target: Path) -> str:
        """`target` (inside the workspace) relative to the root, '.' for the root."""
        return str(target.relative_to(self.root)) if target != self.root else "."

    # files ------------------------------------------------------------------------------------
    def write_file(self, path: str, content: str) -> dict[str, Any]:
        """Write `content` to `path` (parent folders created); returns {"path", "bytes"}."""
        target = self.resolve(path)
        if target == self.root or target.is_dir():
            raise WorkspaceError(f"cannot write {path!r}: it is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        target.write_bytes(data)
        return {"path": self.relative(target), "bytes": len(data)}

    def read_file(self, path: str) -> dict[str, Any]:
        """Read `path` as UTF-8 text (cut at `output_cap` characters); returns {"path", "content", "truncated"}."""
        target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(f"cannot read {path!r}: no such file in the workspace")
        if target.is_dir():
            raise WorkspaceError(f"cannot read {path!r}: it is a directory (use list_files)")
        text = target.read_bytes().decode("utf-8", errors="replace")
        truncated = len(text) > self.output_cap
        if truncated:
            text = text[: self.output_cap] + f"\n[truncated: {len(text)} characters, first {self.output_cap} shown]"
        return {"path": self.relative(target), "content": text, "truncated": truncated}

    def list_files(self, path: str = ".") -> dict[str, Any]:
        """Everything under `path`, recursively: files as 'a/b.txt', folders as 'a/', symlinks as
        'link -> target' (never followed); returns {"path", "entries", "truncated"}."""
        target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(f"cannot list {path!r}: no such folder in the workspace")
        if not target.is_dir():
            return {"path": self.relative(target), "entries": [self.relative(target)], "truncated": False}
        entries: list[str] = []
        for dirpath, dirnames, filenames in os.walk(target, followlinks=False):
            dirnames.sort()
            here = Path(dirpath)
            for name in dirnames + sorted(filenames):
                p = here / name
                rel = str(p.relative_to(self.root))
                if p.is_symlink():
                    entries.append(f"{rel} -> {os.readlink(p)}")
                elif p.is_dir():
                    entries.append(rel + "/")
                else:
                    entries.append(rel)
        entries.sort()
        return {"path": self.relative(target), "entries": entries[:MAX_LIST_ENTRIES],
                "truncated": len(entries) > MAX_LIST_ENTRIES}

    # shell ------------------------------------------------------------------------------------
    async def shell(self, command: str, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Run `command` with /bin/sh in the workspace, in its own process group (in a worker thread).

        Past the time limit the whole group is killed, so a hung command or its children cannot hold
        the run; background children still running when the command exits are killed too. Each
        stream keeps its first `output_cap` bytes, with a note when cut.

        Returns:
            {"command", "exit_code" (None when killed), "stdout", "stderr", "timed_out"} (no timing, so
            that a replayed run records the same output).
        """
        if not command.strip():
            raise WorkspaceError("shell command is empty")
        limit = timeout_s if timeout_s is not None else self.shell_timeout_s
        return await asyncio.to_thread(self._shell_blocking, command, limit)

    def _shell_blocking(self, command: str, limit: float) -> dict[str, Any]:
        proc = subprocess.Popen(command, shell=True, cwd=self.root, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        out, err = _Capped(self.output_cap), _Capped(self.output_cap)
        assert proc.stdout is not None and proc.stderr is not None
        readers = [threading.Thread(target=c.drain, args=(pipe,), daemon=True)
                   for c, pipe in ((out, proc.stdout), (err, proc.stderr))]
        for r in readers:
            r.start()
        timed_out = False
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)  # also after a normal exit: leftover background children go too
            proc.wait()
        for r in readers:
            r.join(timeout=_DRAIN_S)  # a child that left the group could hold a pipe open: do not wait on it
        return {
            "command": command,
            "exit_code": None if timed_out else proc.returncode,
            "stdout": out.text(),
            "stderr": _join(err.text(), f"[killed after the {limit:g} s time limit]" if timed_out else ""),
            "timed_out": timed_out,
        }


def _join(text: str, note: str) -> str:
    return f"{text}\n{note}" if text and note else text or note


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Capped:
    """Keeps the first `cap` bytes of a stream and counts the rest (reading on, so the child never blocks)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0
        self.lock = threading.Lock()

    def drain(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := os.read(stream.fileno(), 65536):
                with self.lock:
                    self.total += len(chunk)
                    room = self.cap - len(self.data)
                    if room > 0:
                        self.data.extend(chunk[:room])

    def text(self) -> str:
        with self.lock:
            body = self.data.decode("utf-8", errors="replace")
            if self.total > self.cap:
                body += f"\n[output truncated: {self.total} bytes in total, first {self.cap} kept]"
        return body


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
