"""The shell sandbox: whether commands can be sandboxed here, and running one shell step in it.

A command written by a model runs under bubblewrap (the command line and what the sandbox sees:
`promptlab.tools.bwrap`; its limits: `promptlab.tools.limits`). Each step is *staged*
(`promptlab.tools.stager`): in a private mount namespace, the workspace is copied onto a tmpfs capped in
bytes and files, the command runs on that copy, and the copy is written back after it. So:

- as root, the command runs as an unprivileged host user (nobody) with no capabilities, so host files
  only root may read (mode 0600 root files in /etc/ssl/private, ...) stay unreadable even where they are
  visible; the workspace copy belongs to that user;
- whatever a command writes is capped: the workspace at `SandboxLimits.workspace_bytes` and `max_files`,
  /tmp and /dev/shm together at `tmp_bytes` and `max_files`; /dev is read-only.

As root a step is always staged (if it cannot be, the shell is refused and the reason given). As another
user it is staged where unprivileged user and mount namespaces work (`staging_problem()`); elsewhere the
workspace is bound directly (no byte or file cap on it) and /tmp and /dev/shm are bubblewrap's size-capped
tmpfs. The wall-clock limit kills bwrap, and with `--die-with-parent` and the pid namespace every process
of the step dies with it, also a `setsid` one. The stager dies with promptlab (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import PromptlabError
from .bwrap import bwrap_argv, bwrap_path, identity_pipes, prlimit_path, safe_env
from .limits import SandboxLimits, in_cgroup, pids_cgroup
from .running import join_note, run_capped, timeout_note

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`) "
    "or opt in to an unsandboxed shell with unsafe_shell=True"
)
"""How to get a sandboxed shell, quoted in every refusal."""
SANDBOX_IDS = (65534, 65534)
"""The host uid and gid (nobody, nogroup) commands run as when promptlab runs as root."""
STAGER = Path(__file__).with_name("stager.py")
"""The script that stages each step (run by a bare interpreter in a private mount namespace)."""
STAGE_GRACE_S = 60.0
"""Time on top of a step's limit for copying its workspace in and out, before the stager itself is killed."""


class SandboxUnavailable(PromptlabError):
    """bubblewrap is missing or cannot make its namespaces here; the message says how to fix it."""


class SandboxStepError(PromptlabError, ValueError):
    """A shell step that could not run or finish in its stage (e.g. the workspace does not fit its cap)."""


