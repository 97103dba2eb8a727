"""PCEE's settings."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from ...tools.builtin import check_tool_names
from ..runtime.config import LoopConfig

Piping = Literal["extract", "paste"]


class PCEEConfig(LoopConfig):
    """Settings of a PCEE run; `generator_model` plays the planner, controller and corrector, `critic_model`
    the evaluator."""

    ROLES: ClassVar[tuple[str, ...]] = ("planner", "controller", "corrector", "evaluator")
    CRITIC_ROLES: ClassVar[frozenset[str]] = frozenset({"evaluator"})

    max_iterations: int | None = Field(8, ge=1)  # type: ignore[assignment]
    """Most tool executions in the run: plan steps, retries and fix steps together (None: no cap, as the
    design document)."""
    retry_budget: int | None = Field(2, ge=0)
    """Corrections (fix plan + retry of the failed step) allowed per run (None: no budget, as the design
    document)."""
    tools: list[str] = Field(
        default_factory=lambda: ["write_file", "read_file", "list_files", "shell", "search", "calculator"]
    )
    """Tools the plan may use, by name (the design document's `tavily_search` and `workspace_shell` call
    `search` and `shell`)."""
    piping: Piping = "extract"
    """How the controller fills a `{step_N_output}` placeholder: 'extract' (the design document's: the
    controller model takes from step N's output the value this step needs, e.g. the version number) or
    'paste' (step N's whole output, no model call)."""
    result_chars: int | None = Field(None, ge=100)
    """Each tool input and result is cut to this many characters in the evaluator's, controller's and
    corrector's prompts (None: never cut, as the design document)."""
    correction_history: int | None = Field(None, ge=0)
    """Executions shown to the corrector, the most recent (None: the whole execution history, as the design
    document)."""
    shell_timeout_s: float = Field(10.0, gt=0)
    """Wall-clock limit of a shell command (the whole sandbox is killed past it)."""
    output_cap: int = Field(8192, ge=256)
    """Most bytes kept of a shell command's stdout and stderr (and characters of a file read)."""
    unsafe_shell: bool = False
    """Where bubblewrap is missing, run shell commands unsandboxed instead of refusing them (recorded in
    `Run.info["unsafe_shell"]`)."""
    workspace_base: str | None = None
    """Parent folder of run workspaces (None: .promptlab/workspaces); the run's is <base>/<run_id>-<n>."""
    docs_dir: str | None = None
    """Folder the search tool searches (None: the repository's data/docs)."""

    @property
    def execution_cap(self) -> float:
        """`max_iterations` as a number to compare with (infinite when None)."""
        return math.inf if self.max_iterations is None else self.max_iterations

    @property
    def correction_cap(self) -> float:
        """`retry_budget` as a number to compare with (infinite when None)."""
        return math.inf if self.retry_budget is None else self.retry_budget

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        return check_tool_names(v)


__all__ = ["PCEEConfig", "Piping"]
