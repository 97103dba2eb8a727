"""Experiment files for the sweep and CLI tests: a task file and an experiment YAML in a directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

POEM = {"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}
"""The one task most tests need."""


def topics(n: int, prompt: str = "Write about topic {i}.", goal: str = "Be concrete.") -> list[dict[str, Any]]:
    """`n` tasks t0..t{n-1}, their prompts told apart by the number."""
    return [{"id": f"t{i}", "prompt": prompt.format(i=i), "goal": goal} for i in range(n)]


def write_tasks(directory: Path, tasks: list[dict[str, Any]] | None = None) -> Path:
    """directory/tasks.jsonl holding `tasks` (default: POEM); returns its path."""
    path = directory / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in (tasks or [POEM])), encoding="utf-8")
    return path


def write_experiment(
    directory: Path, data: dict[str, Any], tasks: list[dict[str, Any]] | None = None, file: str = "exp.yaml"
) -> Path:
    """Write `tasks` (default: POEM) to directory/tasks.jsonl and the experiment `data` (its `tasks` field that
    file unless `data` names one) to directory/`file`; returns the experiment file's path."""
    import yaml

    write_tasks(directory, tasks)
    path = directory / file
    path.write_text(yaml.safe_dump({"tasks": "tasks.jsonl", **data}), encoding="utf-8")
    return path
