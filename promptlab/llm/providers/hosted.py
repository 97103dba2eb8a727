"""The provider of every model promptlab does not serve itself: litellm's names ('gpt-4o-mini',
'anthropic/...', 'ollama/...', 'openai/<model>' at an api_base). What such a model can do (native schemas,
log-probabilities), the key it needs and where it answers are what litellm says (imported lazily, offline:
`promptlab.llm.providers.litellm_lazy.litellm`)."""

from __future__ import annotations

from typing import Any

from ...errors import UnknownModelError
from .aliases import base_host, registered_models
from .litellm_lazy import litellm
from .registry import HOSTED, ModelProvider, register_model_provider


class HostedProvider(ModelProvider):
    """litellm's models: remote, priced by litellm's price map, each with the key its provider reads."""

    prefix = HOSTED

    def validate(self, target: str) -> None:
        """Hosted names are checked by litellm's provider routing (keys are not checked)."""
        try:
            litellm().get_llm_provider(model=target)
        except Exception as e:
            aliases = sorted(registered_models())
            reason = "litellm cannot tell which provider serves it"
            if aliases and "/" not in target:
                reason = f"not a registered model alias ({', '.join(aliases)}) and {reason}"
            raise UnknownModelError(target, reason) from e

    def key_env_vars(self, target: str) -> list[str]:
        try:
            env = litellm().validate_environment(model=target)
        except Exception:
            return []
        return [] if env.get("keys_in_environment") else list(env.get("missing_keys") or [])

    def native_schema(self, target: str) -> bool:
        try:
            return bool(litellm().supports_response_schema(model=target))
        except Exception:
            return False

    def logprobs(self, target: str) -> bool:
        """Whether litellm lists `logprobs` among the OpenAI parameters it supports for `target` (False when
        litellm does not know the model)."""
        try:
            supported = litellm().get_supported_openai_params(model=target) or []
        except Exception:
            return False
        return "logprobs" in supported

    def default_host(self, target: str) -> str:
        try:
            provider = litellm().get_llm_provider(model=target)[1]
        except Exception:
            provider = target.partition("/")[0]
        return f"{provider} default endpoint"

    def reported_model(self, target: str, response: Any) -> str | None:
        hidden = getattr(response, "_hidden_params", None) or {}
        said = hidden.get("provider_response_model") or getattr(response, "model", None)  # a stream litellm rebuilt
        return str(said) if said else None  # reports the requested model; the provider's is kept aside

    def endpoint(self, target: str, response: Any = None, api_base: str | None = None) -> str:
        """'litellm:<provider>@<host[:port]>': the host of the api_base the response reports, else of the one
        given; 'litellm:<provider>' where no base is known."""
        hidden = getattr(response, "_hidden_params", None) or {}
        served_by = hidden.get("custom_llm_provider")
        base = hidden.get("api_base") or api_base
        if not served_by or not base:
            try:
                _, guessed, _, default_base = litellm().get_llm_provider(model=target, api_base=api_base)
            except Exception:
                guessed, default_base = None, None
            served_by, base = served_by or guessed or "unknown", base or default_base
        host = base_host(base) if isinstance(base, str) else None
        return f"litellm:{served_by}@{host}" if host else f"litellm:{served_by}"

    def detects_schema(self, target: str) -> bool:
        """An `openai/` model at an alias's api_base: an OpenAI-compatible server, asked which form it takes."""
        return self.openai_compatible(target)

    def openai_compatible(self, target: str) -> bool:
        """An `openai/<name>` model: litellm's OpenAI provider, which posts to an OpenAI-compatible endpoint."""
        return target.partition("/")[0] == "openai"


register_model_provider(HostedProvider())

__all__ = ["HostedProvider"]
