"""A scripted model for tests and dry runs: `fake/<name>` answers from a queue or a function.

It is registered with litellm like the local model, so a test exercises the real call path (cache,
retries, structured parsing) offline. Every request it receives is recorded.

Token log-probabilities: a request with `logprobs=True` gets the ones scripted with the reply
(`ScriptedReply(text, logprobs=[...])`); a reply scripted as plain text gets one token per word or
punctuation run, each certain (logprob 0, its only alternative itself). So every scripted model
supports log-probabilities.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import random
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Union

from ...errors import ConfigError
from ..call.completion import Generated, TokenLogprob, TopLogprob

_TOKEN = re.compile(r" ?\w+| ?[^\w\s]+|\s+")
"""How a plain scripted text is cut into tokens when log-probabilities are asked for."""

Alternatives = Union[TokenLogprob, tuple[str, float], tuple[str, float, dict[str, float]]]
"""A scripted token: a TokenLogprob, or (token, logprob) or (token, logprob, {alternative: logprob})."""


@dataclass(frozen=True)
class ScriptedReply:
    """A scripted reply with what a provider reports beside the text."""

    text: str
    logprobs: list[Alternatives] | None = None
    """The reply's tokens with their log-probabilities and alternatives; their texts must join to `text`."""
    model: str | None = None
    """The model id to report as the response's `model` (default: the scripted model's name)."""

    def __post_init__(self) -> None:
        self.tokens()  # a script whose tokens do not spell its text fails here, not inside a model call

    def tokens(self) -> list[TokenLogprob] | None:
        """The scripted tokens as TokenLogprob records (checked to spell out `text`)."""
        if self.logprobs is None:
            return None
        out = [_token(t) for t in self.logprobs]
        if "".join(t.token for t in out) != self.text:
            raise ConfigError(
                f"scripted logprobs spell {''.join(t.token for t in out)!r}, not the reply text {self.text!r}"
            )
        return out


def _token(item: Alternatives) -> TokenLogprob:
    if isinstance(item, TokenLogprob):
        return item
    token, logprob, *rest = item
    alternatives = rest[0] if rest else {token: logprob}
    return TokenLogprob(
        token=token, logprob=logprob, top_logprobs=[TopLogprob(token=k, logprob=v) for k, v in alternatives.items()]
    )


def _certain_tokens(text: str) -> list[TokenLogprob]:
    """A plain text as certain tokens: one per word or punctuation run (with its leading space)."""
    return [
        TokenLogprob(token=t, logprob=0.0, top_logprobs=[TopLogprob(token=t, logprob=0.0)])
        for t in _TOKEN.findall(text)
    ]


def _limit(tokens: list[TokenLogprob], k: int) -> list[TokenLogprob]:
    """Keep the k most likely alternatives at each position, as a provider asked for `top_logprobs=k` does."""
    return [t.model_copy(update={"top_logprobs": sorted(t.top_logprobs, key=lambda a: -a.logprob)[:k]}) for t in tokens]


Respond = Callable[..., Union[str, ScriptedReply]]
"""A function that answers a request: `respond(messages)`, or `respond(messages, params)` to see the call's
parameters too (a function with a second positional parameter without a default, or one named `params`): what the call sends
(temperature, max_tokens, response_format, seed, ...) and `sample`, the call's draw index (so a scripted critic
can answer each sample with its own draw, as a sampled model does)."""
Reply = Union[str, ScriptedReply, BaseException, Respond]
"""A queued reply: a text, a ScriptedReply, an exception to raise, or a function (`Respond`) returning a text
or a ScriptedReply."""


def _answer(respond: Respond, messages: list[dict[str, Any]], params: dict[str, Any]) -> str | ScriptedReply:
    """`respond`'s answer: given the call's parameters when its signature asks for them (`Respond`): a second
    positional parameter without a default, *args, or a parameter named `params`."""
    try:
        signature = inspect.signature(respond).parameters
    except (TypeError, ValueError):  # a builtin without a signature: the messages only
        return respond(messages)
    if "params" in signature:
        return respond(messages, params=params)
    required = [p for p in signature.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in required if p.default is p.empty]
    if len(required) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in signature.values()):
        return respond(messages, params)
    return respond(messages)
    kinds = [p.kind for p in signature.parameters.values()]
    positional = sum(
        k in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p, k in zip(signature.parameters.values(), kinds, strict=True)
    )
    if "params" in signature.parameters and positional < 2:
        return respond(messages, params=params)
    if positional >= 2 or inspect.Parameter.VAR_POSITIONAL in kinds:
        return respond(messages, params)
    return respond(messages)


