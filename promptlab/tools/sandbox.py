"""The shell sandbox: bubblewrap command lines, resource limits, the allowed environment, secret redaction.

A command written by a model runs under bubblewrap (`bwrap`) in fresh namespaces (user, mount, pid,
network, ipc, uts, cgroup), with every capability dropped, and sees:

- the system software read-only (/usr and the /bin, /sbin, /lib* links or folders), a few files of
  /etc that programs need (the loader cache, alternatives, localtime, ...) and a synthetic
  /etc/passwd and /etc/group that list only root, nobody and the sandbox user; nothing else of the
  host (no /home, /root, /work, /var, /opt, /run, /mnt, /sys);
- the run's workspace at its own path, the only writable host folder, and a private /tmp (a small tmpfs);
- its own /proc (only the sandbox's processes) and a minimal /dev; the sandbox's root folder itself
  is read-only (the folders leading to the workspace exist there, empty);
- no network: only a loopback device of its own, so even 127.0.0.1 of the host is unreachable;
- an environment of PATH, LANG and HOME (the workspace) only.

Resource limits (`SandboxLimits`) are set with `prlimit` inside the sandbox, so the process limit
counts the sandbox's processes only (a fresh user namespace). The kernel does not apply the process
limit to root: as root a pids cgroup (`pids.max`) bounds the step where one can be made, see
`process_cap_available`. The wall-clock limit is enforced by `run_capped`, which kills bwrap; with
`--die-with-parent` and the pid namespace every process of the step dies with it, also a `setsid`
one. When the step's first process exits, bwrap exits and the namespace is torn down.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import PromptlabError

INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`) "
                "or opt in to an unsandboxed shell with unsafe_shell=True")
"""How to get a sandboxed shell, quoted in every refusal."""

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
"""PATH inside the sandbox (the parent's PATH is not passed on: it may name folders the sandbox cannot see)."""
SANDBOX_LANG = "C.UTF-8"
"""LANG inside the sandbox."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host folders shown read-only (a symlink, as on merged-/usr systems, is recreated as a symlink)."""
ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/mime.types", "/etc/ssl")
"""The only host files of /etc shown (read-only); /etc/passwd and /etc/group are synthetic."""

SECRET_NAME_PATTERNS = ("*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*")
"""Environment variable names (case-insensitive globs) whose values are secrets."""
KNOWN_SECRET_NAMES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY",
                      "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY", "COHERE_API_KEY",
                      "DEEPSEEK_API_KEY", "XAI_API_KEY", "HF_TOKEN", "HUGGINGFACE_API_KEY", "AZURE_API_KEY",
                      "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GITHUB_TOKEN",
                      "DATABASE_URL")
"""Provider and service variables redacted whatever their names match."""
MIN_SECRET_LEN = 6
"""Shorter values are not redacted (a value like '1' or 'true' would blank unrelated text)."""
REDACTED = "[REDACTED:{name}]"
"""What a secret value is replaced with."""


class SandboxUnavailable(PromptlabError):
    """bubblewrap is missing or cannot make its namespaces here; the message says how to fix it."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one shell step (each an rlimit, soft = hard, so the command cannot raise it)."""

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
    """Size of the private /tmp (a tmpfs)."""

    def prlimit_args(self, *, processes: bool = True) -> list[str]:
        """`prlimit` options setting these limits."""
        args = [f"--cpu={self.cpu_s}", f"--fsize={self.file_bytes}", f"--nofile={self.open_files}",
                f"--as={self.address_space_bytes}"]
        return args + [f"--nproc={self.processes}"] if processes else args


def bwrap_path() -> str | None:
    """The bwrap executable, or None."""
    return shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)


def prlimit_path() -> str | None:
    """The prlimit executable (util-linux), or None."""
    return shutil.which("prlimit") or ("/usr/bin/prlimit" if os.access("/usr/bin/prlimit", os.X_OK) else None)


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why no command can be sandboxed here (None when bwrap works); probed once per process."""
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
    return None


@functools.lru_cache(maxsize=4)
def bwrap_options(bwrap: str) -> frozenset[str]:
    """The long options this bwrap knows (older versions lack --disable-userns and --size)."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(re.findall(r"^\s+(--[a-z-]+)", text, flags=re.MULTILINE))


def sandbox_available() -> bool:
    """True when shell commands can run under bubblewrap on this machine."""
    return sandbox_problem() is None


