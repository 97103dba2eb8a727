"""Model providers: who serves the models of a name prefix, and what those models can do.

A model name is resolved once (`promptlab.llm.providers.resolved.resolve_model`): an alias is replaced by its target, and
the target's prefix (the part before the first '/') picks a `ModelProvider` from `MODEL_PROVIDERS`. A name whose
prefix no provider registered goes to litellm (`HOSTED`, `promptlab.llm.providers.hosted`). Callers then ask the
resolved model what it can do, never the name string.

promptlab registers `fake` (the scripted model) and `local` (the embedded llama.cpp model) in
`promptlab.llm.providers.own_models`, litellm in `promptlab.llm.providers.hosted`; `promptlab.critics.simulated` registers `sim`
(simulated critics: instruments that make no call). A package adds a provider with `register_model_provider`
or under the `promptlab.models` entry-point group (see `promptlab.registry`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...registry import Registry

HOSTED = "litellm"
"""The name the provider of every other model (litellm's names) is registered under."""


class ModelProvider:
    """How promptlab serves the models of one prefix, and their capabilities; each method takes the target (the
    full litellm-style name, e.g. 'fake/echo'). The defaults describe a hosted model litellm serves."""

    prefix: str = ""
    """The name prefix it serves ('fake' serves 'fake/...')."""
    in_process: bool = False
    """Answered in this process by promptlab itself (no network, no key, costs nothing)."""
    makes_calls: bool = True
    """False for an instrument: a name that stands for something computed without any model call."""
    runs_a_model: bool = True
    """False when no model runs behind the name (a script, an instrument): its replies are not a model's."""
    call_refusal: str = ""
    """For an instrument: why a model call to it is refused."""

    def validate(self, target: str) -> None:
        """Raise UnknownModelError unless the provider can serve `target`."""

    def key_env_vars(self, target: str) -> list[str]:
        """The environment variables `target` still needs for its key (empty when set, or none needed)."""
        return []

    def native_schema(self, target: str) -> bool:
        """Whether `target` takes a JSON schema as `response_format` (else it is told in the prompt)."""
        return False

    def logprobs(self, target: str) -> bool:
        """Whether `target` can return token log-probabilities."""
        return False

    def capacity(self, target: str) -> int | None:
        """How many calls `target` serves at once at best in this process (None: no limit of its own)."""
        return None

    def note(self, target: str) -> str:
        """A few words a sweep's plan shows beside the name ('' for none)."""
        return ""

    def instrument(self, target: str) -> Any:
        """What an instrument's name stands for (e.g. a `SimCritic`), None for a model that is called."""
        return None

    def default_host(self, target: str) -> str:
        """Where requests go when no api_base is given, as errors name it."""
        return "in-process" if self.in_process else f"{target.partition('/')[0]} default endpoint"

    def reported_model(self, target: str, response: Any) -> str | None:
        """The model id a litellm-shaped `response` reports for `target`."""
        said = getattr(response, "model", None)
        return str(said) if said else None

    def endpoint(self, target: str, response: Any = None, api_base: str | None = None) -> str:
        """A short identity of the endpoint that answers `target`, safe to store (no key, path or query)."""
        return f"{self.prefix}:{target.partition('/')[2]}"

    def fingerprint(self, target: str) -> dict[str, Any] | None:
        """What an in-process model's replies rest on (its weights and the code that ran them), or None."""
        return None

    def detects_schema(self, target: str) -> bool:
        """Whether an alias's server for `target` is asked once which structured-output form it takes."""
        return False

    def openai_compatible(self, target: str) -> bool:
        """Whether requests for `target` go to an OpenAI-compatible chat endpoint by the name after its prefix."""
        return False

    # In-process providers answer requests themselves (`promptlab.llm.local.inprocess` calls these).
    def reply(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        """The `Generated` reply to a request to `<prefix>/<name>`."""
        raise NotImplementedError(f"{self.prefix}/{name}: this provider answers no request in process")

    def reply_stream(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[Any]:
        """The reply to a request to `<prefix>/<name>` in pieces, the last with its usage."""
        raise NotImplementedError(f"{self.prefix}/{name}: this provider answers no request in process")

    def stream_model(self, name: str) -> str | None:
        """The model id a streamed reply of `<prefix>/<name>` reports (a stream carries none)."""
        return None

    def batched(self, name: str) -> bool:
        """Whether `<prefix>/<name>` is answered by the batching engine (`promptlab.llm.local.engine`)."""
        return False


MODEL_PROVIDERS: Registry[ModelProvider] = Registry("model provider", "promptlab.models")
"""Model providers by name prefix; `HOSTED` serves every name whose prefix is not registered."""


def register_model_provider(provider: ModelProvider, prefix: str | None = None) -> ModelProvider:
    """Register `provider` for the names `<prefix>/...` (default: its own `prefix`)."""
    return MODEL_PROVIDERS.register(prefix or provider.prefix, provider)


def routed_prefix(target: str) -> str:
    """The provider litellm routes `target` to by its name: its prefix, or 'openai' for a bare name (as litellm
    routes a bare name with an api_base)."""
    prefix, slash, _ = target.partition("/")
    return prefix if slash else "openai"


def provider_of(target: str) -> ModelProvider:
    """The provider of `target` (an alias already replaced by its target): by its prefix, else litellm."""
    prefix, slash, _ = target.partition("/")
    found = MODEL_PROVIDERS.find(prefix) if slash and prefix != HOSTED else None
    return found if found is not None else MODEL_PROVIDERS[HOSTED]


__all__ = ["HOSTED", "MODEL_PROVIDERS", "ModelProvider", "provider_of", "register_model_provider", "routed_prefix"]
