"""The exports' optional dependencies: each target's library is imported only when it is used, and a missing one
says which `pip install` brings it (the extras `promptlab-loops[mlflow]` and `promptlab-loops[inspect]`)."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ..errors import MissingDependencyError

EXTRAS = {"mlflow": "mlflow", "inspect_ai": "inspect"}
"""Module -> the promptlab extra that installs it."""


def need(module: str, purpose: str) -> ModuleType:
    """Import `module`, or raise MissingDependencyError naming `pip install 'promptlab-loops[<its extra>]'`."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(module, f"'promptlab-loops[{EXTRAS[module]}]'", purpose) from e


def check_installed(module: str, purpose: str) -> None:
    """Raise MissingDependencyError (naming the extra) when `module` is not installed, without importing it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingDependencyError(module, f"'promptlab-loops[{EXTRAS[module]}]'", purpose)


__all__ = ["EXTRAS", "check_installed", "need"]
