"""Replay only: a re-run that answers every hosted call from the cache and sends no request (env PROMPTLAB_REPLAY).

A colleague handed a sweep's results and cache re-runs it with PROMPTLAB_REPLAY=1 and no API key: the preflight
asks no key of a hosted model (`promptlab.llm.call.preflight`), every call found in the cache replays, and a call that
is not there fails before any request is made (an infrastructure failure naming the model and this variable), so
a replay can neither spend nor reach a provider (docs/reproducibility.md). promptlab's in-process models (local and
scripted) still run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ...errors import ConfigError, ProviderError

if TYPE_CHECKING:
    from .request import Request

REPLAY_ENV = "PROMPTLAB_REPLAY"
NOT_CACHED = f"not in the cache, and {REPLAY_ENV} is set: no request is sent (replay only)"
"""Why a hosted call fails in replay-only mode."""


class NotCached(ProviderError):
    """A hosted call that replay-only mode cannot answer: it is not in the cache, and no request is sent. Raised as
    it is (never retried, never wrapped, never asking for a key the call does not need), so the message starts
    with the missing call: '<model>: this call (key 1a2b3c4d5e6f...) is not in the cache, ...'."""

    def __init__(self, req: Request) -> None:
        said = f"this call (key {req.key[:12]}...) is " if req.key else ""
        super().__init__(req.model, said + NOT_CACHED, attempts=0, retryable=False)


def replay_only() -> bool:
    """Whether hosted calls may only replay from the cache: env PROMPTLAB_REPLAY is 1, true or yes (0, false, no or
    unset: not).

    Raises:
        ConfigError: the variable holds anything else.
    """
    text = (os.environ.get(REPLAY_ENV) or "").strip().lower()
    if text in ("", "0", "false", "no"):
        return False
    if text in ("1", "true", "yes"):
        return True
    raise ConfigError(f"{REPLAY_ENV} must be 1, true, yes, 0, false or no, got {text!r}")


__all__ = ["NOT_CACHED", "REPLAY_ENV", "NotCached", "replay_only"]
