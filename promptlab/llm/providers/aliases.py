"""Model aliases: a short name for a model served somewhere, with its endpoint, key variable, limits and price.

More in docs/calls.md, section "promptlab.llm.providers.aliases".
"""

from __future__ import annotations

import os
import re
import threading
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ...errors import ConfigError, MissingKeyError
from ...sanitize import mask_userinfo
from .registry import MODEL_PROVIDERS, routed_prefix

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$")
"""Alias names: letters, digits and `_.:@+-`, no '/' (a '/' would read as a provider prefix)."""
PLACEHOLDER_KEY = "sk-no-key-required"
"""The key sent to an alias's api_base when it names no `api_key_env`."""


MAX_PRICE_PER_MILLION = 1e6
"""The highest price a model may have, in USD per million tokens (1 USD a token; the dearest model sold lists a few
hundred): a price past it, negative or not finite is not a price, in an alias or in litellm's price map."""


class Price(BaseModel):
    """What a served model costs, in USD per million tokens (as providers list prices)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(ge=0, le=MAX_PRICE_PER_MILLION, allow_inf_nan=False)
    """USD per million prompt (input) tokens."""
    output_per_million: float = Field(ge=0, le=MAX_PRICE_PER_MILLION, allow_inf_nan=False)
    """USD per million completion (output) tokens."""

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of one reply with these token counts, in USD."""
        return round((input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1e6, 10)


class ModelSpec(BaseModel):
    """What an alias stands for (an experiment file's `models.<name>` entry); no secret is ever held."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    """The litellm model name it stands for, e.g. 'openai/qwen2.5-7b' (an OpenAI-compatible server)."""
    api_base: str | None = None
    """The server's base URL, e.g. 'http://localhost:8000/v1'; None for the provider's own endpoint."""
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable that holds the API key (read at call time; the key is never stored)."""
    max_concurrency: int | None = Field(None, ge=1)
    """Calls in flight at once to this endpoint per process (None: the call's Settings.max_concurrency)."""
    rpm: float | None = Field(None, gt=0)
    """Requests per minute to this endpoint per process (None: no limit)."""
    tpm: float | None = Field(None, gt=0)
    """Tokens per minute to this endpoint per process, prompt estimate plus max_tokens (None: no limit)."""
    native_schema: bool | None = None
    """Structured calls: True sends the JSON schema as `response_format`, False puts it in the prompt,
    None detects it (native first for an `openai/` model with an api_base, the prompt once refused)."""
    price: Price | None = None
    """USD per million input/output tokens; prices every reply (else litellm's price map, often unknown)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Further litellm generation parameters sent with every call (a call's own arguments win; they
    enter the cache key, so no secret belongs here)."""

    @model_validator(mode="before")
    @classmethod
    def _no_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("api_key" in data or "api_key" in (data.get("params") or {})):
            raise ValueError(
                "an alias never holds an API key: put it in an environment variable and name that "
                "variable in api_key_env"
            )
        return data

    @field_validator("api_base")
    @classmethod
    def _no_userinfo(cls, value: str | None) -> str | None:
        if value is not None and "@" in value:
            refuse_userinfo(value, "api_base")
        return value

    def identity(self) -> dict[str, Any]:
        """What the replies depend on (target model, endpoint identity, params); not limits nor price."""
        endpoint = endpoint_identity(self.model, self.api_base) if self.api_base else None
        return {"model": self.model, "endpoint": endpoint, "params": self.params}


class ModelAlias(ModelSpec):
    """A registered model alias: its name and what it stands for."""

    name: str
    """The name callers use in place of a model name."""

    def spec(self) -> dict[str, Any]:
        """The alias's fields without its name, as JSON (what an experiment file's `models:` entry holds)."""
        return self.model_dump(mode="json", exclude={"name"}, exclude_defaults=True)


_aliases: dict[str, ModelAlias] = {}
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _reserved() -> frozenset[str]:
    """Names an alias may not take: every provider prefix (litellm's and promptlab's own)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    names = {str(getattr(p, "value", p)) for p in litellm.provider_list}
    return frozenset(names | set(MODEL_PROVIDERS))


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"model alias name: must be a non-empty string, got {name!r}")
    if "/" in name:
        raise ConfigError(
            f"model alias {name!r}: an alias name has no '/' ('{routed_prefix(name)}/' reads as a "
            "provider prefix); pick a short name like 'judge'"
        )
    if not NAME_PATTERN.match(name):
        raise ConfigError(f"model alias {name!r}: use letters, digits and _.:@+- only")
    if name in _reserved():
        raise ConfigError(f"model alias {name!r}: collides with the provider prefix '{name}/'; pick another name")
    return name


def register_model(name: str, model: str | None = None, **fields: Any) -> ModelAlias:
    """Register (or replace) the alias `name` for `model`, with the fields of `ModelSpec`.

    Raises:
        ConfigError: an empty name, one with '/', one that collides with a provider prefix, or a bad field
            (the message names the alias and the field).
    """
    _check_name(name)
    if "name" in fields:
        raise ConfigError(f"model alias {name!r}: pass the name once, as the first argument")
    try:
        alias = ModelAlias.model_validate({"name": name, "model": model, **fields})
    except ValidationError as e:
        raise ConfigError(f"model alias {name!r}: " + "; ".join(_describe(err) for err in e.errors())) from None
    if "/" not in alias.model and get_alias(alias.model) is not None:
        raise ConfigError(f"model alias {name!r}: model {alias.model!r} is itself an alias; name a litellm model")
    with _lock:
        _aliases[name] = alias
    return alias


def register_spec(name: str, spec: ModelSpec) -> ModelAlias:
    """Register an alias from a validated `ModelSpec` (an experiment file's entry)."""
    return register_model(name, **spec.model_dump(exclude_defaults=True))


def _describe(err: Any) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "fields"
    if err.get("type") == "extra_forbidden":
        return f"{loc}: not a field of a model alias (generation parameters go under `params`)"
    value = err.get("input")
    shown = "" if err.get("type") == "missing" or isinstance(value, dict) else f" {value!r}:"
    return f"{loc}:{shown} {err.get('msg', 'invalid')}"


def unregister_model(name: str) -> None:
    """Forget the alias `name` (no error when it is not registered); for tests and notebooks."""
    with _lock:
        _aliases.pop(name, None)


def get_alias(name: str) -> ModelAlias | None:
    """The alias registered as `name`, or None (a plain model name)."""
    return _aliases.get(name) if isinstance(name, str) else None


def registered_models() -> dict[str, ModelAlias]:
    """Every registered alias by name (a copy)."""
    with _lock:
        return dict(_aliases)


@lru_cache(maxsize=1024)
def base_host(url: str) -> str | None:
    """The host (and explicit port) of a URL, without credentials, path or query."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url if "//" in url else f"//{url}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return f"{host}:{port}" if port else host


def refuse_userinfo(url: str, where: str) -> None:
    """Refuse a server URL that carries a user name or password (`http://user:pass@host/v1`): promptlab never
    sends nor stores credentials in a URL (an OpenAI-compatible server reads its key from the Authorization
    header, which `api_key` fills).

    Raises:
        ConfigError: naming `where` and the URL, its user name and password masked.
    """
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url if "//" in url else f"//{url}")
    except ValueError:
        return
    if "@" in parts.netloc:
        raise ConfigError(f"{where}: {USERINFO_REFUSED.format(url=mask_userinfo(url))}")
    secret = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if _secret_param(k)]
    if secret:
        shown = url.split("?", 1)[0] + "?" + "&".join(f"{k}=***" for k, _ in parse_qsl(parts.query, True))
        raise ConfigError(
            f"{where}: {shown} carries a credential in its query string ({', '.join(secret)}), which promptlab never "
            "sends nor stores; remove it from the URL and give the server's key as api_key (or, for a model alias, "
            "name the variable holding it in api_key_env)"
        )


def _secret_param(name: str) -> bool:
    """Whether a URL query parameter of this name carries a secret (`api-key`, `key`, `token`, `sig`...)."""
    from ...sanitize import is_secret_name

    normal = name.strip().upper().replace("-", "_")
    return is_secret_name(normal) or normal in ("SIG", "SIGNATURE", "AUTH", "AUTHORIZATION", "CODE")


USERINFO_REFUSED = (
    "{url} carries a user name or password, which promptlab never sends nor stores; remove them from the URL "
    "and give the server's key as api_key (or, for a model alias, name the variable holding it in api_key_env)"
)
"""Why a server URL with credentials in it is refused."""


BASE_VARIABLES = ("OPENAI_API_BASE", "OPENAI_BASE_URL")
"""Environment variables litellm and the direct transport read a server URL from."""


def check_bases(base: Any = None) -> None:
    """Refuse (ConfigError) a server URL with a user name or password in it: the call's `base`, or one in the
    environment (`BASE_VARIABLES`); see `aliases.refuse_userinfo`."""
    if base:
        refuse_userinfo(str(base), "api_base")
    for name in BASE_VARIABLES:
        if "@" in os.environ.get(name, "") or "?" in os.environ.get(name, ""):
            refuse_userinfo(os.environ[name], name)


def endpoint_identity(model: str, api_base: str) -> str:
    """'<provider>@<host[:port]>' for a request to `model` at `api_base`: what enters the cache key and
    names the limits' endpoint (never a key, a path or a query). The provider is the one the registry says
    litellm routes the name to (`registry.routed_prefix`)."""
    return f"{routed_prefix(model)}@{base_host(api_base) or '?'}"


def api_key(alias: ModelAlias) -> str | None:
    """The key to send for `alias`, read now: its `api_key_env` variable; a placeholder for an api_base
    without one; None (the provider's usual variables) otherwise.

    Raises:
        MissingKeyError: `api_key_env` is set but that variable is not.
    """
    if alias.api_key_env:
        key = os.environ.get(alias.api_key_env)
        if not key:
            raise MissingKeyError(alias.name, [alias.api_key_env])
        return key
    return PLACEHOLDER_KEY if alias.api_base else None


def missing_key_vars(alias: ModelAlias) -> list[str] | None:
    """[api_key_env] when that variable is unset, [] when the alias needs nothing more, None when the key
    comes from the target provider's own variables (no api_key_env and no api_base)."""
    if alias.api_key_env:
        return [] if os.environ.get(alias.api_key_env) else [alias.api_key_env]
    return [] if alias.api_base else None


SCHEMA_FORMS = ("json_schema", "json_object")
"""The native `response_format` shapes, tried in this order on a served endpoint: OpenAI's
`{type: json_schema, json_schema: {name, schema}}`, then `{type: json_object, schema}` (what
llama-cpp-python's server takes; it refuses the first)."""

_schema_support: dict[str, str | None] = {}
"""Per endpoint and served model: the native form it took (an entry of SCHEMA_FORMS), or None (refused)."""


def schema_support(endpoint: str) -> bool | None:
    """What was learnt about an endpoint's `response_format` support in this process (None: not yet)."""
    if endpoint not in _schema_support:
        return None
    return _schema_support[endpoint] is not None


def schema_form(endpoint: str) -> str | None:
    """The native `response_format` form an endpoint took in this process (None: refused or not yet)."""
    return _schema_support.get(endpoint)


def remember_schema_support(endpoint: str, supported: bool, form: str = SCHEMA_FORMS[0]) -> None:
    """Record whether an endpoint took a native `response_format`, and in which form."""
    if form not in SCHEMA_FORMS:
        raise ValueError(f"form: {form!r} is not one of {', '.join(SCHEMA_FORMS)}")
    _schema_support[endpoint] = form if supported else None


def refuses_schema(error: BaseException) -> bool:
    """Whether a provider error is a server refusing `response_format`: an HTTP 400/422 whose message
    mentions response_format, json_schema or a schema, or an HTTP 500 that reports a validation error on
    `response_format` (llama-cpp-python's server answers an unknown format type so)."""
    status = getattr(error, "status_code", None)
    text = str(error).lower()
    if status == 500:
        return "response_format" in text and "validation error" in text
    if status not in (400, 422):
        return False
    return any(word in text for word in ("response_format", "json_schema", "response format", "schema"))


__all__ = [
    "BASE_VARIABLES",
    "MAX_PRICE_PER_MILLION",
    "NAME_PATTERN",
    "PLACEHOLDER_KEY",
    "SCHEMA_FORMS",
    "ModelAlias",
    "ModelSpec",
    "Price",
    "api_key",
    "base_host",
    "check_bases",
    "endpoint_identity",
    "get_alias",
    "missing_key_vars",
    "refuse_userinfo",
    "refuses_schema",
    "register_model",
    "register_spec",
    "registered_models",
    "remember_schema_support",
    "schema_form",
    "schema_support",
    "unregister_model",
]
