"""How calls are made: the `Settings` of one call (retries, timeouts, concurrency, transport).

`promptlab.llm.call.entry` re-exports `Settings` and `DEFAULT_SETTINGS`; every call takes its own settings, and the
limits of a call follow its settings, never those of whichever call came first.

Settings travel as JSON (`Settings.to_json`, `settings_from_json`) to the processes that run a sweep's cells:
a papermill kernel reads them from `PROMPTLAB_SETTINGS` (`settings_from_env`), a Dask task gets them as an
argument. A bad value is a ConfigError naming where it came from and the field.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError
from ..providers.aliases import get_alias, registered_models
from ..providers.resolved import ResolvedModel

TRANSPORTS = ("auto", "litellm")
"""Known values of `Settings.transport`."""
SETTINGS_ENV = "PROMPTLAB_SETTINGS"
"""Environment variable: the call settings (JSON, `Settings.to_json`) of a cell run in another process."""


@dataclass(frozen=True)
class Settings:
    """How calls are made: retries, re-asks, timeouts, concurrency, transport. Pass one to `complete`."""

    retries: int = 4
    """Retries of a transient provider error (rate limit, timeout, 5xx, connection)."""
    backoff_s: float = 0.5
    """First backoff delay; it doubles on each retry, with jitter."""
    backoff_max_s: float = 20.0
    """Longest single backoff delay."""
    parse_attempts: int = 3
    """Structured calls: how many replies to try before raising ParseError."""
    timeout_s: float | None = 120.0
    """Per provider request timeout (each HTTP request, capped by what is left of `deadline_s`)."""
    deadline_s: float | None = 300.0
    """Overall limit on one call: every request, retry and backoff together; None for no limit."""
    max_concurrency: int = 4
    """Async calls in flight at once per model (per endpoint for a call with an api_base)."""
    per_model_concurrency: dict[str, int] = field(default_factory=dict)
    """Overrides of max_concurrency by model name or alias name (over an alias's own max_concurrency)."""
    transport: str = "auto"
    """How requests reach the provider: 'auto' posts chat requests to an OpenAI-compatible endpoint (an
    `openai/<name>` model with an api_base) directly over HTTP, plain or streamed, and sends everything else
    through litellm; 'litellm' sends every request through litellm (see `promptlab.llm.providers.openai_http`)."""
    max_reply_bytes: int = 8 * 2**20
    """The largest reply accepted (8 MiB): a bigger one is refused as an infrastructure failure (not retried,
    never cached). The direct transport stops reading there; through litellm the text's size is checked."""

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"Settings.transport: {self.transport!r} is not one of {', '.join(TRANSPORTS)}")
        if self.max_concurrency < 1:
            raise ConfigError(f"Settings.max_concurrency: {self.max_concurrency} must be at least 1")
        for name, n in self.per_model_concurrency.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ConfigError(f"Settings.per_model_concurrency[{name!r}]: {n!r} must be a whole number >= 1")
        if not isinstance(self.max_reply_bytes, int) or self.max_reply_bytes < 1:
            raise ConfigError(f"Settings.max_reply_bytes: {self.max_reply_bytes!r} is not a whole number of bytes >= 1")

    def check_models(self, models: Iterable[str], where: str = "Settings.per_model_concurrency") -> None:
        """Refuse a per-model concurrency override that names no model the work will call (by the name it
        is called by, or the model an alias it calls stands for) and no registered alias: a typo would
        otherwise drop the limit silently.

        Raises:
            ConfigError: naming `where`, each unknown name and the models the work calls.
        """
        used = list(dict.fromkeys(models))
        known = set(used) | set(registered_models())
        known |= {alias.model for m in used if (alias := get_alias(m)) is not None}
        unknown = [m for m in self.per_model_concurrency if m not in known]
        if unknown:
            raise ConfigError(
                f"{where}: {', '.join(repr(m) for m in unknown)}: no model of this work has that "
                f"name, nor does any model alias; the models it calls: {', '.join(used) or 'none'}"
            )

    def concurrency(self, model: ResolvedModel, default: int | None = None) -> int:
        """Calls in flight at once allowed for `model` by these settings (at least 1): the override for the name
        it was called by, else for the model an alias stands for, else `default` (the alias's own limit),
        else max_concurrency."""
        overrides = self.per_model_concurrency
        limit = overrides.get(model.name, overrides.get(model.target))
        return max(1, limit if limit is not None else default or self.max_concurrency)

    def to_json(self) -> str:
        """These settings as a JSON object of their fields (`settings_from_json` reads it back)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def settings_from_json(text: str, source: str) -> Settings:
    """Settings from a JSON object of their fields (missing ones take their defaults).

    Raises:
        ConfigError: not JSON, not an object, an unknown field or a bad value; the message starts with
            `source` (e.g. the environment variable it came from) and names the field.
    """
    from pydantic import TypeAdapter, ValidationError

    try:
        data: Any = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{source}: not valid JSON ({e}): {text[:200]!r}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object of Settings fields, got {type(data).__name__}")
    known = [f.name for f in dataclasses.fields(Settings)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        settings: Settings = TypeAdapter(Settings).validate_python(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            where = ".".join(str(part) for part in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{where}: {err['input']!r}: {msg}" if where else msg)
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None
    return settings


def settings_from_env() -> Settings | None:
    """The settings handed over in `PROMPTLAB_SETTINGS`, or None when it is unset or empty."""
    raw = os.environ.get(SETTINGS_ENV, "").strip()
    return settings_from_json(raw, SETTINGS_ENV) if raw else None


DEFAULT_SETTINGS = Settings()
"""The settings of a call that passes none."""

__all__ = ["DEFAULT_SETTINGS", "SETTINGS_ENV", "TRANSPORTS", "Settings", "settings_from_env", "settings_from_json"]
