"""A model name resolved once, at the door of a call: `resolve_model` turns the name the caller wrote (and the
call's parameters) into a `ResolvedModel`, which every later step reads instead of asking again.

What it holds: the alias the name stands for (`promptlab.llm.aliases`), the litellm model the requests go to
(`target`), the call's parameters with the alias's own under them, the api_base, whether the model runs
in-process (`own`, `local`), whether it is an alias's OpenAI-compatible server (`served`), the variable its key
is read from, the endpoint its limits and cache key name, its rates and price, and (read on first use, once)
whether it takes the JSON schema natively and the host errors name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from .aliases import ModelAlias, Price, endpoint_identity, get_alias
from .model_names import OWN_PROVIDERS, litellm, target_native_schema


@dataclass(frozen=True)
class ResolvedModel:
    """A model name as one call resolved it (see `resolve_model`)."""

    name: str
    """The name the caller wrote (an alias or a litellm name)."""
    target: str
    """The litellm model the requests go to (an alias's `model`, else `name`)."""
    alias: ModelAlias | None
    """The alias `name` stands for, if it is one."""
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    """The call's parameters over the alias's own (and the alias's api_base unless the call names one); not
    in the repr (a key may be among them)."""
    api_base: str | None = field(default=None, repr=False)
    """The api_base the requests go to, when the call or its alias names one."""
    own: bool = False
    """True for promptlab's in-process models (`local/...`, `fake/...`, or an alias of one)."""
    endpoint_id: str | None = None
    """'<provider>@<host>' of a hosted model called with an api_base: it enters the cache key."""

    @property
    def local(self) -> bool:
        """True for the embedded llama.cpp models (`local/...`, or an alias of one)."""
        return self.target.startswith("local/")

    @property
    def endpoint(self) -> str:
        """What the limits count against: '<target>@<provider>@<host>' with an api_base, else the target."""
        return f"{self.target}@{self.endpoint_id}" if self.endpoint_id else self.target

    @property
    def served(self) -> bool:
        """Whether the requests go to an OpenAI-compatible server of an alias (an `openai/` model with an
        api_base), whose structured-output support is detected."""
        return self.alias is not None and self.target.startswith("openai/") and self.api_base is not None

    @property
    def key_env(self) -> str | None:
        """The environment variable the alias's key is read from at each call (None: the provider's own)."""
        return self.alias.api_key_env if self.alias is not None else None

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
        what its target supports (`promptlab.llm.model_names.target_native_schema`); read on first use, once."""
        if self.alias is not None and self.alias.native_schema is not None:
            return self.alias.native_schema
        return target_native_schema(self.target)

    @cached_property
    def host(self) -> str:
        """Where the requests go, as errors name it: the api_base's host, 'in-process', or the provider's
        default endpoint ('<provider> default endpoint')."""
        if self.api_base:
            return urlsplit(self.api_base).netloc.rpartition("@")[2] or self.api_base
        if self.own:
            return "in-process"
        try:
            provider = litellm().get_llm_provider(model=self.target)[1]
        except Exception:
            provider = self.target.partition("/")[0]
        return f"{provider} default endpoint"


def resolve_model(model: str, params: Mapping[str, Any] | None = None) -> ResolvedModel:
    """`model` (and the call's `params`) resolved: the one place a call looks its model up."""
    alias = get_alias(model)
    merged = dict(params or {})
    target = model
    if alias is not None:
        target = alias.model
        merged = {**alias.params, **merged}
        if alias.api_base and "api_base" not in merged and "base_url" not in merged:
            merged["api_base"] = alias.api_base
    base = merged.get("api_base") or merged.get("base_url")
    own = target.split("/", 1)[0] in OWN_PROVIDERS
    endpoint_id = endpoint_identity(target, str(base)) if base and not own else None
    return ResolvedModel(model, target, alias, merged, str(base) if base else None, own, endpoint_id)


__all__ = ["ResolvedModel", "resolve_model"]
