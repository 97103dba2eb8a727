"""The run workspace: confined paths, files round trip, and a shell with a time limit and output cap.

The escape battery (what a command cannot reach) is in test_sandbox.py.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from overlap import eventually

from promptlab.tools.builtin import ToolEnv, build_tools
from promptlab.tools.sandbox import sandbox_problem
from promptlab.tools.workspace import Workspace, WorkspaceError

needs_bwrap = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"no sandbox here ({sandbox_problem()}): apt-get install bubblewrap"
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws", shell_timeout_s=5, output_cap=1000)


def test_write_read_list_round_trip(ws: Workspace) -> None:
    assert ws.write_file("notes/a.txt", "héllo\n") == {"path": "notes/a.txt", "bytes": 7}
    ws.write_file("b.py", "print(1)")
    ws.write_file("notes/../c.txt", "inside")  # `..` that stays inside is fine
    assert ws.read_file("notes/a.txt") == {"path": "notes/a.txt", "content": "héllo\n", "truncated": False}
    listing = ws.list_files()
    assert listing["entries"] == ["b.py", "c.txt", "notes/", "notes/a.txt"] and listing["path"] == "."
    assert ws.list_files("notes")["entries"] == ["notes/a.txt"]
    with pytest.raises(WorkspaceError, match="no such file"):
        ws.read_file("missing.txt")
    with pytest.raises(WorkspaceError, match="is a directory"):
        ws.read_file("notes")
    with pytest.raises(WorkspaceError, match="is a directory"):
        ws.write_file(".", "x")


def test_read_is_capped(ws: Workspace) -> None:
    ws.write_file("big.txt", "x" * 5000)
    out = ws.read_file("big.txt")
    assert out["truncated"] and out["content"].startswith("x" * 1000) and "first 1000 shown" in out["content"]


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "../../../../etc/passwd", "..", "/"])
def test_escapes_are_refused(ws: Workspace, path: str) -> None:
    with pytest.raises(WorkspaceError, match="refused path"):
        ws.resolve(path)
    with pytest.raises(WorkspaceError, match="refused path"):
        ws.write_file(path, "x")
    assert not (ws.root.parent / "x").exists()


def test_symlinks_are_never_followed(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, ws.root / "link")
    os.symlink(outside / "secret.txt", ws.root / "file_link")
    for path in ("link/secret.txt", "file_link", "link"):
        with pytest.raises(WorkspaceError, match="symbolic link that leaves the workspace"):
            ws.read_file(path)
    with pytest.raises(WorkspaceError, match="'link' is a symbolic link that leaves the workspace"):
        ws.write_file("link/new.txt", "x")
    with pytest.raises(WorkspaceError, match="'link' is a symbolic link that leaves the workspace"):
        ws.list_files("link")
    assert not (outside / "new.txt").exists() and (outside / "secret.txt").read_text() == "secret"
    assert "link -> " + str(outside) in ws.list_files()["entries"]  # listed, never followed
    ws.write_file("b.txt", "ok")
    os.symlink("b.txt", ws.root / "inner_link")  # a link that stays inside is refused too (O_NOFOLLOW)
    with pytest.raises(WorkspaceError, match="'inner_link' is a symbolic link \\(the file tools"):
        ws.read_file("inner_link")
    with pytest.raises(WorkspaceError, match="'inner_link' is a symbolic link"):
        ws.write_file("inner_link", "changed")
    assert (ws.root / "b.txt").read_text() == "ok"


def test_special_files_and_hard_links_are_refused(ws: Workspace, tmp_path: Path) -> None:
    os.mkfifo(ws.root / "fifo")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.read_file("fifo")  # and does not block on the fifo
    ws.write_file("a.txt", "one")
    os.link(ws.root / "a.txt", ws.root / "b.txt")  # even a hard link between two workspace files
    with pytest.raises(WorkspaceError, match="has 2 hard links"):
        ws.write_file("b.txt", "two")
    assert (ws.root / "a.txt").read_text() == "one"


def test_a_write_replaces_the_file_and_leaves_no_temporary(ws: Workspace) -> None:
    ws.write_file("d/a.txt", "first")
    inode = (ws.root / "d" / "a.txt").stat().st_ino
    ws.write_file("d/a.txt", "second")
    assert (ws.root / "d" / "a.txt").read_text() == "second" and os.listdir(ws.root / "d") == ["a.txt"]
    assert (ws.root / "d" / "a.txt").stat().st_ino != inode  # a new inode, never written through


@needs_bwrap
def test_a_symlink_made_by_a_shell_command_is_refused_too(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    out = asyncio.run(ws.shell(f"ln -s {tmp_path} up && ln -s {tmp_path}/outside.txt direct && echo done"))
    assert out["exit_code"] == 0 and out["stdout"] == "done\n"
    for path in ("up/outside.txt", "direct"):
        with pytest.raises(WorkspaceError, match="leaves the workspace"):
            ws.read_file(path)


@needs_bwrap
def test_workspace_tools_report_refusals_as_error_results(ws: Workspace) -> None:
    tools = build_tools(["write_file", "read_file", "list_files", "shell"], ToolEnv(workspace=ws))
    refused = asyncio.run(tools.run("write_file", {"path": "../escape.txt", "content": "x"}))
    assert refused.status == "error" and "refused path '../escape.txt'" in (refused.error or "")
    assert asyncio.run(tools.run("read_file", "/etc/passwd")).status == "error"
    wrote = asyncio.run(tools.run("write_file", {"path": "ok.txt", "content": "fine"}))
    assert wrote.ok and wrote.text == "wrote 4 bytes to ok.txt"
    assert asyncio.run(tools.run("read_file", "ok.txt")).text == "fine"
    assert asyncio.run(tools.run("list_files", {})).text == "ok.txt"
    shell = asyncio.run(tools.run("shell", "cat ok.txt"))
    assert shell.ok and shell.text == "fine" and shell.output["exit_code"] == 0


@needs_bwrap
def test_shell_runs_in_the_workspace_and_reports_exit_codes(ws: Workspace) -> None:
    out = asyncio.run(ws.shell("pwd; echo oops >&2; exit 3"))
    assert out["stdout"].strip() == str(ws.root)
    assert out["stderr"] == "oops\n" and out["exit_code"] == 3 and out["timed_out"] is False
    with pytest.raises(WorkspaceError, match="empty"):
        asyncio.run(ws.shell("  "))


@needs_bwrap
def test_a_hung_command_is_killed_at_the_time_limit(ws: Workspace) -> None:
    out = asyncio.run(ws.shell("echo started; sleep 60", timeout_s=1))
    assert out["timed_out"] is True and out["exit_code"] is None
    assert out["stdout"] == "started\n" and "killed after the 1 s time limit" in out["stderr"]


@needs_bwrap
def test_background_children_do_not_outlive_the_command(ws: Workspace) -> None:
    out = asyncio.run(ws.shell("sleep 30.25 & echo $!", timeout_s=5))
    assert not out["timed_out"] and out["exit_code"] == 0 and int(out["stdout"]) < 100  # a pid in the sandbox
    assert eventually(lambda: not any(b"sleep\x0030.25" in cmd for cmd in command_lines()))  # reaped in its own time


def command_lines() -> list[bytes]:
    """Every host process's command line (NUL-separated arguments)."""
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes())
        except OSError:
            continue
    return lines


