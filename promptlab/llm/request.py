"""One model request before it is sent: `build_request` turns a call's arguments into a `Request`.

It checks the arguments, makes the chat messages (`chat_messages`), resolves a model alias
(`promptlab.llm.aliases`: its target model, api_base and extra params) and computes the cache key: sha256 of the
target model, messages, generation parameters (never a secret: `promptlab.llm.cache.SECRET_FIELDS`), the
schema's JSON and the sample index, plus the endpoint's identity when the call names an api_base (two
servers with one model name never share replies). The Request is where the model's identity is worked out,
once per call: the model it goes to (`target`, an alias resolved), whether that is an in-process model
(`own`), whether it is an alias's OpenAI-compatible server (`served`), the host its requests go to (`host`,
named in errors), what its limits count against (`endpoint`) and how many calls it allows in flight there
(`concurrency`, by `concurrency_limit`, which a sweep also reads for its runs in flight).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Union
from urllib.parse import urlsplit

from pydantic import BaseModel

from . import structured
from .aliases import ModelAlias, endpoint_identity, get_alias
from .cache.keys import SECRET_FIELDS, cache_key
from .inproc import MODEL_THREADS
from .limits import shared_concurrency
from .providers import OWN_PROVIDERS, is_local, litellm
from .settings import DEFAULT_SETTINGS, Settings

Prompt = Union[str, list[dict[str, Any]]]
"""A user prompt as text, or a list of chat messages ({'role': ..., 'content': ...})."""


@dataclass
class Request:
    """What one `complete`/`acomplete` call asks for, with its cache key and where its limits apply."""

    model: str
    """The model name the caller wrote (an alias or a litellm name)."""
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    """Generation parameters (temperature, max_tokens, the alias's params, the caller's)."""
    schema: type[BaseModel] | None
    sample: int
    settings: Settings
    key: str
    """The cache key of the final Completion."""
    target: str = ""
    """The litellm model the request goes to (an alias's `model`, else `model`)."""
    alias: ModelAlias | None = None
    """The alias `model` names, if it is one."""
    endpoint: str = ""
    """What the limits count against: '<target>@<provider>@<host>' with an api_base, else the target."""
    own: bool = False
    """True for promptlab's in-process models (`local/...`, `fake/...`, or an alias of one): no network, no
    price, no retries of the client's own."""

    @property
    def base(self) -> str | None:
        """The api_base the request goes to, when the call (or its alias) names one."""
        base = self.params.get("api_base") or self.params.get("base_url")
        return str(base) if base else None

    @property
    def served(self) -> bool:
        """Whether the request goes to an OpenAI-compatible server of an alias (an `openai/` model with an
        api_base), whose structured-output support is detected."""
        return self.alias is not None and self.target.startswith("openai/") and self.base is not None

    @cached_property
    def host(self) -> str:
        """Where the requests go, as errors name it: the api_base's host, 'in-process', or the provider's
        default endpoint ('<provider> default endpoint')."""
        if self.base:
            return urlsplit(self.base).netloc or self.base
        if self.own:
            return "in-process"
        try:
            provider = litellm().get_llm_provider(model=self.target)[1]
        except Exception:
            provider = self.target.partition("/")[0]
        return f"{provider} default endpoint"

    def concurrency(self) -> int:
        """Calls in flight allowed to this request's endpoint (`concurrency_limit`)."""
        return concurrency_limit(self.model, self.settings, self.alias)

    def rates(self) -> tuple[float | None, float | None]:
        """The alias's (rpm, tpm); (None, None) for a plain model name."""
        return (self.alias.rpm, self.alias.tpm) if self.alias is not None else (None, None)


def concurrency_limit(model: str, settings: Settings | None = None, alias: ModelAlias | None = None) -> int:
    """Calls in flight allowed to a model's endpoint in this process: the settings' override for the name written
    (or the model an alias stands for), else the alias's max_concurrency, else the settings' max_concurrency;
    this process's share of it (`shared_concurrency`). `alias` is the one `model` names, when already looked up.

    An in-process local model (`local/...`) without an override takes `MODEL_THREADS` calls at once: its llama.cpp
    instances (PROMPTLAB_LOCAL_INSTANCES) are what limit it, and the calls beyond them wait in its instance queue,
    which hands a freed instance to the call that shares most of its prompt (`promptlab.llm.local.instance`); a
    limit of a few calls would keep the others from that queue, and interleaved evaluations would then read every
    prompt anew."""
    s = settings or DEFAULT_SETTINGS
    alias = alias or get_alias(model)
    target = alias.model if alias is not None else model
    overrides = s.per_model_concurrency
    if model in overrides or target in overrides:
        limit = s.concurrency(model if model in overrides else target)
    elif alias is not None:
        limit = alias.max_concurrency or s.max_concurrency
    elif is_local(target):
        limit = MODEL_THREADS  # its llama.cpp instances limit it; the calls beyond them queue where affinity sees them
    else:
        limit = s.max_concurrency
    return shared_concurrency(limit)


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
    """The Request of a call's arguments (see `promptlab.llm.call.complete`); a bad model or sample is a ValueError."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    if not isinstance(sample, int) or sample < 0:
        raise ValueError(f"sample must be a whole number >= 0, got {sample!r}")
    messages = chat_messages(prompt, system)
    alias = get_alias(model)
    target = model
    if alias is not None:
        target = alias.model
        params = {**alias.params, **params}
        if alias.api_base and "api_base" not in params and "base_url" not in params:
            params["api_base"] = alias.api_base
    gen = {"temperature": temperature, "max_tokens": max_tokens, **params}
    payload = {
        "model": target,
        "messages": messages,
        "params": {k: v for k, v in gen.items() if k not in SECRET_FIELDS},
        "schema": structured.schema_json(schema) if schema is not None else None,
        "sample": sample,
    }
    base = gen.get("api_base") or gen.get("base_url")
    endpoint = target
    own = target.split("/", 1)[0] in OWN_PROVIDERS
    if base and not own:  # two servers with one model name never share replies (host only)
        payload["endpoint"] = endpoint_identity(target, str(base))
        endpoint = f"{target}@{payload['endpoint']}"
    return Request(
        model,
        messages,
        gen,
        schema,
        sample,
        settings or DEFAULT_SETTINGS,
        cache_key(payload),
        target=target,
        alias=alias,
        endpoint=endpoint,
        own=own,
    )


__all__ = ["Prompt", "Request", "build_request", "chat_messages", "concurrency_limit"]
