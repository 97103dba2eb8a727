"""The notebooks' widgets: the `explorer` (01_explore) and the run `browser` (05_runs)."""

from __future__ import annotations

from .browser import RunBrowser
from .explorer import Explorer

__all__ = ["Explorer", "RunBrowser"]
