"""How the call protocol reads a failed provider request: retry it or not, a missing key, where it went."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..errors import MissingKeyError, ProviderError
from .providers import is_own, key_env_vars, litellm


def transient(e: BaseException) -> bool:
    """Rate limits, timeouts, 5xx and connection errors are retried; nothing else is."""
    lm = litellm()
    if isinstance(e, (lm.AuthenticationError, lm.BadRequestError, lm.NotFoundError, lm.PermissionDeniedError)):
        return False
    if isinstance(e, (lm.RateLimitError, lm.Timeout, lm.APIConnectionError, lm.InternalServerError,
                      lm.ServiceUnavailableError)):
        return True
    status = getattr(e, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def raise_if_auth(model: str, e: BaseException, attempts: int) -> None:
    """Raise MissingKeyError (a key variable is unset) or ProviderError when `e` is an authentication failure."""
    if isinstance(e, litellm().AuthenticationError):
        missing = key_env_vars(model)
        if missing:
            raise MissingKeyError(model, missing) from e
        raise ProviderError(model, f"authentication failed: {e}", attempts=attempts, retryable=False) from e


def request_host(model: str, params: dict[str, Any]) -> str:
    """Where a request goes: the api_base host, or the provider's default endpoint."""
    base = params.get("api_base") or params.get("base_url")
    if base:
        return urlsplit(str(base)).netloc or str(base)
    if is_own(model):
        return "in-process"
    try:
        provider = litellm().get_llm_provider(model=model)[1]
    except Exception:
        provider = model.partition("/")[0]
    return f"{provider} default endpoint"


__all__ = ["raise_if_auth", "request_host", "transient"]
