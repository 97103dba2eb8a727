"""The notebooks' widgets: the `explorer` (01_explore) and the run `browser` (05_runs); `notebook` is what every
notebook does first (work from the project root)."""

from __future__ import annotations

from .browser import RunBrowser
from .explorer import Explorer
from .notebook import notebook_setup, project_root

__all__ = ["Explorer", "RunBrowser", "notebook_setup", "project_root"]
