"""The one call path: `complete` and `acomplete`, over litellm, cached, structured, retried.

Both share one step-by-step protocol (`_protocol`, a generator that yields provider calls and sleeps);
`complete` drives it with blocking calls and `time.sleep`, so it works inside a running Jupyter event
loop, and `acomplete` drives it with `litellm.acompletion` and `asyncio.sleep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel

from . import structured
from .cache import SECRET_FIELDS, Cache, cache_key, open_cache
from .completion import Completion, TokenLogprob, logprobs_of
from .errors import MissingKeyError, ParseError, ProviderError
from .providers import check_model, endpoint, is_own, litellm, native_schema, reported_model

Prompt = Union[str, list[dict[str, Any]]]
"""A user prompt as text, or a list of chat messages ({'role': ..., 'content': ...})."""
CacheArg = Union[Cache, str, Path, bool, None]
"""None or True: the default cache; False: no cache; a path or a Cache: that one."""


@dataclass(frozen=True)
class Settings:
    """How calls are made: retries, re-asks, timeouts, concurrency. Pass one to `complete`."""

    retries: int = 4
    """Retries of a transient provider error (rate limit, timeout, 5xx, connection)."""
    backoff_s: float = 0.5
    """First backoff delay; it doubles on each retry, with jitter."""
    backoff_max_s: float = 20.0
    """Longest single backoff delay."""
    parse_attempts: int = 3
    """Structured calls: how many replies to try before raising ParseError."""
    timeout_s: float | None = 120.0
    """Per provider call timeout."""
    max_concurrency: int = 4
    """Async calls in flight at once per model."""
    per_model_concurrency: dict[str, int] = field(default_factory=dict)
    """Overrides of max_concurrency by model name."""


DEFAULT_SETTINGS = Settings()


@dataclass
class _Call:
    kwargs: dict[str, Any]
    reply_key: str | None = None
    """Structured calls cache every provider reply under this key, so a replay re-parses the same
    replies (a ParseError replays without model calls); the final Completion is cached as well."""


class _Reply(BaseModel):
    """One provider reply, as the protocol needs it (and as a structured call's reply is cached)."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    logprobs: list[TokenLogprob] | None = None
    response_model: str | None = None
    endpoint: str | None = None
    replayed: bool = False


TokenHandler = Callable[[str], None]
"""Receives each piece of reply text as it is generated (or the whole text once, for a cache hit)."""


@dataclass
class _Sleep:
    seconds: float


@dataclass
class _Request:
    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    schema: type[BaseModel] | None
    sample: int
    settings: Settings
    key: str


def _messages(prompt: Prompt, system: str | None) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    else:
        messages = [dict(m) for m in prompt]
    if system:
        messages.insert(0, {"role": "system", "content": system})
    return messages


def _build(
    model: str,
    prompt: Prompt,
    *,
    schema: type[BaseModel] | None,
    system: str | None,
    temperature: float,
    max_tokens: int | None,
    sample: int,
    settings: Settings | None,
    params: dict[str, Any],
) -> _Request:
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    if not isinstance(sample, int) or sample < 0:
        raise ValueError(f"sample must be a whole number >= 0, got {sample!r}")
    messages = _messages(prompt, system)
    gen = {"temperature": temperature, "max_tokens": max_tokens, **params}
    key = cache_key(
        {
            "model": model,
            "messages": messages,
            "params": {k: v for k, v in gen.items() if k not in SECRET_FIELDS},
            "schema": structured.schema_json(schema) if schema is not None else None,
            "sample": sample,
        }
    )
    return _Request(model, messages, gen, schema, sample, settings or DEFAULT_SETTINGS, key)


def _transient(e: BaseException) -> bool:
    """Rate limits, timeouts, 5xx and connection errors are retried; nothing else is."""
    lm = litellm()
    if isinstance(e, (lm.AuthenticationError, lm.BadRequestError, lm.NotFoundError, lm.PermissionDeniedError)):
        return False
    if isinstance(e, (lm.RateLimitError, lm.Timeout, lm.APIConnectionError, lm.InternalServerError,
                      lm.ServiceUnavailableError)):
        return True
    status = getattr(e, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _cost(model: str, response: Any) -> float | None:
    if is_own(model):
        return 0.0  # in-process models cost nothing by construction
    try:
        return float(litellm().completion_cost(completion_response=response))
    except Exception:
        return None  # litellm does not know this model's price: unknown, not zero


def _protocol(req: _Request) -> Generator[_Call | _Sleep, Any, Completion]:
    """The call, step by step: yields provider calls and sleeps, returns the Completion."""
    s = req.settings
    messages = list(req.messages)
    kwargs: dict[str, Any] = {k: v for k, v in req.params.items() if v is not None}
    if s.timeout_s is not None:
        kwargs.setdefault("timeout", s.timeout_s)
    if req.schema is not None:
        if native_schema(req.model):
            kwargs["response_format"] = structured.response_format(req.schema)
        else:
            messages.append({"role": "user", "content": structured.schema_instruction(req.schema)})
    if is_own(req.model):
        kwargs["seed"] = kwargs.get("seed", req.sample)

    attempts, in_tok, out_tok, latency, cost = 0, 0, 0, 0.0, 0.0
    tokens_known, cost_known = True, True
    failures: list[dict[str, Any]] = []
    for _ in range(max(1, s.parse_attempts if req.schema is not None else 1)):
        reply_key = None
        if req.schema is not None:
            reply_key = cache_key({"reply_of": req.key, "messages": messages})
        for retry in range(s.retries + 1):
            attempts += 1
            t0 = time.perf_counter()
            try:
                reply: _Reply = yield _Call({"model": req.model, "messages": messages, **kwargs}, reply_key)
            except Exception as e:
                latency += time.perf_counter() - t0
                _raise_if_auth(req.model, e, attempts)
                if not _transient(e):
                    raise ProviderError(req.model, f"{type(e).__name__}: {e}", attempts=attempts,
                                        retryable=False) from e
                if retry == s.retries:
                    raise ProviderError(req.model, f"{type(e).__name__}: {e}", attempts=attempts,
                                        retryable=True) from e
                delay = min(s.backoff_max_s, s.backoff_s * 2**retry) * (0.5 + random.random())
                yield _Sleep(delay)
                continue
            latency += time.perf_counter() - t0
            break
        if not reply.replayed:  # a replayed reply was paid for when it was first made
            if reply.input_tokens is None:
                tokens_known = False
            else:
                in_tok += reply.input_tokens
                out_tok += reply.output_tokens or 0
            if reply.cost_usd is None:
                cost_known = False
            else:
                cost += reply.cost_usd
        text = reply.text
        done = Completion(
            model=req.model, text=text, input_tokens=in_tok if tokens_known else None,
            output_tokens=out_tok if tokens_known else None, cost_usd=cost if cost_known else None,
            latency_s=latency, attempts=attempts, sample=req.sample, key=req.key,
            finish_reason=reply.finish_reason, logprobs=reply.logprobs, response_model=reply.response_model,
            endpoint=reply.endpoint,
        )
        if req.schema is None:
            return done
        try:
            done.parsed = structured.parse(text, req.schema)
            return done
        except ValueError as e:
            failures.append({"raw": text, "error": str(e), "finish_reason": done.finish_reason})
            messages = messages + [{"role": "assistant", "content": text}, structured.repair_message(str(e))]
    assert req.schema is not None
    raise ParseError(req.model, req.schema.__name__, failures)


def _raise_if_auth(model: str, e: BaseException, attempts: int) -> None:
    lm = litellm()
    if isinstance(e, lm.AuthenticationError):
        from .providers import key_env_vars

        missing = key_env_vars(model)
        if missing:
            raise MissingKeyError(model, missing) from e
        raise ProviderError(model, f"authentication failed: {e}", attempts=attempts, retryable=False) from e


def _reply_of(model: str, response: Any) -> _Reply:
    usage: Any = getattr(response, "usage", None)
    known = usage is not None and getattr(usage, "prompt_tokens", None) is not None
    choice = response.choices[0]
    return _Reply(
        text=choice.message.content or "",
        input_tokens=int(usage.prompt_tokens or 0) if known else None,
        output_tokens=int(usage.completion_tokens or 0) if known else None,
        cost_usd=_cost(model, response), finish_reason=getattr(choice, "finish_reason", None),
        logprobs=logprobs_of(getattr(choice, "logprobs", None)), response_model=reported_model(model, response),
        endpoint=endpoint(model, response),
    )


def _replayed(store: Cache | None, op: _Call, on_token: TokenHandler | None) -> _Reply | None:
    if store is None or op.reply_key is None:
        return None
    reply = store.get(op.reply_key, _Reply)
    if reply is not None:
        reply.replayed = True
        if on_token is not None:
            on_token(reply.text)
    return reply


def _keep(store: Cache | None, op: _Call, reply: _Reply) -> _Reply:
    if store is not None and op.reply_key is not None:
        store.set(op.reply_key, reply)
    return reply


def _fetch(op: _Call, store: Cache | None, on_token: TokenHandler | None) -> _Reply:
    """One provider call (blocking), or its cached reply."""
    replay = _replayed(store, op, on_token)
    if replay is not None:
        return replay
    lm = litellm()
    if on_token is None or op.kwargs.get("logprobs"):  # log-probabilities come with a whole reply only
        response = lm.completion(**op.kwargs)
        if on_token is not None:
            _send_whole(response, on_token)
    else:
        chunks = []
        for chunk in lm.completion(**op.kwargs, stream=True, stream_options={"include_usage": True}):
            chunks.append(chunk)
            _send_piece(chunk, on_token)
        response = lm.stream_chunk_builder(chunks, messages=op.kwargs["messages"])
    return _keep(store, op, _reply_of(op.kwargs["model"], response))


async def _afetch(op: _Call, store: Cache | None, on_token: TokenHandler | None) -> _Reply:
    """One provider call (async), or its cached reply."""
    replay = _replayed(store, op, on_token)
    if replay is not None:
        return replay
    lm = litellm()
    if on_token is None or op.kwargs.get("logprobs"):  # log-probabilities come with a whole reply only
        response = await lm.acompletion(**op.kwargs)
        if on_token is not None:
            _send_whole(response, on_token)
    else:
        chunks = []
        stream = await lm.acompletion(**op.kwargs, stream=True, stream_options={"include_usage": True})
        async for chunk in stream:
            chunks.append(chunk)
            _send_piece(chunk, on_token)
        response = lm.stream_chunk_builder(chunks, messages=op.kwargs["messages"])
    return _keep(store, op, _reply_of(op.kwargs["model"], response))


def _send_whole(response: Any, on_token: TokenHandler) -> None:
    on_token(response.choices[0].message.content or "")


def _send_piece(chunk: Any, on_token: TokenHandler) -> None:
    choices = getattr(chunk, "choices", None)
    if choices:
        text = getattr(choices[0].delta, "content", None)
        if text:
            on_token(text)


def _resolve_cache(cache: CacheArg) -> Cache | None:
    if cache is False:
        return None
    if cache is None or cache is True:
        return open_cache()
    if isinstance(cache, Cache):
        return cache
    return open_cache(cache)


def _from_cache(store: Cache | None, req: _Request) -> Completion | None:
    if store is None:
        return None
    hit = store.get(req.key)
    if hit is None:
        return None
    if req.schema is not None:
        try:
            hit.parsed = structured.parse(hit.text, req.schema)
        except ValueError:
            return None  # the schema changed shape under the same JSON: a miss, never a crash
    hit.cache_hit = True
    return hit


def complete(
    model: str,
    prompt: Prompt,
    *,
    schema: type[BaseModel] | None = None,
    system: str | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    sample: int = 0,
    cache: CacheArg = None,
    settings: Settings | None = None,
    on_token: TokenHandler | None = None,
    **params: Any,
) -> Completion:
    """Call a model once (or answer from the cache) and return a Completion.

    Works in scripts and inside a running Jupyter kernel (it never starts an event loop).

    Args:
        model: a litellm model name ('gpt-4o-mini', 'anthropic/...', 'ollama/...'), 'local/smollm2',
            'local/<path>.gguf', or 'fake/<id>' for a scripted model.
        prompt: the user prompt, or a list of chat messages.
        schema: a pydantic model; the reply is validated into it (`Completion.parsed`).
        system: a system prompt put first.
        temperature: sampling temperature.
        max_tokens: a cap on the reply's tokens.
        sample: the draw index; different samples are independent cached draws.
        cache: None/True for the default cache, False for none, or a directory or Cache.
        settings: retries, re-asks, timeouts, concurrency.
        on_token: called with each piece of text as the model streams it (a cache hit sends the whole
            text once); streaming does not change the cache key.
        **params: any further litellm generation parameter (they enter the cache key); `api_key` and
            `api_base` are passed on but never enter the key or the disk.

    Raises:
        UnknownModelError, MissingKeyError, ProviderError, ParseError.
    """
    req = _build(model, prompt, schema=schema, system=system, temperature=temperature,
                 max_tokens=max_tokens, sample=sample, settings=settings, params=params)
    store = _resolve_cache(cache)
    hit = _from_cache(store, req)
    if hit is not None:
        if on_token is not None:
            on_token(hit.text)
        return hit
    check_model(model, params)
    gen = _protocol(req)
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            done: Completion = stop.value
            break
        value, error = None, None
        if isinstance(op, _Sleep):
            time.sleep(op.seconds)
            continue
        try:
            value = _fetch(op, store, on_token)
        except Exception as e:
            error = e
    if store is not None:
        store.set(req.key, done)
    return done


class _Limiter:
    """Calls in flight for one model in one event loop; each call waits until fewer than ITS OWN limit
    are in flight, so the limit follows each call's settings (not whichever call came first)."""

    def __init__(self) -> None:
        self.active = 0
        self.changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def slot(self, limit: int) -> AsyncIterator[None]:
        async with self.changed:
            await self.changed.wait_for(lambda: self.active < max(1, limit))
            self.active += 1
        try:
            yield
        finally:
            async with self.changed:
                self.active -= 1
                self.changed.notify_all()


_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Limiter]] = (
    weakref.WeakKeyDictionary()
)


