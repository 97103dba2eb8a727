"""Model checks before any call: a name a registered provider can serve (`validate_model_name`), one resolved model
at call time (`check_model`: its provider, its API key in the environment) and many names at once, every problem
listed, before a sweep writes anything (`preflight`). The name checks are doors of their own (a loop's config, a
sweep's plan): each resolves its name once and asks the model (`promptlab.llm.providers.resolved`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import ConfigError, MissingKeyError, PromptlabError, UnknownModelError
from ..providers.aliases import check_bases
from ..providers.litellm_lazy import litellm, litellm_loaded
from ..providers.resolved import ResolvedModel, resolve_model
from .replay import replay_only

_checked: set[str] = set()
_checked_aliases: dict[str, Any] = {}


def validate_model_name(model: str) -> None:
    """Raise UnknownModelError unless `model` names a model a registered provider (or litellm) can serve.

    Hosted names are checked by litellm's provider routing (it imports litellm); keys are not checked. A
    registered alias (`promptlab.llm.providers.aliases`) is checked by its target model.
    """
    if not isinstance(model, str) or not model.strip():
        raise UnknownModelError(str(model), "a model name must be a non-empty string")
    resolve_model(model).validate()


def check_model(model: ResolvedModel, params: dict[str, Any]) -> None:
    """Fail early, with a clear message, on an unknown model or a missing API key (before a call); `params` are
    the caller's own (an `api_key` there needs no key in the environment)."""
    name, alias = model.name, model.alias
    if not model.provider.makes_calls:
        raise ConfigError(f"{name!r} {model.provider.call_refusal or 'makes no model call'}")
    if name in _checked or (alias is not None and _checked_aliases.get(name) is alias):
        return
    model.validate()
    if not model.in_process and "api_key" not in params and "mock_response" not in params and not replay_only():
        missing = model.missing_keys()
        if missing:
            raise MissingKeyError(name, missing)
    if alias is None:
        _checked.add(name)
    else:  # checked while this very alias is registered (its key is read again at each call)
        _checked_aliases[name] = alias


def problem(model: str, given: Mapping[str, Any]) -> str | None:
    """What is wrong with `model` before any call (None: nothing), as a line of `preflight`'s message."""
    try:
        validate_model_name(model)
    except UnknownModelError as e:
        return f"- {model!r}: {e.reason or 'unknown model'}"
    except PromptlabError as e:  # e.g. the embedded model's packages are missing
        return f"- {model!r}: {e}"
    resolved = resolve_model(model)
    if resolved.in_process:
        return None
    try:  # no user name or password in a server URL (aliases.refuse_userinfo)
        check_bases(resolved.alias.api_base if resolved.alias is not None else given.get("api_base"))
    except ConfigError as e:
        return f"- {model!r}: {e}"
    if "api_key" in given or "mock_response" in given or replay_only():
        return None
    missing = resolved.missing_keys()
    return f"- {model!r}: needs an API key: set {' or '.join(missing)} in the environment" if missing else None


def preflight(models: Iterable[str], *, params: Mapping[str, Any] | None = None) -> None:
    """Check every model before anything is written or called: its name, its API key in the environment
    (unless `params` carries `api_key`), and, for `local/<path>.gguf`, that the file exists.

    Raises:
        ConfigError: listing every problem at once (one line per model), not just the first.
    """
    given = params or {}
    problems = [p for p in (problem(m, given) for m in dict.fromkeys(models)) if p is not None]
    if problems:
        raise ConfigError(
            f"{len(problems)} model problem(s), found before any call:\n"
            + "\n".join(problems)
            + "\nModels are litellm names ('gpt-4o-mini', 'anthropic/...', 'ollama/...'), 'local/smollm2', "
            "'local/<path>.gguf', 'fake/<name>', or a simulated critic 'sim/<kind>?<param>=<value>'."
        )


def warm_up(models: Iterable[str]) -> bool:
    """Spend the process's one-time import of litellm now (seconds; 15 s was seen on a loaded machine), before the
    first call starts, when one of `models` is hosted (and not in replay only): the first call then takes no longer
    than its deadline. A sweep cell has it done before its runs start (checking its config's model names imports
    it); call this in a script or notebook before a first call that must keep its deadline. Returns whether it
    imported litellm now."""
    if litellm_loaded() or replay_only() or all(resolve_model(m).in_process for m in models):
        return False
    litellm()
    return True


__all__ = ["check_model", "preflight", "problem", "validate_model_name", "warm_up"]
