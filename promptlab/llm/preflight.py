"""Model checks before any call: a name promptlab or litellm can serve (`validate_model_name`), the API key it
needs in the environment (`key_env_vars`), one model at call time (`check_model`) and many at once, every problem
listed, before a sweep writes anything (`preflight`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..critics.simulated import is_simulated, parse_sim
from ..errors import ConfigError, MissingKeyError, PromptlabError, UnknownModelError
from .aliases import check_bases, get_alias, missing_key_vars, registered_models
from .model_names import is_own, litellm
from .resolved import ResolvedModel

_checked: set[str] = set()
_checked_aliases: dict[str, Any] = {}


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
    if is_simulated(model):  # a simulated critic (promptlab.critics.simulated): its kind and parameters
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


def check_model(model: ResolvedModel, params: dict[str, Any]) -> None:
    """Fail early, with a clear message, on an unknown model or a missing API key (before a call); `params` are
    the caller's own (an `api_key` there needs no key in the environment)."""
    name, alias = model.name, model.alias
    if is_simulated(name):
        raise ConfigError(
            f"{name!r} is a simulated critic (promptlab.critics.simulated): it makes no model call and "
            "can only play a critic role of a grounded P³RO or Creator/Critic run"
        )
    if name in _checked or (alias is not None and _checked_aliases.get(name) is alias):
        return
    validate_model_name(name)
    if not model.own and "api_key" not in params and "mock_response" not in params:
        missing = key_env_vars(name)
        if missing:
            raise MissingKeyError(name, missing)
    if alias is None:
        _checked.add(name)
    else:  # checked while this very alias is registered (its key is read again at each call)
        _checked_aliases[name] = alias


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
        if is_own(model) or is_simulated(model):
            continue
        alias = get_alias(model)
        try:  # no user name or password in a server URL (aliases.refuse_userinfo)
            check_bases(alias.api_base if alias is not None else given.get("api_base"))
        except ConfigError as e:
            problems.append(f"- {model!r}: {e}")
            continue
        if "api_key" in given or "mock_response" in given:
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


__all__ = ["check_model", "key_env_vars", "preflight", "validate_model_name"]
