"""OPRO: large language models as optimizers (see `promptlab.loops.opro.loop`)."""

from __future__ import annotations

from .loop import OPTIMIZER_PROMPT, OPROConfig, arun_opro, meta_prompt, run_opro

__all__ = ["OPROConfig", "OPTIMIZER_PROMPT", "arun_opro", "meta_prompt", "run_opro"]
