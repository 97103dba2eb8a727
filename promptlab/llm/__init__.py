"""The call path: `complete` / `acomplete` over litellm, cached, structured, retried, limited and priced.

Modules: `call` (the two entry points), `request` (a call's arguments -> `Request`), `protocol` (the steps of one
call), `transport` / `direct` (how a request is sent; `loopthread`: where blocking calls send theirs),
`reply` / `completion` (what comes back, and `Tally`, the running totals over calls), `structured`
(schemas and JSON in replies), `settings`, `limits`, `flight` (single-flight), `budget` (spending cap),
`failures` (how a failed request or an invalid reply reads), `providers` (model names), `aliases` (served models by name), `local`
(the embedded model), `fake` (the scripted model), `cache/` (the call cache)."""

from __future__ import annotations

from .aliases import ModelAlias, Price, register_model, registered_models, unregister_model
from .call import CacheArg, acomplete, complete
from .completion import Completion, Tally, TokenLogprob, TopLogprob, Usage
from .fake import ScriptedModel, ScriptedReply, scripted
from .request import Prompt
from .settings import DEFAULT_SETTINGS, Settings
from .spending_cap import Budget

__all__ = [
    "Budget",
    "CacheArg",
    "Completion",
    "DEFAULT_SETTINGS",
    "ModelAlias",
    "Price",
    "Prompt",
    "ScriptedModel",
    "ScriptedReply",
    "Settings",
    "Tally",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "acomplete",
    "complete",
    "register_model",
    "registered_models",
    "scripted",
    "unregister_model",
]
