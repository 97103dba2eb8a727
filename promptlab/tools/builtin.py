"""The built-in tools of the agent loops (PES, PCEE) by name, and `build_tools`, which makes a loop's registry
of them (the `Tool` value and `ToolRegistry` themselves are in `promptlab.tools.registry`).

Built-in tools (`BUILTIN_TOOLS`): `calculator`, `search_docs` (and its alias `search`) over a local
folder of documents, and the workspace tools `write_file`, `read_file`, `list_files`, `shell`, which
need a `Workspace` (the shell runs each command in a bubblewrap sandbox, see `promptlab.tools.sandbox`).
`build_tools(names, env)` makes a `ToolRegistry` of the named ones, where the design documents' tool names
(`DESIGN_TOOL_NAMES`: `tavily_search`, `workspace_shell`) call the local tools that stand in for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..registry import Registry
from .calculator import calculator_tool
from .files import workspace_tools
from .registry import Tool, ToolRegistry
from .search import search_docs_tool
from .workspace import Workspace


@dataclass(frozen=True)
class ToolEnv:
    """What built-in tools are made from: the documents folder and the run's workspace (if any)."""

    docs_dir: Path | None = None
    """Folder searched by search_docs (None: the repository's data/docs)."""
    workspace: Workspace | None = None
    """The run's workspace, needed by the workspace tools."""


ToolFactory = Callable[[ToolEnv], Tool]
"""Makes a tool for one run from its environment."""


def _workspace_tool(name: str) -> ToolFactory:
    def make(env: ToolEnv) -> Tool:
        if env.workspace is None:
            raise ConfigError(f"tool {name!r} needs a workspace, and this run has none")
        return next(t for t in workspace_tools(env.workspace) if t.name == name)

    return make


WORKSPACE_TOOLS = ("write_file", "read_file", "list_files", "shell")
"""Built-in tools that need a workspace."""

BUILTIN_TOOLS: Registry[ToolFactory] = Registry("tool", "promptlab.tools")
"""Tool factories by name: promptlab's own, those installed packages declare under the `promptlab.tools`
entry-point group (a factory `ToolEnv -> Tool`, or a module that registers some), and yours (`register_tool`)."""


DESIGN_TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "tavily_search": ("search", "search_docs"),
    "workspace_shell": ("shell",),
}
"""The design documents' tool names, each mapped to the local tools that stand in for it (the first one the run
has): PCEE's example plan calls `tavily_search` (a web search; promptlab searches local documents, there is no
web) and `workspace_shell`. `build_tools` makes each an alias, so a plan written with the design document's names runs."""


def register_tool(name: str, factory: ToolFactory) -> ToolFactory:
    """Register a tool factory under `name` (a later registration of the same name replaces it)."""
    return BUILTIN_TOOLS.register(name, factory)


register_tool("calculator", lambda env: calculator_tool())
register_tool("search_docs", lambda env: search_docs_tool(env.docs_dir))
register_tool("search", lambda env: search_docs_tool(env.docs_dir, name="search"))
for _name in WORKSPACE_TOOLS:
    register_tool(_name, _workspace_tool(_name))


def check_tool_names(names: Iterable[str]) -> list[str]:
    """The names, checked against the registered tools.

    Raises:
        ConfigError: an unknown name; the message lists the known ones.
    """
    names = list(names)
    unknown = [n for n in names if n not in BUILTIN_TOOLS]
    if unknown:
        raise ConfigError(f"unknown tool(s) {unknown}; known tools: {', '.join(sorted(BUILTIN_TOOLS))}")
    return names


def needs_workspace(names: Iterable[str]) -> bool:
    """Whether any of the named tools works in a workspace."""
    return any(n in WORKSPACE_TOOLS for n in names)


def build_tools(names: Iterable[str], env: ToolEnv | None = None, extra: Iterable[Tool] = ()) -> ToolRegistry:
    """A registry holding the named built-in tools (made for `env`) and any `extra` Tool objects."""
    env = env or ToolEnv()
    registry = ToolRegistry(BUILTIN_TOOLS[n](env) for n in check_tool_names(names))
    for tool in extra:
        registry.add(tool)
    for design_name, targets in DESIGN_TOOL_NAMES.items():
        target = next((t for t in targets if t in registry.names()), None)
        if target is not None and design_name not in registry:
            registry.alias(design_name, target)
    return registry


__all__ = [
    "ToolEnv",
    "ToolFactory",
    "BUILTIN_TOOLS",
    "DESIGN_TOOL_NAMES",
    "WORKSPACE_TOOLS",
    "register_tool",
    "check_tool_names",
    "needs_workspace",
    "build_tools",
]
