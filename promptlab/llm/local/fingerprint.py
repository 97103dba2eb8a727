"""Inference fingerprints: what a model's replies rest on, carried by every reply, cached with it, and recorded in
every run's provenance (`Run.provenance["fingerprints"]`).

A local model's fingerprint (`local_fingerprint`) names the weights (the GGUF file's sha256), the code that ran
them (llama-cpp-python's version, which pins the llama.cpp it vendors, and the build `scripts/setup` made:
portable or native, with its CMake flags), the kernels ggml actually uses (`llama_print_system_info`: AVX2,
AVX512, ...) and the buffer types llama.cpp puts the model's weights in (`weight_buffers`: a repacked or AMX
buffer brings its own matrix kernels; `CPU`, ggml's kernels for each tensor's type). A hosted model's (`hosted_fingerprint`) is what the provider
reports: the model id and its `system_fingerprint` where the reply carries one (OpenAI does; llama.cpp's
llama-server reports its build).

The fingerprint's `id` is a sha256 (12 hex) over the fields that decide a greedy reply (`IDENTITY`). The CPU's
name, the threads, the instances or sequence slots, the local path (`engine`: the pool or the batching engine)
and the extra buffer types setting are recorded to read (`CONTEXT`) and left out of the id: the same kernels on
another CPU, another thread count, either path, or the extra buffer types turned off where no tensor of the
model uses one, give the same replies (measured: docs/reproducibility.md), so two machines of one kind share
an id.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

from .cpu import CPUINFO, extra_bufts_safe

IDENTITY = (
    "kind",
    "model",
    "model_sha256",
    "llama_cpp_python",
    "build",
    "cmake_args",
    "system_info",
    "weight_buffers",
    "system_fingerprint",
)
"""The fields the fingerprint's id hashes (those a fingerprint has): what decides a greedy reply."""
CONTEXT = ("cpu", "threads", "instances", "n_seq", "engine", "extra_bufts")
"""Fields recorded to read, outside the id."""
BUILD_FILE = "promptlab-llama-build.json"
BUFFER_LINE = re.compile(r"load_tensors:\s+(\S+) model buffer size")
"""How llama.cpp's load log names each buffer type holding weights."""

"""What `scripts/setup` writes into the virtualenv: {variant, cmake_args, llama_cpp_python}."""


def fingerprint_id(fields: dict[str, Any]) -> str:
    """sha256 (12 hex) of a fingerprint's identity fields, as canonical JSON."""
    kept = {k: fields[k] for k in IDENTITY if k in fields}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:12]


