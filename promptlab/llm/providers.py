"""Model names: litellm imported lazily and offline, and what promptlab knows of each model name.

promptlab's in-process models (`local/...`, `fake/...`) never pass through litellm: `promptlab.llm.inproc`
answers them directly. Hosted models go through litellm or the direct transport (`promptlab.llm.transport`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from ..errors import ConfigError, MissingKeyError, PromptlabError, UnknownModelError
from .aliases import base_host, get_alias, missing_key_vars, registered_models
from .simulated import is_simulated, parse_sim

OWN_PROVIDERS = ("fake", "local")
_lm: ModuleType | None = None
_lm_lock = threading.Lock()
_checked: set[str] = set()
_checked_aliases: dict[str, Any] = {}


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
        return alias.native_schema if alias.native_schema is not None else native_schema(alias.model)
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


def key_env_vars(model: str) -> list[str]:
    """The environment variables a hosted model still needs (empty when its keys are set); for an alias, its
    `api_key_env` when unset (nothing for an api_base without one), else its target's."""
    alias = get_alias(model)
    if alias is not None:
        missing = missing_key_vars(alias)
        if missing is not None or is_own(alias.model):
            return missing or []
        model = alias.model
    try:
        env = litellm().validate_environment(model=model)
    except Exception:
        return []
    return [] if env.get("keys_in_environment") else list(env.get("missing_keys") or [])


def validate_model_name(model: str) -> None:
    """Raise UnknownModelError unless `model` names a model promptlab or litellm can serve.

    Hosted names are checked by litellm's provider routing (it imports litellm); keys are not checked. A
    registered alias (`promptlab.llm.aliases`) is checked by its target model.
    """
    if not isinstance(model, str) or not model.strip():
        raise UnknownModelError(str(model), "a model name must be a non-empty string")
    if is_simulated(model):  # a simulated critic (promptlab.llm.simulated): its kind and parameters
        parse_sim(model)
        return
    alias = get_alias(model)
    if alias is not None:
        try:
            validate_model_name(alias.model)
        except UnknownModelError as e:
            raise UnknownModelError(model, f"alias of {alias.model!r}: {e.reason or 'unknown model'}") from e
        return
    provider, _, name = model.partition("/")
    if provider == "fake":
        from .fake import get_scripted

        if name != "auto":
            get_scripted(name)
    elif provider == "local":
        from .local import resolve_model_path

        resolve_model_path(name)
    else:
        lm = litellm()
        try:
            lm.get_llm_provider(model=model)
        except Exception as e:
            aliases = sorted(registered_models())
            reason = "litellm cannot tell which provider serves it"
            if aliases and "/" not in model:
                reason = f"not a registered model alias ({', '.join(aliases)}) and {reason}"
            raise UnknownModelError(model, reason) from e


def check_model(model: str, params: dict[str, Any]) -> None:
    """Fail early, with a clear message, on an unknown model or a missing API key (before a call)."""
    if is_simulated(model):
        raise ConfigError(
            f"{model!r} is a simulated critic (promptlab.llm.simulated): it makes no model call and "
            "can only play a critic role of a grounded P³RO or Creator/Critic run"
        )
    alias = get_alias(model)
    if model in _checked or (alias is not None and _checked_aliases.get(model) is alias):
        return
    validate_model_name(model)
    if not is_own(model) and "api_key" not in params and "mock_response" not in params:
        missing = key_env_vars(model)
        if missing:
            raise MissingKeyError(model, missing)
    if alias is None:
        _checked.add(model)
    else:  # checked while this very alias is registered (its key is read again at each call)
        _checked_aliases[model] = alias


def preflight(models: Iterable[str], *, params: Mapping[str, Any] | None = None) -> None:
    """Check every model before anything is written or called: its name, its API key in the environment
    (unless `params` carries `api_key`), and, for `local/<path>.gguf`, that the file exists.

    Raises:
        ConfigError: listing every problem at once (one line per model), not just the first.
    """
    given = params or {}
    problems: list[str] = []
    for model in dict.fromkeys(models):  # each name once, in order
        try:
            validate_model_name(model)
        except UnknownModelError as e:
            problems.append(f"- {model!r}: {e.reason or 'unknown model'}")
            continue
        except PromptlabError as e:  # e.g. the embedded model's packages are missing
            problems.append(f"- {model!r}: {e}")
            continue
        if is_own(model) or is_simulated(model) or "api_key" in given or "mock_response" in given:
            continue
        missing = key_env_vars(model)
        if missing:
            problems.append(f"- {model!r}: needs an API key: set {' or '.join(missing)} in the environment")
    if problems:
        raise ConfigError(
            f"{len(problems)} model problem(s), found before any call:\n"
            + "\n".join(problems)
            + "\nModels are litellm names ('gpt-4o-mini', 'anthropic/...', 'ollama/...'), 'local/smollm2', "
            "'local/<path>.gguf', 'fake/<name>', or a simulated critic 'sim/<kind>?<param>=<value>'."
        )
