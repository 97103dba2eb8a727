"""The portable build is portable: the CPU library ggml runs holds no AVX-512 instruction (no zmm register), so an
x86-64 machine with AVX2 and without AVX-512 runs the very instructions this one runs, and the reference replies
(tests/llm/reference) come out the same there. A native build on an AVX-512 machine holds thousands."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from promptlab.llm.local.fingerprint import llama_build

llama_cpp = pytest.importorskip("llama_cpp")
BUILD = llama_build()
pytestmark = [
    pytest.mark.skipif(BUILD["build"] != "portable", reason=f"llama_cpp here is a {BUILD['build']} build"),
    pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed"),
]


def cpu_libraries() -> list[Path]:
    found = sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*.so*"))
    return [p for p in found if not p.is_symlink()]


def test_the_portable_builds_cpu_kernels_use_no_avx512_instruction() -> None:
    libraries = cpu_libraries()
    assert libraries, "no libggml-cpu library beside llama_cpp"
    for lib in libraries:
        listing = subprocess.run(["objdump", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
        assert "%ymm" in listing  # it is the AVX2 build, not an SSE-only one
        zmm = [line for line in listing.splitlines() if "%zmm" in line]
        assert zmm == [], f"{lib.name} holds {len(zmm)} AVX-512 instructions, e.g. {zmm[0].strip()}"


def test_the_portable_builds_kernels_name_avx2_and_no_avx512() -> None:
    kernels = BUILD["system_info"]
    assert "AVX2 = 1" in kernels and "AVX512" not in kernels, kernels
