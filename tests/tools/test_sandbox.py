"""The sandbox escape battery: each attempt a model could write must fail, asserted on the host side.

Tests that run commands need bubblewrap and skip without it (CI installs it in `.ci/run`).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import escape_battery
import pytest
from overlap import eventually

import promptlab as pl
from promptlab.loops.pcee.config import PCEEConfig
from promptlab.loops.pcee.loop import run_pcee
from promptlab.sanitize import is_secret_name, redact
from promptlab.tools import sandbox
from promptlab.tools.builtin import ToolEnv, build_tools
from promptlab.tools.limits import SandboxLimits, process_cap_available
from promptlab.tools.sandbox import SandboxUnavailable, sandbox_problem
from promptlab.tools.workspace import Workspace, WorkspaceError

needs_bwrap = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"no sandbox here ({sandbox_problem()}): apt-get install bubblewrap"
)
SECRET = "sk-test-" + "q7Zp3xV9" * 4


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(
        tmp_path / "ws", shell_timeout_s=8, output_cap=4000, limits=SandboxLimits(processes=24, file_bytes=8 * 2**20)
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host file next to the workspace that no command may read or change."""
    f = tmp_path / "outside.txt"
    f.write_text("host secret")
    return f


def sh(ws: Workspace, command: str, **kw: Any) -> dict[str, Any]:
    return asyncio.run(ws.shell(command, **kw))


