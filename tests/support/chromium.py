"""Debian's Chromium for the browser tests, launched by playwright (never `playwright install`: browser downloads
are blocked where CI runs). A test module sets `pytestmark = [..., NEEDS_CHROMIUM]` and calls `launch`."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEEDS_CHROMIUM = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's own sandbox will not start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # offline: no update checks, sync or component downloads to wait for
    "--disable-component-update",
    "--disable-sync",
]


def launch(playwright: Any, **options: Any) -> Any:
    """A headless Chromium from a `sync_playwright()` context, with the flags above."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, **options)
