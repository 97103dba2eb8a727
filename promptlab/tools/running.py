"""Running one command with its output captured and capped, under a wall-clock limit, in its own session."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from .bwrap import safe_env

_DRAIN_S = 1.0
"""How long to wait for the output pipes to close once the command has exited or been killed."""


def run_capped(
    argv: list[str], command: str, *, cwd: Path, limit: float, output_cap: int, pass_fds: tuple[int, ...] = ()
) -> dict[str, Any]:
    """Run `argv` (blocking) in its own session with the safe environment, under a wall-clock limit.

    Past the limit the process group is killed (for bwrap, its death takes the sandbox's pid
    namespace with it). Each stream keeps its first `output_cap` bytes, with a note when cut.

    Returns:
        {"command", "exit_code" (None when killed), "stdout", "stderr", "timed_out"}.
    """
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=safe_env(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    out, err = _Capped(output_cap), _Capped(output_cap)
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=c.drain, args=(pipe,), daemon=True)
        for c, pipe in ((out, proc.stdout), (err, proc.stderr))
    ]
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
        "stderr": join_note(err.text(), timeout_note(limit) if timed_out else ""),
        "timed_out": timed_out,
    }


def join_note(text: str, note: str) -> str:
    """`text` with `note` on a line of its own after it (either may be empty)."""
    if not (text and note):
        return text or note
    return f"{text}{'' if text.endswith(chr(10)) else chr(10)}{note}"


def timeout_note(limit: float) -> str:
    """What a step's stderr says when the step was killed at its time limit."""
    return f"[killed after the {limit:g} s time limit]"


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


__all__ = ["join_note", "run_capped", "timeout_note"]
