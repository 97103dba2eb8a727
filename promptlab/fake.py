"""A scripted model for tests and dry runs: `fake/<name>` answers from a queue or a function.

It is registered with litellm like the local model, so a test exercises the real call path (cache,
retries, structured parsing) offline. Every request it receives is recorded.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Union

from .errors import ConfigError

Reply = Union[str, BaseException, Callable[[list[dict[str, Any]]], str]]
"""A queued reply: a text, an exception to raise, or a function of the messages returning a text."""


@dataclass
class ScriptedModel:
    """A model that replies from a script; use its `name` (`fake/<id>`) wherever a model name goes."""

    id: str
    replies: deque[Reply] = field(default_factory=deque)
    respond: Callable[[list[dict[str, Any]]], str] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    native_schema: bool = True
    """Whether the call path passes the schema as `response_format` (False: it is told in the prompt)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        """The model name to pass to promptlab: `fake/<id>`."""
        return f"fake/{self.id}"

    def queue(self, *replies: Reply) -> ScriptedModel:
        """Append replies to the queue."""
        with self._lock:
            self.replies.extend(replies)
        return self

    def reply(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        """Record the request and produce the next reply (raising a scripted exception)."""
        with self._lock:
            self.requests.append({"messages": messages, "params": params})
            item: Reply | None = self.replies.popleft() if self.replies else None
        if item is None:
            if self.respond is None:
                raise ConfigError(
                    f"scripted model {self.name!r} has no reply left for request #{len(self.requests)}; "
                    "queue more replies or give it a `respond` function"
                )
            item = self.respond
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return str(item(messages))
        return item

    @property
    def prompts(self) -> list[str]:
        """The last user message of every request, in order."""
        return [r["messages"][-1]["content"] for r in self.requests]


_models: dict[str, ScriptedModel] = {}
_models_lock = threading.Lock()


def scripted(
    id: str,
    replies: Iterable[Reply] = (),
    *,
    respond: Callable[[list[dict[str, Any]]], str] | None = None,
    native_schema: bool = True,
) -> ScriptedModel:
    """Register (or replace) the scripted model `fake/<id>` and return it.

    Args:
        id: the part after `fake/` in the model name.
        replies: queued replies, used first: texts, exceptions to raise, or functions of the messages.
        respond: a function of the messages used once the queue is empty.
        native_schema: pass schemas as `response_format` (True) or as an instruction in the prompt.
    """
    if not id or id == "auto":
        raise ConfigError(f"scripted model id must be a non-empty name other than 'auto', got {id!r}")
    model = ScriptedModel(id=id, replies=deque(replies), respond=respond, native_schema=native_schema)
    with _models_lock:
        _models[id] = model
    return model


def get_scripted(id: str) -> ScriptedModel:
    """The registered scripted model `fake/<id>`; unknown ids list the known ones."""
    from .errors import UnknownModelError

    with _models_lock:
        model = _models.get(id)
        known = [f"fake/{k}" for k in _models]
    if model is None:
        raise UnknownModelError(f"fake/{id}", "no scripted model by that name is registered "
                                "(create it with promptlab.scripted(...))", known)
    return model


def reply(id: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> tuple[str, tuple[int, int], str]:
    """Answer a request to `fake/<id>`: the text, (input, output) word counts, and the finish reason.

    `fake/auto` needs no script: it answers any structured request with a deterministic, schema-valid
    object derived from a hash of the request, and a plain request with a short text.
    """
    if id == "auto":
        text = _auto(messages, params)
    else:
        text = get_scripted(id).reply(messages, params)
    words_in = sum(len(str(m.get("content", "")).split()) for m in messages)
    return text, (words_in, len(text.split())), "stop"


def reply_stream(id: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Stream a `fake/<id>` reply word by word, then a last piece with the finish reason and usage."""
    text, usage, finish = reply(id, messages, params)
    for word in re.findall(r"\S+\s*|\s+", text):
        yield {"text": word}
    yield {"text": "", "finish_reason": finish, "usage": usage}


def _auto(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps([messages, params.get("seed")], sort_keys=True, default=str).encode())
    rng = random.Random(digest.hexdigest())
    fmt = params.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
    if not schema:
        return f"Scripted answer {rng.randrange(10**6):06d} to: {str(messages[-1].get('content', ''))[:60]}"
    return json.dumps(_instance(schema, schema, rng))


def _instance(node: dict[str, Any], root: dict[str, Any], rng: random.Random) -> Any:
    """A random value valid against a (pydantic-generated) JSON schema node."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _instance(root["$defs"][name], root, rng)
    for combo in ("anyOf", "oneOf", "allOf"):
        if combo in node:
            options = [o for o in node[combo] if o.get("type") != "null"] or node[combo]
            return _instance(options[0], root, rng)
    if "enum" in node:
        return rng.choice(node["enum"])
    if "const" in node:
        return node["const"]
    kind = node.get("type", "string")
    if kind == "object":
        props = node.get("properties", {})
        return {k: _instance(v, root, rng) for k, v in props.items()}
    if kind == "array":
        low = int(node.get("minItems", 1))
        high = int(node.get("maxItems", max(low, 3)))
        return [_instance(node.get("items", {}), root, rng) for _ in range(rng.randint(low, max(low, high)))]
    if kind == "integer":
        low = int(node.get("minimum", 0))
        high = int(node.get("maximum", low + 10))
        return rng.randint(low, high)
    if kind == "number":
        return round(rng.uniform(float(node.get("minimum", 0)), float(node.get("maximum", 10))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    words = ["clear", "specific", "audience", "tone", "example", "constraint", "format", "concise", "goal"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 8))).capitalize() + "."