def unshare_path() -> str | None:
    """The unshare executable (util-linux), or None."""
    return shutil.which("unshare") or ("/usr/bin/unshare" if os.access("/usr/bin/unshare", os.X_OK) else None)


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why no command can be sandboxed here (None when bwrap works, and as root when steps can be staged);
    probed once per process."""
    bwrap, prlimit = bwrap_path(), prlimit_path()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    if prlimit is None:
        return "prlimit (util-linux) is not installed"
    probe = Path("/")
    argv = bwrap_argv(bwrap, probe, ["/bin/true"], limits=SandboxLimits(), writable=False)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20, env=safe_env(probe))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not be started: {e}"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[:300]
        return f"bwrap cannot run the sandbox here (exit {done.returncode}: {detail})"
    if os.geteuid() == 0 and (problem := staging_problem()) is not None:
        return (
            f"running as root, a command must run as an unprivileged user on a size-capped copy of the "
            f"workspace, and that cannot be set up here: {problem}"
        )
    return None


@functools.lru_cache(maxsize=1)
def staging_problem() -> str | None:
    """Why steps cannot be staged here (a tmpfs in a private mount namespace), or None; probed once per process."""
    if unshare_path() is None:
        return "unshare (util-linux) is not installed"
    if bwrap_path() is None or prlimit_path() is None:
        return "bubblewrap or prlimit is not installed"
    with tempfile.TemporaryDirectory(prefix="promptlab-probe-") as d:
        try:
            out = run_staged(Path(d), "echo staged > probe", limits=SandboxLimits(), limit=20, output_cap=2000)
        except (SandboxStepError, OSError) as e:
            return str(e)
        if out["exit_code"] != 0 or not Path(d, "probe").is_file():
            return f"a probe step failed (exit {out['exit_code']}: {out['stderr'].strip()[:300]})"
    return None


def sandbox_available() -> bool:
    """True when shell commands can run under bubblewrap on this machine."""
    return sandbox_problem() is None


def require_sandbox() -> None:
    """Raise SandboxUnavailable (with how to fix it) unless commands can be sandboxed here."""
    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailable(
            f"the shell tool is refused: {problem}, so a command cannot run in a sandbox; {INSTALL_HINT}"
        )


def run_sandboxed(root: Path, command: str, *, limits: SandboxLimits, limit: float, output_cap: int) -> dict[str, Any]:
    """Run `/bin/sh -c command` in the sandbox on the workspace `root` (blocking): staged where it can be,
    else (a non-root user without mount namespaces) on the workspace folder itself.

    Returns:
        {"command", "exit_code" (None when killed), "stdout", "stderr", "timed_out"}.

    Raises:
        SandboxStepError: the step could not be staged (e.g. the workspace does not fit its cap).
    """
    if staging_problem() is None:
        return run_staged(root, command, limits=limits, limit=limit, output_cap=output_cap)
    uid, gid = os.getuid(), os.getgid()
    with identity_pipes(uid, gid, root) as fds, pids_cgroup(limits.processes) as procs:
        argv = bwrap_argv(str(bwrap_path()), root, ["/bin/sh", "-c", command], limits=limits, data_fds=fds)
        return run_capped(in_cgroup(procs, argv), command, cwd=root, limit=limit, output_cap=output_cap, pass_fds=fds)


def run_staged(root: Path, command: str, *, limits: SandboxLimits, limit: float, output_cap: int) -> dict[str, Any]:
    """Run one step through the stager (see the module's docstring); same result as `run_sandboxed`."""
    stage = Path(tempfile.mkdtemp(prefix="promptlab-stage-"))
    try:
        stage.chmod(0o711)  # the sandbox user passes through to the tmpfs mounted on ws/ and scratch/
        (stage / "ws").mkdir()
        (stage / "scratch").mkdir()
        as_root = os.geteuid() == 0
        uid, gid = SANDBOX_IDS if as_root else (os.getuid(), os.getgid())
        with identity_pipes(uid, gid, root) as fds, pids_cgroup(limits.processes + 1) as procs:
            spec = {
                "workspace": str(root),
                "stage_ws": str(stage / "ws"),
                "stage_scratch": str(stage / "scratch"),
                "bwrap": bwrap_argv(
                    str(bwrap_path()),
                    root,
                    ["/bin/sh", "-c", command],
                    limits=limits,
                    data_fds=fds,
                    stage=stage,
                    ids=None if as_root else (uid, gid),
                ),
                "run_as": [uid, gid] if as_root else None,
                "pass_fds": list(fds),
                "env": safe_env(root),
                "limit": limit,
                "workspace_bytes": limits.workspace_bytes,
                "tmp_bytes": limits.tmp_bytes,
                "max_files": limits.max_files,
                "status": str(stage / "status.json"),
                "parent": os.getpid(),
            }
            (stage / "spec.json").write_text(json.dumps(spec))
            namespaces = (
                ["--mount", "--propagation", "private"]
                if as_root
                else ["--user", "--map-root-user", "--mount", "--propagation", "private"]
            )
            argv = [
                str(unshare_path()),
                *namespaces,
                "--",
                sys.executable,
                "-I",
                "-S",
                str(STAGER),
                str(stage / "spec.json"),
            ]
            out = run_capped(
                in_cgroup(procs, argv),
                command,
                cwd=root,
                limit=limit + STAGE_GRACE_S,
                output_cap=output_cap,
                pass_fds=fds,
            )
        return _with_status(out, stage / "status.json", limit)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _with_status(out: dict[str, Any], status_file: Path, limit: float) -> dict[str, Any]:
    """The step's result with the stager's status (exit code, time limit, what was not kept)."""
    try:
        status = json.loads(status_file.read_text())
    except (OSError, ValueError):
        cause = (
            f"it was killed after {limit + STAGE_GRACE_S:g} s"
            if out["timed_out"]
            else f"it exited with {out['exit_code']}: {out['stderr'].strip()[-300:]}"
        )
        raise SandboxStepError(f"the sandbox stager gave no status ({cause})") from None
    if "error" in status:
        raise SandboxStepError(status["error"])
    out["exit_code"], out["timed_out"] = status["exit_code"], status["timed_out"]
    notes = [timeout_note(limit)] if status["timed_out"] else []
    if status.get("dropped"):
        notes.append(
            "[not kept in the workspace (only files, folders and links are): "
            + ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(status["dropped"].items()))
            + "]"
        )
    if status.get("not_kept"):
        notes.append(f"[{status['not_kept']}]")
    out["stderr"] = join_note(out["stderr"], "\n".join(notes))
    return out


__all__ = [
    "INSTALL_HINT",
    "SANDBOX_IDS",
    "STAGER",
    "STAGE_GRACE_S",
    "SandboxStepError",
    "SandboxUnavailable",
    "require_sandbox",
    "run_sandboxed",
    "run_staged",
    "sandbox_available",
    "sandbox_problem",
    "staging_problem",
    "unshare_path",
]
