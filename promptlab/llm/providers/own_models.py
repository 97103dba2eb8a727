"""The models promptlab serves itself, registered as model providers: `fake/<id>` (the scripted model,
`promptlab.llm.providers.scripted`) and `local/<name>` (the embedded llama.cpp model, `promptlab.llm.local.pool`, decoded by the
batching engine, `promptlab.llm.local.engine`, or the instance pool). Both are answered in this process, need no key
and cost nothing; both report token log-probabilities."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..call.completion import Generated
from ..local import engine
from ..local import pool as local
from ..local.fingerprint import local_fingerprint
from . import scripted as fake
from .registry import ModelProvider, register_model_provider


class ScriptedProvider(ModelProvider):
    """`fake/<id>`: a scripted model registered with `promptlab.scripted`, or `fake/auto`, which needs none."""

    prefix = "fake"
    in_process = True
    runs_a_model = False

    def validate(self, target: str) -> None:
        name = target.partition("/")[2]
        if name != "auto":
            fake.get_scripted(name)

    def native_schema(self, target: str) -> bool:
        """As scripted (`scripted(..., native_schema=...)`); `fake/auto` takes it."""
        name = target.partition("/")[2]
        return name == "auto" or fake.get_scripted(name).native_schema

    def logprobs(self, target: str) -> bool:
        """A scripted text without scripted log-probabilities reports each token as certain."""
        return True

    def reported_model(self, target: str, response: Any) -> str | None:
        said = getattr(response, "model", None)
        return target if said in (None, target.partition("/")[2]) else str(said)

    def reply(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Generated:
        return fake.reply(name, messages, params)

    def reply_stream(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[Any]:
        return fake.reply_stream(name, messages, params)


class LocalProvider(ModelProvider):
    """`local/<name>`: a built-in GGUF model or a path to a .gguf file, run on this machine's CPU."""

    prefix = "local"
    in_process = True

    def validate(self, target: str) -> None:
        local.resolve_model_path(target.partition("/")[2])

    def native_schema(self, target: str) -> bool:
        return True

    def logprobs(self, target: str) -> bool:
        return True

    def capacity(self, target: str) -> int | None:
        """The batching engine's sequence slots, or the instance pool's instances."""
        return engine.capacity()

    def note(self, target: str) -> str:
        return "embedded, runs on this machine's CPU"

    def reported_model(self, target: str, response: Any) -> str | None:
        """The GGUF file's name: what identifies the weights."""
        return local.resolve_model_path(target.partition("/")[2]).name

    def endpoint(self, target: str, response: Any = None, api_base: str | None = None) -> str:
        made = getattr(response, "model", None) if isinstance(response, Generated) else None
        return f"local:{made or self.reported_model(target, response)}"

    def reply(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Generated:
        return local.generate(name, messages, params)

    def reply_stream(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[Any]:
        return local.generate_stream(name, messages, params)

    def stream_model(self, name: str) -> str | None:
        return local.resolve_model_path(name).name

    def fingerprint(self, target: str) -> dict[str, Any] | None:
        return local_fingerprint(local.resolve_model_path(target.partition("/")[2]))

    def batched(self, name: str) -> bool:
        return engine.mode() == "batch"


register_model_provider(ScriptedProvider())
register_model_provider(LocalProvider())

__all__ = ["LocalProvider", "ScriptedProvider"]
