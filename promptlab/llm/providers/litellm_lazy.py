"""litellm, imported lazily and offline: promptlab's in-process models never pass through it
(`promptlab.llm.local.inprocess` answers them). What a model name says is asked of the model it resolves to
(`promptlab.llm.providers.resolved.resolve_model`, through the providers of `promptlab.llm.providers.registry`)."""

from __future__ import annotations

import os
import threading
from types import ModuleType

_lm: ModuleType | None = None
_lm_lock = threading.Lock()


def litellm() -> ModuleType:
    """The litellm module, imported on first use with the offline price map."""
    global _lm
    if _lm is not None:
        return _lm
    with _lm_lock:
        if _lm is None:
            # Offline, litellm would retry downloading its price map for seconds; respect a user's choice.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm as lm

            lm.suppress_debug_info = True
            _lm = lm
    return _lm


def litellm_loaded() -> bool:
    """Whether litellm was imported already (the next `litellm()` returns at once)."""
    return _lm is not None


__all__ = ["litellm", "litellm_loaded"]
