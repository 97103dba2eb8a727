"""The workspace tools: write_file, read_file, list_files and shell, bound to one `Workspace`."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from .registry import Tool
from .workspace import Workspace


class WriteFileInput(BaseModel):
    """Input of write_file."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, validation_alias=AliasChoices("path", "file"))
    """File path relative to the workspace (the design document's `file` is accepted for it)."""
    content: str
    """Text to write (the file is replaced)."""


class PathInput(BaseModel):
    """Input of read_file."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1)
    """File path relative to the workspace."""


class ListInput(BaseModel):
    """Input of list_files."""

    model_config = ConfigDict(extra="forbid")

    path: str = "."
    """Folder relative to the workspace ('.' is the workspace itself)."""


class ShellInput(BaseModel):
    """Input of shell."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)
    """A /bin/sh command line, run in the workspace folder."""


def _shell_text(out: dict[str, Any]) -> str:
    """What a shell step hands on: its stdout (without the final newline), or a failure account."""
    if out["exit_code"] == 0:
        return str(out["stdout"]).rstrip("\n")
    state = "timed out" if out["timed_out"] else f"exit code {out['exit_code']}"
    return f"[{state}]\nstdout:\n{out['stdout']}\nstderr:\n{out['stderr']}"


def _shell_failure(out: dict[str, Any]) -> str | None:
    """A shell step's failure (a non-zero exit code, or killed at its time limit) as an error message."""
    return None if out["exit_code"] == 0 else _shell_text(out)


def workspace_tools(ws: Workspace) -> list[Tool]:
    """The four workspace tools bound to `ws` (file paths are confined to it)."""

    def write(args: dict[str, Any]) -> dict[str, Any]:
        return ws.write_file(args["path"], args["content"])

    def read(args: dict[str, Any]) -> dict[str, Any]:
        return ws.read_file(args["path"])

    def listing(args: dict[str, Any]) -> dict[str, Any]:
        return ws.list_files(args["path"])

    async def shell(args: dict[str, Any]) -> dict[str, Any]:
        return await ws.shell(args["command"])

    return [
        Tool(
            "write_file",
            "Write a text file in the workspace (replacing it); paths are relative to the workspace.",
            write,
            input_model=WriteFileInput,
            render=lambda o: f"wrote {o['bytes']} bytes to {o['path']}",
        ),
        Tool(
            "read_file",
            "Read a text file from the workspace.",
            read,
            input_model=PathInput,
            string_arg="path",
            render=lambda o: str(o["content"]),
        ),
        Tool(
            "list_files",
            "List the files under a workspace folder, recursively.",
            listing,
            input_model=ListInput,
            string_arg="path",
            render=lambda o: "\n".join(o["entries"]) or "(empty)",
        ),
        Tool(
            "shell",
            f"Run a shell command in the workspace folder (time limit {ws.shell_timeout_s:g} s, "
            f"output cut at {ws.output_cap} bytes); returns exit code, stdout, stderr.",
            shell,
            input_model=ShellInput,
            string_arg="command",
            render=_shell_text,
            failure=_shell_failure,
        ),
    ]
