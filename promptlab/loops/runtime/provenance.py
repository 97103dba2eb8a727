"""What a run records about where it came from (`Run.provenance`): package versions, hashes of the task and the
prompts (`text_hash`), and entries added by an enclosing `provenance_scope` (the sweep's `experiment_hash`)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
from collections.abc import Iterator
from typing import Any

from ...llm.call.completion import Completion
from ...record import Task


def text_hash(text: str) -> str:
    """sha256 (16 hex) of a text: how templates, prompts and tasks are identified in provenance."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_PROVENANCE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "promptlab_provenance", default=None
)


@contextlib.contextmanager
def provenance_scope(entries: dict[str, Any]) -> Iterator[None]:
    """Every run started inside the block (any loop) adds `entries` to its `Run.provenance`; the sweep uses
    it for `experiment_hash`."""
    token = _PROVENANCE.set({**(_PROVENANCE.get() or {}), **entries})
    try:
        yield
    finally:
        _PROVENANCE.reset(token)


def scoped_provenance() -> dict[str, Any]:
    """The entries of the enclosing `provenance_scope` blocks ({} outside any)."""
    return dict(_PROVENANCE.get() or {})


@functools.cache  # reading the metadata takes ~2 ms, and every run records two versions
def package_version(distribution: str) -> str | None:
    """The installed version of a distribution (None when it is not installed), read once per process."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def base_provenance(task: Task) -> dict[str, Any]:
    """What a run records before any call: versions and a hash of the task (examples and split included)."""
    task_json = task.model_dump_json(exclude={"examples_source"})
    return {
        "promptlab_version": package_version("promptlab-loops"),
        "litellm_version": package_version("litellm"),
        "task_hash": text_hash(task_json),
        "prompt_hashes": {},
        "models": {},
    }


def note_model(provenance: dict[str, Any], role: str, model: str, c: Completion) -> None:
    """Record, once per role, the model requested, the id the provider reported, the endpoint and the inference
    fingerprint; and, per model requested, every distinct fingerprint the run's replies rest on
    (`provenance["fingerprints"]`: model -> fingerprint id -> its fields; `promptlab.llm.local.fingerprint`)."""
    roles = provenance.setdefault("models", {})
    fp = c.fingerprint
    if role not in roles:
        roles[role] = {"requested": model, "reported": c.response_model, "endpoint": c.endpoint}
        if fp is not None:
            roles[role]["fingerprint"] = fp.get("id")
    if fp is not None:
        provenance.setdefault("fingerprints", {}).setdefault(model, {}).setdefault(str(fp.get("id")), fp)


__all__ = ["base_provenance", "note_model", "package_version", "provenance_scope", "scoped_provenance", "text_hash"]
