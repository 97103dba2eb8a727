"""The sandbox as root and its caps: commands run unprivileged, /dev is minimal, and what a command writes is
capped in bytes and files (workspace, /tmp, /dev/shm); the staged workspace keeps what it should.

The machine the tests run on runs them as root, so these prove the root case; tests that plant root files
skip as another user.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptlab.tools.builtin import ToolEnv, build_tools
from promptlab.tools.limits import SandboxLimits
from promptlab.tools.sandbox import sandbox_problem, staging_problem
from promptlab.tools.workspace import Workspace

needs_bwrap = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"no sandbox here ({sandbox_problem()}): apt-get install bubblewrap"
)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="plants root-only files: run as root")
MiB = 2**20


def sh(ws: Workspace, command: str, **kw: Any) -> dict[str, Any]:
    return asyncio.run(ws.shell(command, **kw))


@pytest.fixture
def small(tmp_path: Path) -> Workspace:
    """A workspace whose shell may hold 12 MiB and 300 files there, and 6 MiB and 300 files in /tmp + /dev/shm."""
    return Workspace(
        tmp_path / "ws",
        shell_timeout_s=10,
        output_cap=4000,
        limits=SandboxLimits(
            processes=24, file_bytes=4 * MiB, tmp_bytes=6 * MiB, workspace_bytes=12 * MiB, max_files=300
        ),
    )


@pytest.fixture
def planted() -> Iterator[list[Path]]:
    """Mode-0600 root files in folders the sandbox shows (/etc/ssl and /usr), removed afterwards."""
    folders = [
        Path("/etc/ssl") / f"promptlab-probe-{uuid.uuid4().hex[:8]}",
        Path("/usr/local/share") / f"promptlab-probe-{uuid.uuid4().hex[:8]}",
    ]
    files = []
    try:
        for folder in folders:
            folder.mkdir(mode=0o755, parents=True)
            f = folder / "root-only.key"
            f.write_text(f"ROOT-ONLY-{uuid.uuid4().hex}")
            f.chmod(0o600)
            files.append(f)
        yield files
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


# 7. unprivileged -------------------------------------------------------------------------------------------
@needs_bwrap
@as_root
def test_as_root_a_command_cannot_read_root_only_host_files(small: Workspace, planted: list[Path]) -> None:
    paths = " ".join(str(p) for p in planted)
    out = sh(small, f"id -u; id -g; ls -l {paths}; cat {paths}; head -c 20 {planted[0]}; cp {planted[1]} .")
    lines = out["stdout"].split()
    assert lines[:2] == ["65534", "65534"]  # nobody, nogroup
    assert all(p.name in out["stdout"] for p in planted)  # visible (the folders are shown) ...
    assert out["stderr"].count("Permission denied") >= 4  # ... but not readable
    for p in planted:
        assert p.read_text() not in out["stdout"]
    assert not (small.root / planted[1].name).exists()
    caps = sh(small, "grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status")["stdout"].split()
    assert caps == ["CapPrm:", "0" * 16, "CapEff:", "0" * 16, "CapAmb:", "0" * 16]  # no capability at all


@needs_bwrap
def test_the_workspace_stays_writable_and_round_trips(small: Workspace) -> None:
    small.write_file("notes/a.txt", "from the file tool")
    out = sh(
        small,
        "cat notes/a.txt && echo appended >> notes/a.txt && mkdir -p deep/er && echo x > deep/er/b "
        "&& ln -s notes/a.txt link && ln deep/er/b twin && chmod 4755 deep/er/b && echo done",
    )
    assert out["exit_code"] == 0 and out["stdout"] == "from the file tooldone\n"
    assert small.read_file("notes/a.txt")["content"] == "from the file toolappended\n"
    assert os.readlink(small.root / "link") == "notes/a.txt"  # a link stays a link (never followed)
    b = (small.root / "deep/er/b").stat()
    assert b.st_nlink == 2 and b.st_ino == (small.root / "twin").stat().st_ino  # hard links kept
    assert not b.st_mode & (stat.S_ISUID | stat.S_ISGID) and b.st_uid == os.geteuid()  # set-id bits cleared
    gone = sh(small, "rm -r notes link && ls")
    assert gone["stdout"].split() == ["deep", "twin"] and sorted(os.listdir(small.root)) == ["deep", "twin"]


@needs_bwrap
def test_work_done_before_the_time_limit_is_kept(small: Workspace) -> None:
    out = sh(small, "echo early > kept.txt; sleep 30", timeout_s=1)
    assert out["timed_out"] is True and "killed after the 1 s time limit" in out["stderr"]
    assert (small.root / "kept.txt").read_text() == "early\n"


# 8. /dev and the tmpfs -------------------------------------------------------------------------------------
@needs_bwrap
def test_dev_is_minimal_read_only_and_shm_is_capped(small: Workspace) -> None:
    out = sh(
        small,
        "ls /dev; touch /dev/planted; echo ok > /dev/null && echo null-ok; "
        "for i in 1 2 3; do head -c 3000000 /dev/zero > /dev/shm/f$i && echo shm$i; done; "
        "for i in 1 2 3; do head -c 3000000 /dev/zero > /tmp/t$i && echo tmp$i; done",
    )
    names = set(out["stdout"].split()) - {"null-ok", "shm1", "shm2", "shm3", "tmp1", "tmp2", "tmp3"}
    assert names <= {
        "core",
        "fd",
        "full",
        "null",
        "ptmx",
        "pts",
        "random",
        "shm",
        "stderr",
        "stdin",
        "stdout",
        "tty",
        "urandom",
        "zero",
    }
    assert "touch: cannot touch '/dev/planted': Read-only file system" in out["stderr"] and "null-ok" in out["stdout"]
    # /tmp and /dev/shm share one 6 MiB tmpfs: two 3 MB files fit, the rest does not
    written = [w for w in ("shm1", "shm2", "shm3", "tmp1", "tmp2", "tmp3") if w in out["stdout"].split()]
    assert len(written) <= 2 and "No space left on device" in out["stderr"]


@needs_bwrap
def test_tmp_holds_a_bounded_number_of_files(small: Workspace) -> None:
    out = sh(small, "i=0; while [ $i -lt 1000 ]; do printf '' > /tmp/f$i || break; i=$((i+1)); done; echo made=$i")
    made = int(out["stdout"].split("made=")[1])
    assert made < 300 and "No space left on device" in out["stderr"]


# 10. the workspace's caps ----------------------------------------------------------------------------------
@needs_bwrap
def test_a_command_cannot_write_past_the_workspace_byte_cap(small: Workspace) -> None:
    out = sh(small, "for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > big$i && echo wrote$i; done")
    assert "No space left on device" in out["stderr"] and "wrote5" not in out["stdout"]
    assert small.usage_bytes() <= 12 * MiB  # what came back to the host is within the cap


@needs_bwrap
def test_a_command_cannot_make_more_files_than_the_cap(small: Workspace) -> None:
    out = sh(small, "i=0; while [ $i -lt 5000 ]; do printf '' > f$i || break; i=$((i+1)); done; echo made=$i")
    assert int(out["stdout"].split("made=")[1]) < 300 and "No space left on device" in out["stderr"]
    assert len(os.listdir(small.root)) < 300


@needs_bwrap
def test_sparse_files_and_hard_links_cost_on_the_host_what_they_hold(small: Workspace) -> None:
    out = sh(
        small,
        "truncate -s 4000000 sparse && head -c 1000000 /dev/urandom > one && "
        "for i in $(seq 1 50); do ln one l$i; done && echo ok",
    )
    assert out["stdout"] == "ok\n"
    sparse = (small.root / "sparse").stat()
    assert sparse.st_size == 4_000_000 and sparse.st_blocks * 512 < 100_000  # still a hole on the host
    assert (small.root / "one").stat().st_nlink == 51  # one file's data, not 51 copies
    again = sh(small, "du -sk . | cut -f1")  # copied in as it was: the same small footprint in the sandbox
    assert int(again["stdout"]) < 2000


@needs_bwrap
def test_a_workspace_too_big_for_the_cap_is_refused_with_the_cap_named(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", limits=SandboxLimits(workspace_bytes=2 * MiB, max_files=100))
    (ws.root / "big.bin").write_bytes(os.urandom(3 * MiB))
    result = asyncio.run(build_tools(["shell"], ToolEnv(workspace=ws)).run("shell", "ls"))
    assert result.status == "error" and "SandboxLimits.workspace_bytes" in (result.error or "")
    assert (ws.root / "big.bin").stat().st_size == 3 * MiB  # nothing lost


@needs_bwrap
def test_special_files_are_not_kept_and_the_step_says_so(small: Workspace) -> None:
    out = sh(
        small, "mkfifo pipe && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && echo ok"
    )
    assert out["stdout"] == "ok\n" and "[not kept in the workspace" in out["stderr"]
    assert "1 fifo" in out["stderr"] and "1 socket" in out["stderr"] and os.listdir(small.root) == []


@needs_bwrap
@pytest.mark.slow
@as_root
@pytest.mark.skipif(staging_problem() is not None, reason=f"no staging here: {staging_problem()}")
def test_a_non_root_user_gets_the_staged_sandbox_too() -> None:
    """The same step run by promptlab as nobody (a user namespace makes the mounts): capped and working."""
    home = Path(tempfile.mkdtemp(prefix="promptlab-nobody-"))
    os.chown(home, 65534, 65534)
    try:
        _run_as_nobody(home)
    finally:
        shutil.rmtree(home)


def _run_as_nobody(home: Path) -> None:
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():  # this test's interpreter may sit in a folder nobody cannot enter (e.g. /root)
        pytest.skip(f"needs {system} for the unprivileged user")
    script = (
        "import asyncio, os\nfrom promptlab.tools.limits import SandboxLimits\n"
        "from promptlab.tools.sandbox import staging_problem\nfrom promptlab.tools.workspace import Workspace\n"
        f"ws = Workspace({str(home / 'ws')!r}, limits=SandboxLimits(workspace_bytes=4 * 2**20))\n"
        "print('staging', staging_problem())\n"
        "out = asyncio.run(ws.shell('id -u; for i in 1 2 3; do head -c 2000000 /dev/zero > f$i; done; ls'))\n"
        "print(out['stdout']); print(out['stderr'])\n"
    )
    path = os.pathsep.join([str(Path(__file__).resolve().parents[2]), sysconfig.get_paths()["purelib"]])
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(system), "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=home,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": path, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert done.returncode == 0, done.stderr
    assert "staging None" in done.stdout and done.stdout.split()[2] == "65534"
    assert "No space left on device" in done.stdout
    assert sum(f.stat().st_size for f in (home / "ws").iterdir()) <= 4 * 2**20