@needs_bwrap
def test_output_is_capped_with_a_note(ws: Workspace) -> None:
    out = asyncio.run(ws.shell("head -c 50000 /dev/zero | tr '\\0' 'a'; echo err >&2"))
    assert out["exit_code"] == 0 and out["stdout"].startswith("a" * 1000)
    assert "[output truncated: 50000 bytes in total, first 1000 kept]" in out["stdout"]
    assert len(out["stdout"]) < 1100 and out["stderr"] == "err\n"


def test_claim_gives_each_run_a_new_folder_and_never_wipes_one(tmp_path: Path) -> None:
    first = Workspace.claim(tmp_path / "base", "pes-default")
    first.write_file("kept.txt", "mine")
    second = Workspace.claim(tmp_path / "base", "pes-default", shell_timeout_s=2)
    assert (first.root.name, second.root.name) == ("pes-default-1", "pes-default-2")
    assert first.read_file("kept.txt")["content"] == "mine" and second.list_files()["entries"] == []
    with pytest.raises(WorkspaceError, match="cannot name"):
        Workspace.claim(tmp_path, "../evil")


def test_for_run_gives_a_fresh_folder_under_the_base(tmp_path: Path) -> None:
    first = Workspace.for_run(tmp_path / "base", "run123")
    first.write_file("old.txt", "left over")
    again = Workspace.for_run(tmp_path / "base", "run123", shell_timeout_s=2)
    assert again.root == (tmp_path / "base" / "run123").resolve() and again.list_files()["entries"] == []
    assert again.shell_timeout_s == 2
    with pytest.raises(WorkspaceError, match="cannot name"):
        Workspace.for_run(tmp_path, "../evil")
    with pytest.raises(WorkspaceError, match="shell_timeout_s"):
        Workspace(tmp_path / "w", shell_timeout_s=0)
    with pytest.raises(WorkspaceError, match="max_file_bytes"):
        Workspace(tmp_path / "w", max_file_bytes=10, max_workspace_bytes=5)


def test_a_file_name_that_is_not_utf8_lists_as_text(ws: Workspace) -> None:
    """#28 item 8: a command that makes a file whose name is not UTF-8 must not fail the next list_files step."""
    ws.write_file("ok.txt", "x")
    (ws.root / os.fsdecode(b"bad\xff.txt")).write_text("y")
    os.symlink(os.fsdecode(b"to\xfe"), ws.root / "link")
    listed = ws.list_files()
    assert listed["entries"] == ["bad\\xff.txt", "link -> to\\xfe", "ok.txt"]
    "\n".join(listed["entries"]).encode("utf-8")  # storable: no lone surrogate left
