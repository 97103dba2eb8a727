"""One shell step on a size-limited copy of the workspace, run in a private mount namespace.

`promptlab.tools.sandbox.run_staged` starts this file as a script (`python -I -S stager.py SPEC_FILE`) under
`unshare --mount` (as root) or `unshare --user --map-root-user --mount` (as any other user). It uses the
standard library only and imports nothing of promptlab, so a step pays for a bare interpreter only. It:

1. mounts two tmpfs filesystems, each capped in bytes and in files (inodes): one for the workspace copy, one
   for the sandbox's /tmp and /dev/shm; a write past a cap fails with ENOSPC inside the sandbox;
2. copies the host workspace in (owned by the sandbox user; symbolic links kept as links, never followed;
   hard links kept; holes of sparse files kept);
3. runs bubblewrap, as root under an unprivileged host user with no capabilities, under the wall-clock
   limit (past it bwrap's process group is killed, and the sandbox's pid namespace with it);
4. copies the workspace copy back over the host workspace: folders, regular files and links only (fifos,
   sockets and devices are dropped), set-id and sticky bits cleared, owned by the host user. The copy is
   made beside the old contents and swapped in, so a copy that fails leaves the workspace as it was;
5. writes its status (JSON: exit code, timed out, what was not kept, or the error) to the status file.

The mounts disappear with the namespace when this process exits, also when it is killed; it dies with its
parent (PR_SET_PDEATHSIG), and bwrap with it (`--die-with-parent`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import uuid
from typing import Any

MS_NOSUID, MS_NODEV = 2, 4
PR_SET_PDEATHSIG = 1
CHUNK = 1 << 20
"""Bytes per read when copying a file's data."""


class StageError(Exception):
    """The step could not be staged or its results not kept; the message is for the user."""


def mount_tmpfs(libc: Any, target: str, size: int, inodes: int, owner: tuple[int, int] | None) -> None:
    """Mount a tmpfs of at most `size` bytes and `inodes` files and folders on `target` (mode 0755)."""
    opts = f"size={size},nr_inodes={inodes},mode=0755"
    if owner is not None:
        opts += f",uid={owner[0]},gid={owner[1]}"
    if libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode()) != 0:
        e = ctypes.get_errno()
        raise StageError(f"cannot mount a tmpfs on {target}: {os.strerror(e)}")


class Copier:
    """Copies a tree without following links; keeps hard links and holes; counts what it drops."""

    def __init__(self, owner: tuple[int, int] | None) -> None:
        self.owner = owner
        self.linked: dict[tuple[int, int], str] = {}
        self.dropped: dict[str, int] = {}

    def tree(self, src: str, dst: str) -> None:
        """Copy the contents of folder `src` into the existing folder `dst`, however deep (a loop over a stack,
        not recursion: a chain of 1,500 folders is copied, never a RecursionError half-way)."""
        todo: list[tuple[str, str, int | None]] = [(src, dst, None)]
        while todo:
            here, there, mode = todo.pop()
            if mode is not None:  # a folder whose contents are all copied: its own bits now
                self.finish(there, mode)
                continue
            with os.scandir(here) as entries:
                for entry in entries:
                    target = os.path.join(there, entry.name)
                    st = os.lstat(entry.path)
                    if stat.S_ISDIR(st.st_mode):
                        os.mkdir(target, 0o700)
                        todo.append((entry.path, target, st.st_mode | 0o700))
                        todo.append((entry.path, target, None))
                    else:
                        self.entry(entry.path, target, st)

    def entry(self, src: str, dst: str, st: os.stat_result) -> None:
        """Copy one entry that is not a folder (a link, a regular file; anything else is dropped and counted)."""
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
            if self.owner is not None:
                os.lchown(dst, *self.owner)
        elif stat.S_ISREG(st.st_mode):
            first = self.linked.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
            if first is not None:
                os.link(first, dst, follow_symlinks=False)
                return
            self.file(src, dst, st)
            self.finish(dst, st.st_mode)
            if st.st_nlink > 1:
                self.linked[(st.st_dev, st.st_ino)] = dst
        else:
            kind = "fifo" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device"
            self.dropped[kind] = self.dropped.get(kind, 0) + 1

    def file(self, src: str, dst: str, st: os.stat_result) -> None:
        """Copy a regular file's data region by region (holes stay holes, so a sparse file costs what it holds)."""
        fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                pos = 0
                while pos < st.st_size:
                    try:
                        start = os.lseek(fin, pos, os.SEEK_DATA)
                    except OSError as e:
                        if e.errno != errno.ENXIO:  # ENXIO: only a hole is left
                            raise
                        break
                    end = os.lseek(fin, start, os.SEEK_HOLE)
                    while start < end:
                        data = os.pread(fin, min(CHUNK, end - start), start)
                        if not data:
                            break
                        os.pwrite(fout, data, start)
                        start += len(data)
                    pos = end
                os.ftruncate(fout, st.st_size)
            finally:
                os.close(fout)
        finally:
            os.close(fin)

    def finish(self, path: str, mode: int) -> None:
        """Owner and permission bits (set-id and sticky bits never carried over)."""
        if self.owner is not None:
            os.lchown(path, *self.owner)
        os.chmod(path, stat.S_IMODE(mode) & 0o777)


