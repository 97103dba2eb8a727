"""The time a sweep on the embedded model should take before anything is timed here: the demo's sweep as measured on
a named kind of machine, scaled by a sweep's reply caps (`promptlab.sweeps.estimate` says it as such).

Notebook 02 times the model by a short probe only once the user confirms the sweep (a probe makes model calls), so
on a fresh clone, where no cell has finished yet, this is the only figure it can give before it asks. It is labelled
with the machine it was measured on, and says whether this machine is of that kind.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReferenceTime:
    """A sweep's wall time as measured on a named machine, and the reply caps of the calls it made."""

    model: str
    """The model the sweep's calls went to."""
    experiment: str
    """The experiment file measured (relative to the project root)."""
    token_cap: int
    """Its made calls' reply caps added up, as the dry run counts them (`callcount.CallCount.token_cap`)."""
    quiet_s: float
    """Its sweep's wall time on quiet cores."""
    loaded_s: float
    """Its sweep's wall time on cores shared with other work."""
    arch: str
    cores: int
    avx2: bool
    """The machine's kind: architecture, cores, AVX2."""
    source: str
    """Where the measurement is written down."""

    @property
    def machine(self) -> str:
        """The machine's kind in words."""
        return machine_words(self.arch, self.cores, self.avx2)


DEMO = ReferenceTime(
    model="local/smollm2",
    experiment="experiments/demo.yaml",
    token_cap=144_600,
    quiet_s=21 * 60,
    loaded_s=38 * 60,
    arch="x86_64",
    cores=2,
    avx2=True,
    source="the README's demo timings: 21 min on quiet cores, 38 min (load 5-8) at this version",
)
"""The demo sweep from a fresh clone (README, "Time"), on the portable llama.cpp build."""
REFERENCES = {DEMO.model: DEMO}
"""Reference times by model."""


def machine_words(arch: str, cores: int, avx2: bool) -> str:
    """ "x86_64, 2 cores, AVX2"."""
    return f"{arch}, {cores} core{'s' if cores != 1 else ''}{', AVX2' if avx2 else ', no AVX2'}"


def this_machine() -> tuple[str, int, bool]:
    """This machine's kind: (architecture, cores, AVX2)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return platform.machine(), os.cpu_count() or 1, " avx2" in f" {text} ".replace("\n", " ")


__all__ = ["DEMO", "REFERENCES", "ReferenceTime", "machine_words", "this_machine"]
