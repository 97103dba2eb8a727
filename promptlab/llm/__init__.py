"""The call path: `complete` / `acomplete` over litellm, cached, structured, retried, limited and priced.

Where each part of a call is, in the order a call meets them:
- `call`: the two entry points (`complete`, `acomplete`), which drive the steps and read and write the cache;
- `request`: a call's arguments made into a `Request` (messages, parameters, cache key, where its limits apply);
- `resolved`: a model name resolved once into a `ResolvedModel` that callers ask what the model can do;
  `providers`: the model providers by name prefix (`hosted`: litellm's names; `own_models`: `fake/`, `local/`);
  `model_names`: litellm imported lazily; `preflight`: the checks before any call (a name that can be served, its
  API key); `aliases`: served models registered by name;
- `steps`: the steps of one call, as a generator both entry points drive (retries, schema fallback, re-asks);
- `transport`: how one request is sent (litellm, or `openai_http`: a direct POST to an OpenAI-compatible server)
  and what it returns (`Reply`); `completion`: what a call returns (`Completion`); `tally`: running
  totals over calls (`Tally`, `Usage`);
- `concurrency/`: calls in flight and rates (`limits`), one call per cache key (`single_flight`), the event loop
  thread of blocking calls (`call_loop`);
- `spending_cap`: the USD cap of a sweep and its ledger; `failures`: how a failed request or an invalid reply
  reads; `structured`: schemas and JSON in replies; `settings`;
- the models promptlab serves itself: `inprocess` (their calls, answered without litellm), `local` (the
  embedded llama.cpp model and its instance pool), `engine` (the batching engine for local models, its worker
  `engine_worker` and `engine_model`), `cpu` (what the CPU runs safely), `fake` (the scripted model);
  `cache/`: the call cache."""

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
