"""One model request before it is sent: `build_request` turns a call's arguments into a `Request`.

It checks the arguments, makes the chat messages (`chat_messages`), resolves the model once
(`promptlab.llm.providers.resolved.resolve_model`: an alias's target, api_base and extra params, in-process or not, the
endpoint), and asks the resolved model, once, what the call needs of it before any step: the cache key
(`promptlab.llm.cache.keys.call_key`) and how many calls its endpoint allows in flight (`concurrency_limit`, which a
sweep also reads for its runs in flight).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel

from ..cache.keys import call_key
from ..concurrency.limits import shared_concurrency
from ..local.inprocess import MODEL_THREADS
from ..providers.aliases import check_bases
from ..providers.resolved import ResolvedModel, resolve_model
from .settings import DEFAULT_SETTINGS, Settings

Prompt = Union[str, list[dict[str, Any]]]
"""A user prompt as text, or a list of chat messages ({'role': ..., 'content': ...})."""


@dataclass
class Request:
    """What one `complete`/`acomplete` call asks for: its model resolved, its messages and parameters, its
    cache key."""

    resolved: ResolvedModel
    """The model as this call resolved it, once (`promptlab.llm.providers.resolved.resolve_model`): every step
    asks it what the model is."""
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    """Generation parameters (temperature, max_tokens, the alias's params, the caller's)."""
    schema: type[BaseModel] | None
    sample: int
    settings: Settings
    key: str
    """The cache key of the final Completion (`promptlab.llm.cache.keys.call_key`)."""
    concurrency: int
    """Calls in flight allowed to the model's endpoint in this process, by these settings (`concurrency_limit`)."""

    @property
    def model(self) -> str:
        """The model name the caller wrote (an alias or a litellm name), as records and errors name it."""
        return self.resolved.name


def concurrency_limit(model: ResolvedModel, settings: Settings | None = None) -> int:
    """Calls in flight allowed to a resolved model's endpoint in this process: the settings' override for it
    (`Settings.concurrency`), else the alias's max_concurrency, else the settings' max_concurrency; this
    process's share of it (`shared_concurrency`).

    An in-process local model (`local/...`) without an override takes `MODEL_THREADS` calls at once: its llama.cpp
    instances (PROMPTLAB_LOCAL_INSTANCES) are what limit it, and the calls beyond them wait in its instance queue,
    which hands a freed instance to the call that shares most of its prompt (`promptlab.llm.local.pool.instance`); a
    limit of a few calls would keep the others from that queue, and interleaved evaluations would then read every
    prompt anew."""
    own: int | None = None
    if model.alias is not None:
        own = model.alias.max_concurrency
    elif model.embedded:
        own = MODEL_THREADS  # its llama.cpp instances limit it; the calls beyond them queue where affinity sees them
    return shared_concurrency((settings or DEFAULT_SETTINGS).concurrency(model, own))


def chat_messages(prompt: Prompt, system: str | None) -> list[dict[str, Any]]:
    """The chat messages of a prompt (copied), with the system prompt first when there is one."""
    if isinstance(prompt, str):
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    else:
        messages = [dict(m) for m in prompt]
    if system:
        messages.insert(0, {"role": "system", "content": system})
    return messages


def build_request(
    model: str,
    prompt: Prompt,
    *,
    schema: type[BaseModel] | None,
    system: str | None,
    temperature: float,
    max_tokens: int | None,
    sample: int,
    settings: Settings | None,
    params: dict[str, Any],
) -> Request:
    """The Request of a call's arguments (see `promptlab.llm.call.entry.complete`); a bad model or sample is a ValueError."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    if not isinstance(sample, int) or sample < 0:
        raise ValueError(f"sample must be a whole number >= 0, got {sample!r}")
    if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ValueError(
            f"schema must be a pydantic model class (a subclass of pydantic.BaseModel), got {type(schema).__name__} "
            f"{str(schema)[:80]!r}"
        )
    messages = chat_messages(prompt, system)
    resolved = resolve_model(model, params)
    if not resolved.in_process:
        check_bases(resolved.api_base)  # no user name or password in a server URL (aliases.refuse_userinfo)
    gen = {"temperature": temperature, "max_tokens": max_tokens, **resolved.params}
    settings = settings or DEFAULT_SETTINGS
    key, limit = call_key(resolved, messages, gen, schema, sample), concurrency_limit(resolved, settings)
    return Request(resolved, messages, gen, schema, sample, settings, key, limit)


__all__ = ["Prompt", "Request", "build_request", "chat_messages", "concurrency_limit"]
