"""Fixtures of the sweep tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def toy_dir() -> Path:
    """The directory holding toyloop.py (the "toy" loop), imported here so the loop is registered; papermill
    kernels and Dask workers get the directory on PYTHONPATH."""
    import toyloop

    return Path(toyloop.__file__).parent