def with_id(fields: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint with its `id` (first)."""
    return {"id": fingerprint_id(fields), **{k: v for k, v in fields.items() if k != "id"}}


@functools.cache
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of a file, hashed once per path, modification time and size in a process."""
    st = path.stat()
    return _sha256(str(path), st.st_mtime_ns, st.st_size)


@functools.cache
def cpu_name() -> str | None:
    """The CPU's model name (/proc/cpuinfo), or None where it cannot be read."""
    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware"):
            return value.strip()
    return None


SYSTEM_INFO = threading.Lock()
"""Held while llama.cpp's system info is read (the first calls of a process can ask for it from several threads)."""


@functools.cache
def llama_build() -> dict[str, Any]:
    """llama-cpp-python's version, the build `scripts/setup` recorded for it, and the kernels ggml uses.

    The build file describes the llama_cpp installed in this virtualenv; a llama_cpp found elsewhere (another
    PYTHONPATH) is an `unrecorded` build, told apart by its kernels."""
    import llama_cpp

    with SYSTEM_INFO:  # llama.cpp writes the text into one static string: two threads at once read garbage
        info = llama_cpp.llama_print_system_info()
        info = info.decode("utf-8", errors="replace") if isinstance(info, bytes) else str(info)
    out: dict[str, Any] = {
        "llama_cpp_python": str(getattr(llama_cpp, "__version__", "unknown")),
        "build": "unrecorded",
        "cmake_args": None,
        "system_info": info.strip(),
    }
    recorded = Path(sys.prefix) / BUILD_FILE
    if Path(llama_cpp.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()) and recorded.is_file():
        try:
            build = json.loads(recorded.read_text())
            out["build"], out["cmake_args"] = str(build["variant"]), str(build["cmake_args"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # an unreadable record: the build stays unrecorded
    return out


@functools.cache
def weight_buffers(path: Path, extra_bufts: bool) -> tuple[str, ...]:
    """The buffer types llama.cpp puts the weights of the model at `path` in, loaded with the extra buffer types
    on or off: what its load log names, from a load that reads and allocates nothing (`no_alloc`, no mmap).
    With the extra buffer types on, a tensor goes to a repack or AMX buffer only where that buffer has kernels
    for its type; SmolLM2-135M's Q4_1, Q8_0 and F32 tensors all stay in `CPU`. Empty when llama.cpp cannot
    read the file (the model's own load then says why)."""
    import llama_cpp
    from llama_cpp import _logger

    from .pool import LOAD_LOG

    lines: list[str] = []

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def collect(level: int, text: bytes, user_data: Any) -> None:
        lines.append(text.decode("utf-8", errors="replace"))

    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts, params.no_alloc, params.load_mode = extra_bufts, True, llama_cpp.LLAMA_LOAD_MODE_NONE
    with LOAD_LOG:
        llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
        try:
            model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), params)
            if model:
                llama_cpp.llama_model_free(model)
        finally:
            llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
    return tuple(sorted(set(BUFFER_LINE.findall("".join(lines)))))


def engine_settings() -> dict[str, Any]:
    """How local calls run now: the engine mode, threads, instances or sequence slots, extra buffer types."""
    from . import engine
    from . import pool as local

    mode = engine.mode()
    if mode == "batch":
        opts = engine.options(local.N_CTX)
        return {
            "engine": "batch",
            "threads": opts["threads"],
            "n_seq": opts["n_seq"],
            "extra_bufts": opts["extra_bufts"],
        }
    threads = int(os.environ.get("PROMPTLAB_LOCAL_THREADS") or os.cpu_count() or 2)
    return {"engine": "pool", "threads": threads, "instances": local.instances(), "extra_bufts": extra_bufts_safe()}


def local_fingerprint(path: Path) -> dict[str, Any]:
    """The fingerprint of a local GGUF model as this process runs it now (see the module docstring)."""
    settings = engine_settings()
    return _local(path, tuple(sorted(settings.items())))


@functools.cache
def _local(path: Path, settings: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    fields = {
        "kind": "local",
        "model": path.name,
        "model_sha256": file_sha256(path),
        **llama_build(),
        **dict(settings),
        "weight_buffers": list(weight_buffers(path, bool(dict(settings)["extra_bufts"]))),
        "cpu": cpu_name(),
    }
    return with_id(fields)


def hosted_fingerprint(reported_model: str | None, response: Any) -> dict[str, Any]:
    """A hosted model's fingerprint: the model id it reported and its `system_fingerprint` (None where the reply
    carries none)."""
    said = getattr(response, "system_fingerprint", None)
    if said is None and isinstance(response, dict):
        said = response.get("system_fingerprint")
    return with_id({"kind": "hosted", "model": reported_model, "system_fingerprint": str(said) if said else None})


def differing_fields(prints: list[dict[str, Any]]) -> list[str]:
    """The identity fields whose values differ between fingerprints (in `IDENTITY` order)."""
    return [k for k in IDENTITY if len({json.dumps(p.get(k), sort_keys=True) for p in prints}) > 1]


def describe(fields: dict[str, Any]) -> str:
    """One line saying what a fingerprint holds."""
    if fields.get("kind") == "hosted":
        said = fields.get("system_fingerprint") or "no system_fingerprint"
        return f"{fields.get('id')}: hosted {fields.get('model')} ({said})"
    sha = str(fields.get("model_sha256") or "")[:12]
    kernels = kernel_flags(str(fields.get("system_info") or ""))
    engine = fields.get("engine")
    how = f"{engine} (threads {fields.get('threads')}, " + (
        f"sequence slots {fields.get('n_seq')})" if engine == "batch" else f"instances {fields.get('instances')})"
    )
    return (
        f"{fields.get('id')}: {fields.get('model')} (sha256 {sha}), llama-cpp-python {fields.get('llama_cpp_python')} "
        f"{fields.get('build')} build, kernels {kernels or 'unknown'}, {how}, "
        f"weights in {' '.join(fields.get('weight_buffers') or []) or 'unrecorded buffers'} (extra buffer types "
        f"{'on' if fields.get('extra_bufts') else 'off'}), on {fields.get('cpu') or 'an unknown CPU'}"
    )


def kernel_flags(system_info: str) -> str:
    """The instruction sets ggml reports as used (`X = 1`) in `llama_print_system_info`'s text."""
    used = []
    for part in system_info.split("|"):
        name, _, value = part.partition("=")
        if value.strip() == "1":
            used.append(name.split(":")[-1].strip())
    return " ".join(used)


__all__ = [
    "BUILD_FILE",
    "CONTEXT",
    "IDENTITY",
    "cpu_name",
    "describe",
    "differing_fields",
    "engine_settings",
    "file_sha256",
    "fingerprint_id",
    "hosted_fingerprint",
    "kernel_flags",
    "llama_build",
    "local_fingerprint",
    "weight_buffers",
    "with_id",
]