def require_sandbox() -> None:
    """Raise SandboxUnavailable (with how to fix it) unless commands can be sandboxed here."""
    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailable(f"the shell tool is refused: {problem}, so a command cannot run in a sandbox; "
                                 f"{INSTALL_HINT}")


def safe_env(home: Path) -> dict[str, str]:
    """The whole environment a command gets: PATH, LANG and HOME (the workspace)."""
    return {"PATH": SANDBOX_PATH, "LANG": SANDBOX_LANG, "HOME": str(home)}


def _identity_files(home: Path) -> tuple[str, str]:
    uid, gid = os.getuid(), os.getgid()
    users = ["root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"]
    groups = ["root:x:0:", "nogroup:x:65534:"]
    if uid not in (0, 65534):
        users.append(f"sandbox:x:{uid}:{gid}:sandbox:{home}:/bin/sh")
    if gid not in (0, 65534):
        groups.append(f"sandbox:x:{gid}:")
    return "\n".join(users) + "\n", "\n".join(groups) + "\n"


def bwrap_argv(bwrap: str, root: Path, command: list[str], *, limits: SandboxLimits, writable: bool = True,
               data_fds: tuple[int, int] | None = None) -> list[str]:
    """The bwrap command line running `command` in `root` (bound writable when `writable`).

    `data_fds` are read ends of pipes holding the synthetic /etc/passwd and /etc/group.
    """
    known = bwrap_options(bwrap)
    argv = [bwrap, "--unshare-all", "--unshare-user", "--unshare-net", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv"]
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
    if data_fds is not None:
        argv += ["--ro-bind-data", str(data_fds[0]), "/etc/passwd", "--ro-bind-data", str(data_fds[1]), "/etc/group"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"] if "--size" in known else ["--tmpfs", "/tmp"]
    if writable:
        argv += ["--bind", str(root), str(root)]
    argv += ["--remount-ro", "/", "--chdir", str(root), "--", "prlimit", *limits.prlimit_args(), "--", *command]
    return argv


@contextmanager
def identity_pipes(home: Path) -> Iterator[tuple[int, int]]:
    """Read ends of two pipes holding the sandbox's /etc/passwd and /etc/group (closed on exit)."""
    fds: list[int] = []
    try:
        for text in _identity_files(home):
            r, w = os.pipe()
            fds.append(r)
            os.write(w, text.encode())  # a few hundred bytes: always fits the pipe buffer
            os.close(w)
        yield fds[0], fds[1]
    finally:
        for fd in fds:
            os.close(fd)


# process cap for root ----------------------------------------------------------------------------
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


# redaction ----------------------------------------------------------------------------------------
def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    upper = name.upper()
    return upper in KNOWN_SECRET_NAMES or any(fnmatch.fnmatchcase(upper, p) for p in SECRET_NAME_PATTERNS)


def secret_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret values of the environment by value -> variable name (longest values first)."""
    env = os.environ if environ is None else environ
    found = {v: k for k, v in env.items() if is_secret_name(k) and len(v.strip()) >= MIN_SECRET_LEN}
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


def redact(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`value` (a string, or JSON-like lists and dicts of them) with every secret value replaced."""
    secrets = secret_values(environ)
    if not secrets:
        return value
    pattern = re.compile("|".join(re.escape(s) for s in secrets))
    return _redact(value, pattern, secrets)


def _redact(value: Any, pattern: re.Pattern[str], secrets: dict[str, str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(lambda m: REDACTED.format(name=secrets[m.group(0)]), value)
    if isinstance(value, list):
        return [_redact(v, pattern, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _redact(v, pattern, secrets) for k, v in value.items()}
    return value


# running ------------------------------------------------------------------------------------------
_DRAIN_S = 1.0
"""How long to wait for the output pipes to close once the command has exited or been killed."""


def run_capped(argv: list[str], command: str, *, cwd: Path, limit: float, output_cap: int,
               pass_fds: tuple[int, ...] = ()) -> dict[str, Any]:
    """Run `argv` (blocking) in its own session with the safe environment, under a wall-clock limit.

    Past the limit the process group is killed (for bwrap, its death takes the sandbox's pid
    namespace with it). Each stream keeps its first `output_cap` bytes, with a note when cut.

    Returns:
        {"command", "exit_code" (None when killed), "stdout", "stderr", "timed_out"}.
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=safe_env(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, pass_fds=pass_fds)
    out, err = _Capped(output_cap), _Capped(output_cap)
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
        _kill_group(proc.pid)  # bwrap's death takes the sandbox's pid namespace with it
        proc.wait()
    for r in readers:
        r.join(timeout=_DRAIN_S)
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
