"""The call path: `complete` / `acomplete` over litellm, cached, structured, retried, limited and priced.

More in docs/calls.md, section "promptlab.llm".
"""

from __future__ import annotations

from .aliases import ModelAlias, Price, register_model, registered_models, unregister_model
from .call import CacheArg, acomplete, complete
from .completion import Completion, TokenLogprob, TopLogprob
from .fake import ScriptedModel, ScriptedReply, scripted
from .providers import MODEL_PROVIDERS, ModelProvider, register_model_provider
from .request import Prompt
from .resolved import ResolvedModel, resolve_model
from .settings import DEFAULT_SETTINGS, Settings
from .spending_cap import SpendingCap
from .tally import Tally, Usage

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
]
