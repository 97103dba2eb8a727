"""APE: automatic prompt engineer (see `promptlab.loops.ape.loop`)."""

from __future__ import annotations

from .loop import PROPOSER_PROMPT, RESAMPLER_PROMPT, APEConfig, arun_ape, run_ape

__all__ = ["APEConfig", "PROPOSER_PROMPT", "RESAMPLER_PROMPT", "arun_ape", "run_ape"]
