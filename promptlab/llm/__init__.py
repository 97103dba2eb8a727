"""The call path: `complete` / `acomplete` over litellm, cached, structured, retried, limited and priced.

More in docs/calls.md, section "promptlab.llm".
"""

from __future__ import annotations

from .call.completion import Completion, TokenLogprob, TopLogprob
from .call.entry import CacheArg, acomplete, complete
from .call.preflight import warm_up
from .call.request import Prompt
from .call.settings import DEFAULT_SETTINGS, Settings
from .providers.aliases import ModelAlias, Price, register_model, registered_models, unregister_model
from .providers.registry import MODEL_PROVIDERS, ModelProvider, register_model_provider
from .providers.resolved import ResolvedModel, resolve_model
from .providers.scripted import ScriptedModel, ScriptedReply, scripted
from .spending.cap import SpendingCap
from .spending.tally import Tally, Usage

__all__ = [
    "CacheArg",
    "Completion",
    "DEFAULT_SETTINGS",
    "MODEL_PROVIDERS",
    "ModelAlias",
    "ModelProvider",
    "Price",
    "Prompt",
    "ResolvedModel",
    "ScriptedModel",
    "ScriptedReply",
    "Settings",
    "SpendingCap",
    "Tally",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "acomplete",
    "complete",
    "register_model",
    "register_model_provider",
    "registered_models",
    "resolve_model",
    "scripted",
    "unregister_model",
    "warm_up",
]
