"""What a model name says: litellm imported lazily and offline (promptlab's in-process models never pass through
it: `promptlab.llm.inprocess` answers them), which models are in-process (`is_own`, `is_local`), what
they support (`native_schema`, `supports_logprobs`) and how a reply names its model and endpoint.

The checks made before a call (a name that can be served, its key) are in `promptlab.llm.preflight`.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType
from typing import Any

from .aliases import base_host, get_alias

OWN_PROVIDERS = ("fake", "local")
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


def is_own(model: str) -> bool:
    """True for promptlab's in-process models (`local/...`, `fake/...`), or an alias of one."""
    alias = get_alias(model)
    return (alias.model if alias else model).split("/", 1)[0] in OWN_PROVIDERS


def is_local(model: str) -> bool:
    """True for the embedded llama.cpp models (`local/...`), or an alias of one."""
    return target_of(model).startswith("local/")


def target_of(model: str) -> str:
    """The litellm model name behind `model`: an alias's `model`, else `model` itself."""
    alias = get_alias(model)
    return alias.model if alias is not None else model


def native_schema(model: str) -> bool:
    """Whether the model is given the JSON schema as `response_format` (else it is told in the prompt); an
    alias says so itself (`native_schema`; when it leaves it None, as its target model would)."""
    alias = get_alias(model)
    if alias is not None:
        return alias.native_schema if alias.native_schema is not None else target_native_schema(alias.model)
    return target_native_schema(model)


def target_native_schema(model: str) -> bool:
    """`native_schema` of a litellm model name (not an alias): `local/` yes, a scripted model as scripted, a hosted
    model as litellm says."""
    provider, _, name = model.partition("/")
    if provider == "local":
        return True
    if provider == "fake":
        from .fake import get_scripted

        return name == "auto" or get_scripted(name).native_schema
    try:
        return bool(litellm().supports_response_schema(model=model))
    except Exception:
        return False


def supports_logprobs(model: str) -> bool:
    """Whether `model` can return token log-probabilities (`logprobs=True, top_logprobs=k`).

    True for `local/...` (llama.cpp reports them) and for every `fake/...` model (a scripted text without
    scripted log-probabilities reports each token as certain); for a hosted model, whether litellm lists
    `logprobs` among the OpenAI parameters it supports for it (False when litellm does not know the model).
    """
    model = target_of(model)
    if is_own(model):
        return True
    try:
        supported = litellm().get_supported_openai_params(model=model) or []
    except Exception:
        return False
    return "logprobs" in supported


def reported_model(model: str, response: Any) -> str | None:
    """The model id the provider reported in `response` (its `model` field). For promptlab's own models,
    what identifies the weights: the GGUF file name for `local/...`; the scripted id (`ScriptedReply.model`,
    default `fake/<id>`) for `fake/...`, where a streamed reply (which carries no id) reports `fake/<id>`."""
    provider, _, name = model.partition("/")
    if provider == "local":
        from .local import resolve_model_path

        return resolve_model_path(name).name
    hidden = getattr(response, "_hidden_params", None) or {}
    said = hidden.get("provider_response_model") or getattr(response, "model", None)  # a stream litellm rebuilt
    said = str(said) if said else None  # reports the requested model; the provider's is kept aside
    if provider == "fake" and said in (None, name):
        return model
    return said


def endpoint(model: str, response: Any = None, api_base: str | None = None) -> str:
    """A short identity of the endpoint that answers `model`, safe to store: 'local:<file>.gguf',
    'fake:<id>', or 'litellm:<provider>@<host[:port]>' (the host of the api_base the response reports,
    else of the one given; never a key, a path or a query). 'litellm:<provider>' where no base is known."""
    provider, _, name = model.partition("/")
    if provider == "local":
        from .local import resolve_model_path

        return f"local:{resolve_model_path(name).name}"
    if provider == "fake":
        return f"fake:{name}"
    hidden = getattr(response, "_hidden_params", None) or {}
    served_by = hidden.get("custom_llm_provider")
    base = hidden.get("api_base") or api_base
    if not served_by or not base:
        try:
            _, guessed, _, default_base = litellm().get_llm_provider(model=model, api_base=api_base)
        except Exception:
            guessed, default_base = None, None
        served_by, base = served_by or guessed or "unknown", base or default_base
    host = base_host(base) if isinstance(base, str) else None
    return f"litellm:{served_by}@{host}" if host else f"litellm:{served_by}"
