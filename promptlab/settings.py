"""How calls are made: the `Settings` of one call (retries, timeouts, concurrency, transport).

`promptlab.call` re-exports `Settings` and `DEFAULT_SETTINGS`; every call takes its own settings, and the
limits of a call follow its settings, never those of whichever call came first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError

TRANSPORTS = ("auto", "litellm")
"""Known values of `Settings.transport`."""


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
    """How requests reach the provider: 'auto' posts plain chat requests to an OpenAI-compatible endpoint
    (an `openai/<name>` model with an api_base) directly over HTTP and sends everything else through
    litellm; 'litellm' sends every request through litellm (see `promptlab.direct`)."""

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"Settings.transport: {self.transport!r} is not one of {', '.join(TRANSPORTS)}")

    def concurrency(self, model: str) -> int:
        """Calls in flight at once allowed for `model` by these settings (at least 1)."""
        return max(1, self.per_model_concurrency.get(model, self.max_concurrency))


DEFAULT_SETTINGS = Settings()
"""The settings of a call that passes none."""

__all__ = ["DEFAULT_SETTINGS", "TRANSPORTS", "Settings"]