def remove_tree(path: str) -> None:
    """Remove a folder and everything under it, however deep (shutil.rmtree recurses), ignoring what is gone."""
    todo, folders = [path], []
    while todo:
        here = todo.pop()
        folders.append(here)
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    else:
                        try:
                            os.unlink(entry.path)
                        except FileNotFoundError:
                            pass
        except FileNotFoundError:
            continue
    for folder in reversed(folders):
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass


def copy_in(workspace: str, dest: str, owner: tuple[int, int] | None, cap: int) -> None:
    try:
        Copier(owner).tree(workspace, dest)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StageError(
                f"the workspace does not fit the shell's writable space ({cap} bytes and "
                "SandboxLimits.max_files files): remove files, or raise SandboxLimits.workspace_bytes "
                "or max_files"
            ) from None
        raise StageError(f"could not copy the workspace into the sandbox: {e}") from None


def copy_out(stage_ws: str, workspace: str) -> dict[str, int]:
    """Replace the host workspace's contents with the stage's; returns the special files dropped."""
    tag = uuid.uuid4().hex[:12]
    fresh, old = os.path.join(workspace, f".promptlab-new-{tag}"), os.path.join(workspace, f".promptlab-old-{tag}")
    os.mkdir(fresh, 0o700)
    copier = Copier(None)
    try:
        copier.tree(stage_ws, fresh)
    except Exception as e:  # noqa: BLE001 -- whatever stopped it (OSError, MemoryError...): nothing is left behind
        remove_tree(fresh)
        raise StageError(
            f"the step's changes to the workspace were not kept (copying them back failed: {type(e).__name__}: "
            f"{e}); the workspace is as it was before the step"
        ) from None
    os.mkdir(old, 0o700)
    for name in os.listdir(workspace):
        if name not in (os.path.basename(fresh), os.path.basename(old)):
            os.rename(os.path.join(workspace, name), os.path.join(old, name))
    for name in os.listdir(fresh):
        os.rename(os.path.join(fresh, name), os.path.join(workspace, name))
    os.rmdir(fresh)
    remove_tree(old)
    return copier.dropped


def run_bwrap(spec: dict[str, Any]) -> tuple[int | None, bool]:
    """Run the bwrap command line (as the sandbox user, when given) under the time limit: (exit code, timed out)."""
    owner = spec["run_as"]
    ids: dict[str, Any] = {"user": owner[0], "group": owner[1], "extra_groups": []} if owner else {}
    proc = subprocess.Popen(
        spec["bwrap"],
        stdin=subprocess.DEVNULL,
        pass_fds=tuple(spec["pass_fds"]),
        start_new_session=True,
        env=spec["env"],
        cwd="/",
        **ids,
    )
    try:
        proc.wait(timeout=spec["limit"])
        return proc.returncode, False
    except subprocess.TimeoutExpired:
        return None, True
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # bwrap's death takes the sandbox's pid namespace with it
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def stage(spec: dict[str, Any], libc: Any) -> dict[str, Any]:
    """Mount, copy in, run, copy out; the status to report."""
    ws, scratch, owner = spec["stage_ws"], spec["stage_scratch"], spec["run_as"]
    mount_tmpfs(libc, ws, spec["workspace_bytes"], spec["max_files"], owner)
    mount_tmpfs(libc, scratch, spec["tmp_bytes"], spec["max_files"], owner)
    for name in ("tmp", "shm"):
        os.mkdir(os.path.join(scratch, name), 0o700)
        if owner is not None:
            os.chown(os.path.join(scratch, name), *owner)
    copy_in(spec["workspace"], ws, owner, spec["workspace_bytes"])
    code, timed_out = run_bwrap(spec)
    status: dict[str, Any] = {"exit_code": code, "timed_out": timed_out}
    try:
        status["dropped"] = copy_out(ws, spec["workspace"])
    except StageError as e:  # the command ran: its output stands, its files are lost (and the model is told)
        status["not_kept"] = str(e)
    return status


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != spec["parent"]:  # the parent died before the line above: nobody waits for this step
        return 1
    try:
        status = stage(spec, libc)
    except StageError as e:
        status = {"error": str(e)}
    except Exception as e:  # reported to the parent, which raises it with the step's context
        status = {"error": f"the sandbox step failed: {type(e).__name__}: {e}"}
    with open(spec["status"], "w") as f:
        json.dump(status, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