def host_processes_with(marker: str) -> list[str]:
    """Command lines of host processes whose arguments contain `marker` (zombies excluded)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(cmd)
    return found


# `..` and absolute paths ---------------------------------------------------------------------------
@needs_bwrap
def test_parent_and_absolute_paths_do_not_reach_the_host(ws: Workspace, outside: Path, tmp_path: Path) -> None:
    for path in ("../outside.txt", str(outside), "a/../../outside.txt"):
        with pytest.raises(WorkspaceError, match="refused path"):
            ws.read_file(path)
        with pytest.raises(WorkspaceError, match="refused path"):
            ws.write_file(path, "x")
    out = sh(ws, f"cat ../outside.txt; cat {outside}; ls {tmp_path}; echo x > ../made.txt; echo x > {tmp_path}/abs.txt")
    assert "host secret" not in out["stdout"] and out["stderr"].count("No such file or directory") == 2
    assert out["stdout"].split() == ["ws"]  # the folders leading to the workspace exist, empty
    # the two writes land in the sandbox's private /tmp (tmp_path is under /tmp), never on the host:
    assert outside.read_text() == "host secret" and sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt", "ws"]


# symlinks and hard links ---------------------------------------------------------------------------
@needs_bwrap
def test_symlinks_made_by_the_shell_lead_nowhere(ws: Workspace, outside: Path, tmp_path: Path) -> None:
    out = sh(ws, f"ln -s {tmp_path} up && ln -s {outside} direct && cat direct; cat up/outside.txt; echo x > direct")
    assert "host secret" not in out["stdout"] and "No such file" in out["stderr"]  # the target is not in the sandbox
    for path in ("direct", "up/outside.txt", "up/new.txt"):
        with pytest.raises(WorkspaceError, match="symbolic link that leaves the workspace"):
            ws.write_file(path, "overwritten")
        with pytest.raises(WorkspaceError, match="symbolic link"):
            ws.read_file(path)
    assert outside.read_text() == "host secret" and not (tmp_path / "new.txt").exists()
    os.symlink("inner.txt", ws.root / "inner_link")  # even a link that stays inside is not followed
    ws.write_file("inner.txt", "ok")
    with pytest.raises(WorkspaceError, match="'inner_link' is a symbolic link \\(the file tools never follow"):
        ws.read_file("inner_link")


@needs_bwrap
def test_hard_links_cannot_be_made_to_host_files_nor_written_through(ws: Workspace, outside: Path) -> None:
    out = sh(ws, f"ln {outside} hl1; ln /etc/ld.so.cache hl2; ln /usr/bin/env hl3")
    assert out["exit_code"] != 0 and not any((ws.root / f"hl{i}").exists() for i in (1, 2, 3))
    assert "failed to access" in out["stderr"] and out["stderr"].count("Invalid cross-device link") == 2
    ws.write_file("inside.txt", "mine")
    made = sh(ws, "ln inside.txt twin && echo linked")  # a hard link the shell can make: inside the workspace
    assert made["stdout"] == "linked\n"
    with pytest.raises(WorkspaceError, match="'twin': the file has 2 hard links"):
        ws.write_file("twin", "changed")
    assert (ws.root / "inside.txt").read_text() == "mine"
    os.link(outside, ws.root / "hl")  # as if one to a host file existed anyway (e.g. made by an unsandboxed shell)
    with pytest.raises(WorkspaceError, match="'hl': the file has 2 hard links"):
        ws.write_file("hl", "overwritten")
    with pytest.raises(WorkspaceError, match="2 hard links"):
        ws.read_file("hl")
    assert outside.read_text() == "host secret"


# what the sandbox can see ----------------------------------------------------------------------------
@needs_bwrap
def test_etc_passwd_is_synthetic_and_host_data_is_absent(ws: Workspace) -> None:
    out = sh(ws, "cat /etc/passwd; echo ---; cat /etc/shadow; ls /; ls /root /home /work /var /opt /run 2>&1 | wc -l")
    passwd = out["stdout"].split("---")[0]
    names = {line.split(":")[0] for line in passwd.splitlines()}
    assert names <= {"root", "nobody", "sandbox"} and "root" in names
    host_names = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines() if line}
    assert not (host_names - {"root", "nobody"}) & names
    assert "cat: /etc/shadow: No such file or directory" in out["stderr"]
    top = set(out["stdout"].split("---")[1].split()[:-1])
    assert top <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "proc", "dev", "tmp"} | set(
        ws.root.parts[1:2]
    )
    assert {"root", "home", "work", "var", "opt", "run"}.isdisjoint(top)


@needs_bwrap
def test_writes_outside_the_workspace_fail_and_tmp_is_private(ws: Workspace) -> None:
    marker = f"probe-{uuid.uuid4().hex}"
    out = sh(
        ws,
        f"touch /usr/{marker}; touch /etc/{marker}; touch /{marker}; echo hi > /tmp/{marker} && "
        f"cat /tmp/{marker}; echo in > {marker}",
    )
    assert out["stderr"].count("Read-only file system") == 3
    assert "hi" in out["stdout"] and (ws.root / marker).read_text() == "in\n"
    assert not any(Path(d, marker).exists() for d in ("/usr", "/etc", "/", "/tmp"))


# network -------------------------------------------------------------------------------------------
@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[Any]]]:
    with escape_battery.listener() as served:
        yield served


@needs_bwrap
def test_no_network_not_even_the_hosts_loopback(ws: Workspace, loopback_server: tuple[int, list[Any]]) -> None:
    port, accepted = loopback_server
    with socket.create_connection(("127.0.0.1", port), timeout=2):  # the server works from the host
        pass
    assert eventually(lambda: len(accepted) == 1)
    probe = (
        "import socket\nfor host in ('127.0.0.1', '1.1.1.1'):\n    try:\n"
        f"        socket.create_connection((host, {port}), timeout=2); print('CONNECTED', host)\n"
        "    except OSError as e:\n        print('refused', host, type(e).__name__)\n"
    )
    ws.write_file("probe.py", probe)
    out = sh(ws, "python3 probe.py; ls /sys/class/net 2>/dev/null; cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    assert "CONNECTED" not in out["stdout"] and "refused 127.0.0.1" in out["stdout"]
    assert "refused 1.1.1.1" in out["stdout"]
    assert out["stdout"].split()[-1] == "lo"  # the only interface is the sandbox's own loopback
    time.sleep(0.3)
    assert len(accepted) == 1


# secrets --------------------------------------------------------------------------------------------
@needs_bwrap
def test_secret_environment_variables_are_not_in_the_sandbox(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET + "2")
    out = sh(ws, "env; cat /proc/*/environ | tr '\\0' '\\n'")
    names = {line.split("=", 1)[0] for line in out["stdout"].splitlines() if "=" in line}
    assert names <= {"PATH", "LANG", "HOME", "PWD", "SHLVL", "_", "OLDPWD"}
    assert SECRET not in out["stdout"] and "OPENAI" not in out["stdout"] and f"HOME={ws.root}" in out["stdout"]


def test_secret_values_are_redacted_from_tool_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("DB_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to redact safely
    ws = Workspace(tmp_path / "ws")
    ws.write_file("leak.txt", f"key={SECRET} pw=hunter2hunter2 short=abc")
    tools = build_tools(["read_file", "write_file"], ToolEnv(workspace=ws))
    read = asyncio.run(tools.run("read_file", "leak.txt"))
    assert read.text == "key=[REDACTED:OPENAI_API_KEY] pw=[REDACTED:DB_PASSWORD] short=abc"
    assert SECRET not in json.dumps(read.model_dump()) and "hunter2" not in read.model_dump_json()
    err = asyncio.run(tools.run("read_file", f"../{SECRET}"))
    assert err.status == "error" and SECRET not in (err.error or "") and SECRET not in json.dumps(err.input)
    assert redact({"a": [SECRET, 3]}, {"GITHUB_TOKEN": SECRET}) == {"a": ["[REDACTED:GITHUB_TOKEN]", 3]}
    assert redact("x", {"PATH": "/usr/bin:/bin"}) == "x" and not is_secret_name("PATH")


# processes ------------------------------------------------------------------------------------------
@needs_bwrap
def test_a_setsid_survivor_is_gone_after_the_step(ws: Workspace) -> None:
    marker = f"{37 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"
    out = sh(ws, f"setsid sleep {marker} > /dev/null 2>&1 & nohup sleep {marker} > /dev/null 2>&1 & echo started")
    assert out["exit_code"] == 0 and out["stdout"] == "started\n" and not out["timed_out"]
    assert eventually(lambda: host_processes_with(f"sleep {marker}") == [])  # reaped in its own time


@needs_bwrap
def test_the_wall_clock_limit_kills_the_whole_sandbox(ws: Workspace) -> None:
    marker = f"{41 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"
    out = sh(ws, f"setsid sleep {marker} & echo started; sleep {marker}", timeout_s=1)
    assert out["timed_out"] is True and out["exit_code"] is None
    assert "killed after the 1 s time limit" in out["stderr"] and out["stdout"] == "started\n"
    assert eventually(lambda: host_processes_with(f"sleep {marker}") == [])  # reaped in its own time


@needs_bwrap
@pytest.mark.skipif(
    not process_cap_available(),
    reason="running as root without a writable pids cgroup: the kernel does not apply RLIMIT_NPROC to root",
)
def test_a_bounded_fork_loop_hits_the_process_limit(ws: Workspace) -> None:
    marker = f"{43 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"
    out = sh(ws, f"for i in $(seq 1 200); do sleep {marker} & done; echo all-started")  # limits.processes == 24
    assert "all-started" not in out["stdout"] and out["exit_code"] != 0
    assert "Cannot fork" in out["stderr"] or "Resource temporarily unavailable" in out["stderr"]
    assert not out["timed_out"]
    assert eventually(lambda: host_processes_with(f"sleep {marker}") == [])  # reaped in its own time


# sizes ----------------------------------------------------------------------------------------------
@needs_bwrap
def test_a_30_mb_write_is_refused(ws: Workspace) -> None:
    out = sh(ws, "head -c 30000000 /dev/zero > big; echo status=$?; head -c 30000000 /dev/zero > /tmp/big")
    assert out["exit_code"] != 0 and "status=0" not in out["stdout"]
    assert (ws.root / "big").stat().st_size <= 8 * 2**20  # the file-size rlimit (SandboxLimits.file_bytes)
    with pytest.raises(WorkspaceError, match="over the 4194304-byte file cap"):
        ws.write_file("big2.txt", "x" * 30_000_000)
    small = Workspace(ws.root.parent / "small", max_file_bytes=1000, max_workspace_bytes=2500)
    small.write_file("a", "x" * 1000)
    small.write_file("b", "x" * 1000)
    with pytest.raises(WorkspaceError, match="would hold 3000 bytes, over its 2500-byte cap"):
        small.write_file("c", "x" * 1000)
    small.write_file("b", "y" * 500)  # replacing counts the new size only
    assert small.usage_bytes() == 1500


# the whole battery, as benchmarks/reliability.py runs it -----------------------------------------------
@needs_bwrap
def test_the_escape_battery_finds_no_escape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = [SECRET, SECRET[::-1]]
    monkeypatch.setenv("OPENAI_API_KEY", secrets[0])
    monkeypatch.setenv("MY_SERVICE_TOKEN", secrets[1])
    outcomes = escape_battery.run_battery(tmp_path, secrets)
    counted = [o.kind for o in outcomes if o.counted]
    expected = [k for k in escape_battery.KINDS if os.geteuid() == 0 or k != "root-only file"]  # root plants them
    assert counted == expected
    escaped = [o for o in outcomes if o.counted and o.escaped]
    if not process_cap_available():  # root without a pids cgroup: the kernel does not bound the fork loop
        escaped = [o for o in escaped if o.kind != "fork loop"]
    assert escaped == []
    assert all(not o.escaped for o in outcomes)


# no bubblewrap --------------------------------------------------------------------------------------
@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    sandbox.sandbox_problem.cache_clear()
    yield
    monkeypatch.undo()
    sandbox.sandbox_problem.cache_clear()


def test_without_bubblewrap_the_shell_is_refused_with_how_to_install(tmp_path: Path, no_bwrap: None) -> None:
    ws = Workspace(tmp_path / "ws")
    assert ws.shell_mode == "refused"
    with pytest.raises(SandboxUnavailable, match="bubblewrap \\(bwrap\\) is not installed.*apt-get install bubblewrap"):
        sh(ws, "echo hi")
    result = asyncio.run(build_tools(["shell"], ToolEnv(workspace=ws)).run("shell", "echo hi"))
    assert result.status == "error" and "apt-get install bubblewrap" in (result.error or "")
    assert "unsafe_shell=True" in (result.error or "")


def test_the_unsafe_opt_in_runs_unsandboxed_with_a_cleared_environment(
    tmp_path: Path, no_bwrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ws = Workspace(tmp_path / "ws", unsafe_shell=True)
    assert ws.shell_mode == "unsafe"
    out = sh(ws, "env; echo $HOME")
    assert out["exit_code"] == 0 and SECRET not in out["stdout"] and str(ws.root) in out["stdout"]


def test_pcee_records_the_unsafe_opt_in(tmp_path: Path, no_bwrap: None) -> None:
    step = {"step_id": 1, "instruction": "say hi", "tool_name": "shell", "tool_input": "echo hi"}
    planner = pl.scripted("sbx-unsafe-planner", [json.dumps({"plan": [step]})] * 2)
    judge = pl.scripted(
        "sbx-unsafe-eval",
        respond=lambda m: json.dumps(  # the evaluator sees a tool's error
            {"verdict": "failure" if "the tool failed" in m[-1]["content"] else "success", "reason": "ok"}
        ),
    )
    base = dict(
        model=planner.name, role_models={"evaluator": judge.name}, workspace_base=str(tmp_path / "w"), retry_budget=0
    )
    refused = run_pcee("Say hi", PCEEConfig(**base), cache=False)
    assert refused.stop_reason == "failed_step" and refused.info["shell_sandbox"] == "refused"
    assert (
        refused.info["unsafe_shell"] is False and "apt-get install bubblewrap" in refused.info["failed_step"]["reason"]
    )
    unsafe = run_pcee("Say hi", PCEEConfig(**base, unsafe_shell=True), cache=False)
    assert unsafe.stop_reason == "plan_complete" and unsafe.final_output == "hi"
    assert unsafe.info["unsafe_shell"] is True and unsafe.info["shell_sandbox"] == "unsafe"
    assert unsafe.config["unsafe_shell"] is True and refused.config["unsafe_shell"] is False


@needs_bwrap
def test_a_pcee_env_step_leaks_no_key_into_the_run_or_the_evaluator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET[::-1])
    seen: list[str] = []

    def judge(messages: list[dict[str, Any]]) -> str:
        seen.append(json.dumps(messages))
        return json.dumps({"verdict": "success", "reason": "ok"})

    step = {"step_id": 1, "instruction": "show the environment", "tool_name": "shell", "tool_input": "env"}
    planner = pl.scripted("sbx-env-planner", [json.dumps({"plan": [step]})])
    evaluator = pl.scripted("sbx-env-eval", respond=judge)
    run = run_pcee(
        "Show the environment",
        PCEEConfig(model=planner.name, role_models={"evaluator": evaluator.name}, workspace_base=str(tmp_path / "w")),
        cache=False,
    )
    assert run.stop_reason == "plan_complete" and run.info["shell_sandbox"] == "bubblewrap"
    assert "PATH=" in (run.final_output or "") and seen
    record = run.model_dump_json()
    for value in (SECRET, SECRET[::-1]):
        assert value not in record and not any(value in s for s in seen)
    assert "ANTHROPIC_API_KEY" not in record and "OPENAI_API_KEY" not in record


@needs_bwrap
def test_python_runs_python3_in_the_sandbox(ws: Workspace) -> None:
    """The seed's plans run `python script.py`; only python3 exists here, so the sandbox links `python` to it
    (issue #29 item 12)."""
    out = sh(ws, "python -c 'print(6*7)'")
    assert out["exit_code"] == 0 and out["stdout"] == "42\n", out


@needs_bwrap
def test_a_command_that_exits_non_zero_is_a_failed_shell_result(ws: Workspace) -> None:
    """A command not found exits 127: the shell tool's result is an error (with the exit code, stdout and
    stderr kept), so the evaluator reads a failure, never 'success' (issue #29 item 12)."""
    tools = build_tools(["shell"], ToolEnv(workspace=ws))
    missing = asyncio.run(tools.run("shell", "no_such_command_xyz"))
    assert missing.status == "error" and "exit code 127" in (missing.error or "")
    assert missing.output["exit_code"] == 127 and "not found" in missing.output["stderr"]
    ok = asyncio.run(tools.run("shell", "echo hi"))
    assert ok.status == "success" and ok.text == "hi"
