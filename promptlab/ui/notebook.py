"""What every notebook does first (`notebook_setup`): work from the project root, and show promptlab's own
errors as their message, without a traceback.

JupyterLab starts the kernel of `notebooks/x.ipynb` in `notebooks/`, the CLI and papermill start where they
are called. So that a notebook reads `experiments/tiny.yaml`, writes `results/...` and uses the call cache
`.promptlab/cache` of the project wherever it was started, it changes the kernel's working directory to the
project root: the working directory when it holds an `experiments/` folder, else its parent when it is a
`notebooks/` folder, else the working directory (nothing changes). Absolute paths are unaffected, and
`$PROMPTLAB_CACHE` / `$PROMPTLAB_CACHE_DIR` still choose the cache.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..errors import PromptlabError


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The project root seen from `start` (default: the working directory), by the rule in the module doc."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    if (here / "experiments").is_dir():
        return here
    if here.name == "notebooks":
        return here.parent
    return here


def short_errors(shell: Any) -> None:
    """Make an IPython shell show a PromptlabError as `ConfigError: <the whole message>`, with no traceback
    frames (the message names the file, field, model or variable; `%tb` still prints the traceback). The cell
    still fails, so "Run All" and papermill stop there."""

    def show(
        self: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: int | None = None
    ) -> None:
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # what %tb shows
        # IPython's hook for showing a traceback (ipykernel sends it as the cell's error output)
        self._showtraceback(etype, value, self.InteractiveTB.get_exception_only(etype, value))

    shell.set_custom_exc((PromptlabError,), show)


def notebook_setup(start: str | os.PathLike[str] | None = None, *, tracebacks: bool = False) -> Path:
    """Change to the project root (`project_root`) and, inside IPython, install `short_errors` unless
    `tracebacks`; returns the root."""
    root = project_root(start)
    os.chdir(root)
    if tracebacks:
        return root
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python (a script importing this): nothing to install
        return root
    shell = get_ipython()
    if shell is not None:
        short_errors(shell)
    return root


def require_results(results_dir: str | os.PathLike[str], name: str = "results_dir") -> Path:
    """`results_dir` when it holds a sweep's results (a `cells/` folder); else ConfigError, one line saying to
    run scripts/demo first (what a notebook on a fresh clone, with no results yet, stops with)."""
    from ..errors import ConfigError

    path = Path(results_dir)
    if not (path / "cells").is_dir():
        raise ConfigError(f"{name}: no results in {path} yet: run scripts/demo first (or set {name})")
    return path


__all__ = ["notebook_setup", "project_root", "require_results", "short_errors"]
