"""What every notebook does first (`notebook_setup`): work from the project root, and show promptlab's own
errors as their message, without a traceback.

JupyterLab starts the kernel of `notebooks/x.ipynb` in `notebooks/`, the CLI and papermill start where they
are called. So that a notebook reads `experiments/tiny.yaml`, writes `results/...` and uses the call cache
`.promptlab/cache` of the project wherever it was started, it changes the kernel's working directory to the
project root: the working directory when it holds an `experiments/` folder, else its parent when it is a
`notebooks/` folder, else the working directory (nothing changes). Absolute paths are unaffected, and
`$PROMPTLAB_CACHE` / `$PROMPTLAB_CACHE_DIR` still choose the cache.

A notebook that reads a results directory (03-06) passes it as `results`: on a fresh clone, where nothing has
run yet, the setup cell stops there with one line saying what to run first (`NoResultsError`, `FIRST_STEPS`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError, PromptlabError
from .notes import install_notes

FIRST_STEPS = {
    "demo": "run notebook 02 (it says how long the demo takes on this machine before it starts) or `scripts/demo` first",
    "baselines": "run `promptlab sweep experiments/baselines.yaml` first",
    "people": "run `promptlab sweep experiments/people.yaml` first",
}
"""What makes a results directory, by its name (results/<name>); any other name gets `OTHER_FIRST_STEP`."""
OTHER_FIRST_STEP = "run notebook 02 (or `promptlab sweep EXPERIMENT --out DIR`) first"


class NoResultsError(ConfigError):
    """A notebook's results directory (its `results_dir`) holds no finished cell yet; the message says what to
    run first."""


def finished_cells(results_dir: Path) -> int:
    """How many cells of a results directory finished (status.json says "ok")."""
    from ..results.store import cell_status

    cells = results_dir / "cells"
    if not cells.is_dir():
        return 0
    return sum(1 for d in cells.iterdir() if (cell_status(results_dir, d.name) or {}).get("status") == "ok")


def require_results(results_dir: str | os.PathLike[str], root: Path | None = None) -> Path:
    """The results directory (relative to `root`), or NoResultsError saying, in one line, what to run first
    when it does not exist or holds no finished cell."""
    given = Path(results_dir)
    path = given if given.is_absolute() or root is None else root / given
    if finished_cells(path):
        return path
    step = FIRST_STEPS.get(path.name, OTHER_FIRST_STEP)
    raise NoResultsError(f"No results in {given} yet: {step}.")


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The project root seen from `start` (default: the working directory), by the rule in the module doc."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    if (here / "experiments").is_dir():
        return here
    if here.name == "notebooks":
        return here.parent
    return here


def short_errors(shell: Any) -> None:
    """Make an IPython shell show a PromptlabError as `ConfigError: <the whole message>`, and an interrupt as
    `KeyboardInterrupt` (what was interrupted has said what it kept), with no traceback frames (the message names the file, field, model or variable; `%tb` still prints the traceback). The cell
    still fails, so "Run All" and papermill stop there."""

    def show(
        self: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: int | None = None
    ) -> None:
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # what %tb shows
        if isinstance(value, PromptlabError) and getattr(self, "kernel", None) is not None:
            bring_into_view()  # a Jupyter kernel: the error's cell may sit off-screen
        # IPython's hook for showing a traceback (ipykernel sends it as the cell's error output)
        self._showtraceback(etype, value, self.InteractiveTB.get_exception_only(etype, value))

    shell.set_custom_exc((PromptlabError, KeyboardInterrupt), show)


INTO_VIEW = """<div class="promptlab-into-view" style="display:none"></div><script>
(() => {
  const cell = document.currentScript && document.currentScript.closest(".jp-Cell");
  if (cell) setTimeout(() => cell.scrollIntoView({block: "center"}), 300);
})();
</script>"""
"""An invisible output whose script scrolls its cell into view once rendered (JupyterLab runs the scripts of a
trusted HTML output, which an output made in the session is): after Run All the view rests on the last cell,
where a one-line error above it would sit unseen."""


def bring_into_view() -> None:
    """In a Jupyter frontend, scroll the executing cell into view (the error that stopped Run All: a fresh
    clone's "run scripts/demo first", 02's "confirm first")."""
    try:
        from IPython.display import HTML, display
    except ImportError:
        return
    display(HTML(INTO_VIEW))


def notebook_setup(
    start: str | os.PathLike[str] | None = None,
    *,
    tracebacks: bool = False,
    results: str | os.PathLike[str] | None = None,
) -> Path:
    """Change to the project root (`project_root`) and, inside IPython, show promptlab's warnings as notes
    (`install_notes`) and install `short_errors` unless `tracebacks`; returns the root. Given `results`, a results directory the notebook reads, raise
    NoResultsError (shown as one line) when it holds no finished cell yet (`require_results`)."""
    root = project_root(start)
    os.chdir(root)
    install_notebook_notes()
    if not tracebacks:
        install_short_errors()
    if results is not None:
        require_results(results, root)
    return root


def install_short_errors() -> None:
    """`short_errors` on the running IPython shell (nothing outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python (a script importing this): nothing to install
        return
    shell = get_ipython()
    if shell is not None:
        short_errors(shell)


def install_notebook_notes() -> None:
    """Inside IPython, show promptlab's own warnings as plain notes (`promptlab.ui.notes`), not red stderr."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is not None:
        install_notes()


__all__ = [
    "FIRST_STEPS",
    "INTO_VIEW",
    "bring_into_view",
    "NoResultsError",
    "finished_cells",
    "install_notebook_notes",
    "install_short_errors",
    "notebook_setup",
    "project_root",
    "require_results",
    "short_errors",
]
