"""A model name resolved once, at the door of a call: `resolve_model` turns the name the caller wrote (and the
call's parameters) into a `ResolvedModel`, which every later step, and every caller outside the call path, asks
instead of reading the name again.

What it holds: the alias the name stands for (`promptlab.llm.providers.aliases`), the litellm-style model the requests go to
(`target`), the provider that serves it (`promptlab.llm.providers.registry`: picked by the target's prefix), the call's
parameters with the alias's own under them, the api_base, the endpoint its limits and cache key name; and what
the model can do, asked of its provider: in process or remote (`in_process`), whether it is called at all
(`instrument`), its key (`missing_keys`), rates and price, token log-probabilities (`logprobs`), whether it takes the
JSON schema natively (`native_schema`), how many calls it serves at once (`capacity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from ...errors import UnknownModelError
from .aliases import (
    SCHEMA_FORMS,
    ModelAlias,
    Price,
    api_key,
    endpoint_identity,
    get_alias,
    missing_key_vars,
    remember_schema_support,
    schema_form,
    schema_support,
)
from .registry import ModelProvider, provider_of


@dataclass(frozen=True)
class ResolvedModel:
    """A model name as it was resolved (see `resolve_model`); ask it, never the name, what the model is."""

    name: str
    """The name the caller wrote (an alias or a litellm name)."""
    target: str
    """The litellm-style model the requests go to (an alias's `model`, else `name`)."""
    alias: ModelAlias | None
    """The alias `name` stands for, if it is one."""
    provider: ModelProvider = field(repr=False, compare=False)
    """Who serves `target` (picked by its prefix)."""
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    """The call's parameters over the alias's own (and the alias's api_base unless the call names one); not
    in the repr (a key may be among them)."""
    api_base: str | None = field(default=None, repr=False)
    """The api_base the requests go to, when the call or its alias names one."""
    endpoint_id: str | None = None
    """'<provider>@<host>' of a hosted model called with an api_base: it enters the cache key."""

    @property
    def model_id(self) -> str:
        """The target's name after its provider's prefix ('echo' for 'fake/echo')."""
        return self.target.partition("/")[2] if "/" in self.target else self.target

    @property
    def in_process(self) -> bool:
        """True for models promptlab answers in this process (`local/...`, `fake/...`, an instrument, or an alias
        of one): no network, no key, and they cost nothing."""
        return self.provider.in_process

    @property
    def makes_calls(self) -> bool:
        """False for an instrument (a simulated critic): a name computed from, without any model call."""
        return self.provider.makes_calls

    @property
    def instrument(self) -> Any:
        """What the name stands for when it is an instrument that makes no call (a simulated critic's
        `SimCritic`), else None."""
        return None if self.provider.makes_calls else self.provider.instrument(self.target)

    @property
    def runs_a_model(self) -> bool:
        """False for a script or an instrument: nothing behind the name is a model."""
        return self.provider.runs_a_model

    @property
    def embedded(self) -> bool:
        """True for a model that runs in this process on this machine's CPU (`local/...`, or an alias of one)."""
        return self.provider.in_process and self.provider.runs_a_model and self.provider.makes_calls

    @property
    def batched(self) -> bool:
        """Whether the batching engine answers it (the embedded model in the engine's batch mode)."""
        return self.provider.batched(self.model_id)

    @property
    def capacity(self) -> int | None:
        """How many calls it serves at once at best in this process (None: no limit of its own)."""
        return self.provider.capacity(self.target)

    @property
    def note(self) -> str:
        """A few words shown beside its name in a sweep's plan ('' for none)."""
        return self.provider.note(self.target)

    @property
    def endpoint(self) -> str:
        """What the limits count against: '<target>@<provider>@<host>' with an api_base, else the target."""
        return f"{self.target}@{self.endpoint_id}" if self.endpoint_id else self.target

    @property
    def served(self) -> bool:
        """Whether the requests go to an OpenAI-compatible server of an alias (an `openai/` model with an
        api_base), whose structured-output support is detected."""
        return self.alias is not None and self.api_base is not None and self.provider.detects_schema(self.target)

    @property
    def openai_compatible(self) -> bool:
        """Whether its requests go to an OpenAI-compatible chat endpoint by the name after the prefix (an
        `openai/<name>` model): the direct transport may post them (`promptlab.llm.providers.openai_http`)."""
        return self.provider.openai_compatible(self.target)

    def schema_mode(self) -> str:
        """How a structured call's schema goes out: 'native' (`response_format`), 'prompt', or 'detect' (native
        until the server refuses it: a served alias without a `native_schema` choice, until this process learnt
        what its endpoint takes)."""
        if self.served and self.alias is not None and self.alias.native_schema is None:
            learnt = schema_support(self.endpoint)
            return "detect" if learnt is None else ("native" if learnt else "prompt")
        return "native" if self.native_schema else "prompt"

    def schema_form(self) -> str:
        """The native `response_format` form to send first: what its served endpoint took in this process, else
        OpenAI's (`aliases.SCHEMA_FORMS`)."""
        return (schema_form(self.endpoint) if self.served else None) or SCHEMA_FORMS[0]

    def remember_schema(self, supported: bool, form: str = SCHEMA_FORMS[0]) -> None:
        """Record for its endpoint, in this process, whether it took a native `response_format`, and in which form."""
        remember_schema_support(self.endpoint, supported, form)

    def api_key(self) -> str | None:
        """The key to send, read now from its alias's `api_key_env` (a placeholder for an alias's api_base
        without one); None: the provider reads its own variables. Never stored.

        Raises:
            MissingKeyError: the alias's `api_key_env` is unset."""
        return api_key(self.alias) if self.alias is not None else None

    @property
    def key_env(self) -> str | None:
        """The environment variable the alias's key is read from at each call (None: the provider's own)."""
        return self.alias.api_key_env if self.alias is not None else None

    def missing_keys(self) -> list[str]:
        """The environment variables it still needs for its key (empty when they are set or none is needed); for
        an alias, its `api_key_env` when unset (nothing for an api_base without one), else its target's."""
        if self.alias is not None:
            missing = missing_key_vars(self.alias)
            if missing is not None or self.in_process:
                return missing or []
        return [] if self.in_process else self.provider.key_env_vars(self.target)

    def validate(self) -> None:
        """Raise UnknownModelError unless its provider can serve it (keys are not checked)."""
        try:
            self.provider.validate(self.target)
        except UnknownModelError as e:
            if self.alias is None:
                raise
            raise UnknownModelError(self.name, f"alias of {self.target!r}: {e.reason or 'unknown model'}") from e

    @property
    def rates(self) -> tuple[float | None, float | None]:
        """The alias's (rpm, tpm); (None, None) for a plain model name."""
        return (self.alias.rpm, self.alias.tpm) if self.alias is not None else (None, None)

    @property
    def price(self) -> Price | None:
        """The alias's own price, if it sets one (else litellm's price map prices the replies)."""
        return self.alias.price if self.alias is not None else None

    @cached_property
    def native_schema(self) -> bool:
        """Whether the JSON schema goes as `response_format` (else in the prompt): the alias's choice, else
        what its provider says of the target; read on first use, once."""
        if self.alias is not None and self.alias.native_schema is not None:
            return self.alias.native_schema
        return self.provider.native_schema(self.target)

    @cached_property
    def logprobs(self) -> bool:
        """Whether it can return token log-probabilities (`logprobs=True, top_logprobs=k`)."""
        return self.provider.logprobs(self.target)

    @cached_property
    def host(self) -> str:
        """Where the requests go, as errors name it: the api_base's host, 'in-process', or the provider's
        default endpoint ('<provider> default endpoint')."""
        if self.api_base:
            return urlsplit(self.api_base).netloc.rpartition("@")[2] or self.api_base
        return self.provider.default_host(self.target)

    def fingerprint(self) -> dict[str, Any] | None:
        """What an in-process model's replies rest on (`promptlab.llm.local.fingerprint`; None: its provider has
        none, a hosted model's is read from each reply)."""
        found: dict[str, Any] | None = self.provider.fingerprint(self.target)
        return found

    def reported_model(self, response: Any) -> str | None:
        """The model id `response` reports (for promptlab's own models, what identifies the weights)."""
        return self.provider.reported_model(self.target, response)

    def endpoint_of(self, response: Any = None) -> str:
        """A short identity of the endpoint that answered, safe to store ('local:<file>.gguf', 'fake:<id>',
        'litellm:<provider>@<host[:port]>')."""
        return self.provider.endpoint(self.target, response, self.api_base)


def resolve_model(model: str, params: Mapping[str, Any] | None = None) -> ResolvedModel:
    """`model` (and the call's `params`) resolved: the one place a model name is looked up."""
    alias = get_alias(model)
    merged = dict(params or {})
    target = model
    if alias is not None:
        target = alias.model
        merged = {**alias.params, **merged}
        if alias.api_base and "api_base" not in merged and "base_url" not in merged:
            merged["api_base"] = alias.api_base
    base = merged.get("api_base") or merged.get("base_url")
    provider = provider_of(target)
    endpoint_id = endpoint_identity(target, str(base)) if base and not provider.in_process else None
    return ResolvedModel(model, target, alias, provider, merged, str(base) if base else None, endpoint_id)


__all__ = ["ResolvedModel", "resolve_model"]
