"""What the CPU can run safely: llama.cpp's AMX kernels crash some Intel CPUs, so they are kept off there.

llama.cpp repacks weights into "extra buffer types" for the CPU's fastest kernels; on a CPU with AMX
(Sapphire Rapids class) that selects `ggml_backend_amx_mul_mat`, which segfaulted loading SmolLM2 on a
machine of this project's kind (llama.cpp issue #20824, closed without a fix; DSPy took the AMX backend out
of its CI for the same crash, stanfordnlp/dspy PR #10079). On a CPU whose flags name AMX, local models are
loaded with `use_extra_bufts` off: the plain CPU kernels, slower there but safe.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16", "amx_fp16", "amx_complex"})


def cpu_flags(text: str) -> set[str]:
    """The feature flags of a /proc/cpuinfo text (the union over its processors)."""
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


@cache
def has_amx() -> bool:
    """Whether this machine's CPU has AMX (False where /proc/cpuinfo cannot be read)."""
    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError:
        return False
    return bool(cpu_flags(text) & AMX_FLAGS)


def extra_bufts_safe() -> bool:
    """Whether llama.cpp may use its extra buffer types (weight repacking) here: not on an AMX CPU."""
    return not has_amx()
