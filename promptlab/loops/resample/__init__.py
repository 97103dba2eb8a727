"""Resample: the no-feedback control (see `promptlab.loops.resample.loop`)."""

from __future__ import annotations

from .loop import PARAPHRASER_PROMPT, ResampleConfig, arun_resample, run_resample

__all__ = ["PARAPHRASER_PROMPT", "ResampleConfig", "arun_resample", "run_resample"]
