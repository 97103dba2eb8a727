"""Tools for the agent loops (PES, PCEE): the `Tool` value and its registry (`registry`), the built-in tools by
name (`builtin`: `calculator`, `search_docs`, and the workspace tools of `files`), the per-run `workspace` and the
bubblewrap `sandbox` its shell runs in (its command line in `bwrap`, its `limits`, each step staged by `stager`)."""

from __future__ import annotations

from .builtin import (
    BUILTIN_TOOLS,
    WORKSPACE_TOOLS,
    ToolEnv,
    ToolFactory,
    build_tools,
    check_tool_names,
    needs_workspace,
    register_tool,
)
from .registry import Tool, ToolError, ToolRegistry, ToolResult
from .workspace import Workspace, WorkspaceError

__all__ = [
    "BUILTIN_TOOLS",
    "Tool",
    "ToolEnv",
    "ToolError",
    "ToolFactory",
    "ToolRegistry",
    "ToolResult",
    "WORKSPACE_TOOLS",
    "Workspace",
    "WorkspaceError",
    "build_tools",
    "check_tool_names",
    "needs_workspace",
    "register_tool",
]
