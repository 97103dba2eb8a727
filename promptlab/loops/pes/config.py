"""PES's settings: the loop config, personas, and the state of a conversation thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...tools.builtin import check_tool_names
from ...tools.workspace import Workspace
from ..runtime.config import LoopConfig

PROVIDER_FIELDS = frozenset({"model", "generator_model", "critic_model", "role_models", "temperature", "max_tokens"})
"""Config fields a thread's `provider_config` may set."""


class PESConfig(LoopConfig):
    """Settings of a PES run."""

    ROLES: ClassVar[tuple[str, ...]] = ("planner", "synthesizer", "judge")
    CRITIC_ROLES: ClassVar[frozenset[str]] = frozenset({"judge"})

    max_iterations: int = Field(5, ge=1, le=100)
    """Most plan-and-execute iterations before synthesis."""
    tools: list[str] = Field(default_factory=lambda: ["calculator", "search_docs"])
    """Built-in tools enabled, by name."""
    history_limit: int = Field(10, ge=0)
    """Messages of thread history kept (and shown to the planner and synthesizer)."""
    delegate_timeout_s: float = Field(30.0, gt=0)
    """How long a round waits for its delegated tasks (the design's default: 30 s); the rest time out."""
    delegate_poll_s: float = Field(2.0, gt=0)
    """How often delegated tasks are polled while waiting (the design's default: 2 s)."""
    max_delegation_depth: int | None = Field(None, ge=0)
    """How deep delegations may nest: 0 none, 1 a delegated agent cannot delegate again, ... (None: no limit,
    as the design document; a delegation that times out cancels the delegations it started)."""
    result_chars: int | None = Field(None, ge=100)
    """Each tool result is cut to this many characters in the planner's and synthesizer's prompts (None: never
    cut, as the design document, which gives them the complete execution history)."""
    a2a_dir: str | None = None
    """Folder of the persisted delegated-task records, `<a2a_dir>/<run_id>.json` (None: .promptlab/a2a)."""
    judge: bool = False
    """Have the critic model grade the final answer 1-10 (into Run.final_scores)."""
    docs_dir: str | None = None
    """Folder searched by search_docs (None: the repository's data/docs)."""
    workspace_base: str | None = None
    """Parent folder of thread workspaces, made when a workspace tool is enabled (None: .promptlab/workspaces)."""
    shell_timeout_s: float = Field(10.0, gt=0)
    """Time limit of a shell tool command."""
    output_cap: int = Field(8192, ge=256)
    """Most bytes kept of a shell command's stdout and stderr (and characters of a file read)."""
    unsafe_shell: bool = False
    """Where bubblewrap is missing, run shell commands unsandboxed instead of refusing them (recorded in
    `Run.info["unsafe_shell"]`)."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        return check_tool_names(v)


class Persona(BaseModel):
    """An agent's identity and system prompts; a None prompt falls through to the next level."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    """Display name."""
    planning: str | None = None
    """System prompt of planning calls."""
    synthesis: str | None = None
    """System prompt of synthesis calls."""


@dataclass
class ThreadState:
    """A conversation thread: its settings (persona, history limit, enabled tools, provider config), its
    history, title and turn count, and its workspace."""

    persona: Persona | None = None
    history_limit: int | None = None
    enabled_tools: list[str] | None = None
    provider_config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, str]] = field(default_factory=list)
    title: str | None = None
    turns: int = 0
    workspace: Workspace | None = None


def with_provider(cfg: PESConfig, provider: dict[str, Any]) -> PESConfig:
    """The config with a thread's provider fields set (validated), the thread winning over the instance as in
    the design document's call -> thread -> instance hierarchy: a thread's `model` replaces every model the
    instance set (`generator_model`, `critic_model`, `role_models`), its `generator_model` or `critic_model`
    the instance's `role_models` entries of those roles, and its `role_models` entries the instance's."""
    if not provider:
        return cfg
    fields = cfg.model_dump()
    if "model" in provider:
        fields.update(generator_model=None, critic_model=None, role_models={})
    dropped = {r for r in cfg.ROLES if r not in cfg.CRITIC_ROLES} if "generator_model" in provider else set()
    dropped |= set(cfg.CRITIC_ROLES) if "critic_model" in provider else set()
    roles = {r: m for r, m in fields["role_models"].items() if r not in dropped}
    fields["role_models"] = {**roles, **provider.get("role_models", {})}
    return PESConfig.model_validate({**fields, **{k: v for k, v in provider.items() if k != "role_models"}})


__all__ = ["PROVIDER_FIELDS", "PESConfig", "Persona", "ThreadState", "with_provider"]