def _slot(model: str, settings: Settings) -> contextlib.AbstractAsyncContextManager[None]:
    """A place among the model's calls in flight, under this call's limit."""
    per_loop = _limiters.setdefault(asyncio.get_running_loop(), {})
    limiter = per_loop.setdefault(model, _Limiter())
    return limiter.slot(settings.per_model_concurrency.get(model, settings.max_concurrency))


async def acomplete(
    model: str,
    prompt: Prompt,
    *,
    schema: type[BaseModel] | None = None,
    system: str | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    sample: int = 0,
    cache: CacheArg = None,
    settings: Settings | None = None,
    on_token: TokenHandler | None = None,
    **params: Any,
) -> Completion:
    """The async twin of `complete` (same arguments); at most `max_concurrency` calls per model at once."""
    req = _build(model, prompt, schema=schema, system=system, temperature=temperature,
                 max_tokens=max_tokens, sample=sample, settings=settings, params=params)
    store = _resolve_cache(cache)
    hit = _from_cache(store, req)
    if hit is not None:
        if on_token is not None:
            on_token(hit.text)
        return hit
    check_model(model, params)
    gen = _protocol(req)
    value: Any = None
    error: BaseException | None = None
    async with _slot(model, req.settings):
        while True:
            try:
                op = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                done: Completion = stop.value
                break
            value, error = None, None
            if isinstance(op, _Sleep):
                await asyncio.sleep(op.seconds)
                continue
            try:
                value = await _afetch(op, store, on_token)
            except Exception as e:
                error = e
    if store is not None:
        store.set(req.key, done)
    return done