@dataclass
class ScriptedModel:
    """A model that replies from a script; use its `name` (`fake/<id>`) wherever a model name goes."""

    id: str
    replies: deque[Reply] = field(default_factory=deque)
    respond: Respond | None = None
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

    def reply(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> ScriptedReply:
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
            item = _answer(item, messages, params)
        return item if isinstance(item, ScriptedReply) else ScriptedReply(str(item))

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
    respond: Respond | None = None,
    native_schema: bool = True,
) -> ScriptedModel:
    """Register (or replace) the scripted model `fake/<id>` and return it.

    Args:
        id: the part after `fake/` in the model name.
        replies: queued replies, used first: texts, ScriptedReply objects (a text with scripted token
            log-probabilities and a reported model id), exceptions to raise, or functions of the messages.
        respond: a function of the messages (returning a text or a ScriptedReply) used once the queue is empty;
            `respond(messages, params)` also gets the call's parameters, its `sample` among them (`Respond`).
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
    from ...errors import UnknownModelError

    with _models_lock:
        model = _models.get(id)
        known = [f"fake/{k}" for k in _models]
    if model is None:
        raise UnknownModelError(
            f"fake/{id}", "no scripted model by that name is registered (create it with promptlab.scripted(...))", known
        )
    return model


def reply(id: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Generated:
    """Answer a request to `fake/<id>`: the text, (input, output) word counts, the finish reason, and
    token log-probabilities when `params` asks for them (`logprobs`, `top_logprobs`).

    `fake/auto` needs no script: it answers any structured request with a deterministic, schema-valid
    object derived from a hash of the request, and a plain request with a short text.
    """
    scripted = ScriptedReply(_auto(messages, params)) if id == "auto" else get_scripted(id).reply(messages, params)
    text = scripted.text
    logprobs = None
    if params.get("logprobs"):
        tokens = scripted.tokens()
        logprobs = _limit(tokens if tokens is not None else _certain_tokens(text), int(params.get("top_logprobs") or 0))
    words_in = sum(len(str(m.get("content", "")).split()) for m in messages)
    return Generated(
        text=text,
        usage=(words_in, len(text.split())),
        finish_reason="stop",
        logprobs=logprobs,
        model=scripted.model or f"fake/{id}",
    )


def reply_stream(id: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Stream a `fake/<id>` reply word by word, then a last piece with the finish reason and usage."""
    done = reply(id, messages, params)
    for word in re.findall(r"\S+\s*|\s+", done.text):
        yield {"text": word}
    yield {"text": "", "finish_reason": done.finish_reason, "usage": done.usage}


def _auto(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps([messages, params.get("seed")], sort_keys=True, default=str).encode())
    rng = random.Random(digest.hexdigest())
    fmt = params.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
    if not schema:
        return f"Scripted answer {rng.randrange(10**6):06d} to: {str(messages[-1].get('content', ''))[:60]}"
    return json.dumps(_instance(schema, schema, rng, whole=bool(params.get("logprobs"))))


def _instance(node: dict[str, Any], root: dict[str, Any], rng: random.Random, whole: bool = False) -> Any:
    """A random value valid against a (pydantic-generated) JSON schema node; with `whole`, every number is a
    whole one (a request for log-probabilities reads a critic's expected score from the integer it wrote, as
    G-Eval does: a dry run's "7.53" would leave every expected score missing)."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _instance(root["$defs"][name], root, rng, whole)
    for combo in ("anyOf", "oneOf", "allOf"):
        if combo in node:
            options = [o for o in node[combo] if o.get("type") != "null"] or node[combo]
            return _instance(options[0], root, rng, whole)
    if "enum" in node:
        return rng.choice(node["enum"])
    if "const" in node:
        return node["const"]
    kind = node.get("type", "string")
    if kind == "object":
        props = node.get("properties", {})
        return {k: _instance(v, root, rng, whole) for k, v in props.items()}
    if kind == "array" and "prefixItems" in node:  # a tuple: one value per position, in order
        return [_instance(item, root, rng, whole) for item in node["prefixItems"]]
    if kind == "array":
        low = int(node.get("minItems", 1))
        high = int(node.get("maxItems", max(low, 3)))
        return [_instance(node.get("items", {}), root, rng, whole) for _ in range(rng.randint(low, max(low, high)))]
    if kind == "integer":
        low = int(node.get("minimum", 0))
        high = int(node.get("maximum", low + 10))
        return rng.randint(low, high)
    if kind == "number":
        bottom, top = float(node.get("minimum", 0)), float(node.get("maximum", 10))
        if whole and math.ceil(bottom) <= math.floor(top):
            return rng.randint(math.ceil(bottom), math.floor(top))
        return round(rng.uniform(bottom, top), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    words = ["clear", "specific", "audience", "tone", "example", "constraint", "format", "concise", "goal"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 8))).capitalize() + "."
