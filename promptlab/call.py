"""The one call path: `complete` and `acomplete`, over litellm, cached, structured, retried.

Both share one step-by-step protocol (`_protocol`, a generator that yields provider calls and sleeps);
`complete` drives it with blocking calls and `time.sleep`, so it works inside a running Jupyter event
loop, and `acomplete` drives it with async calls and `asyncio.sleep`.

Each request goes out through `promptlab.transport`: litellm, or, for a plain chat request to an
OpenAI-compatible endpoint (`openai/<name>` with an api_base), a direct HTTP post that skips litellm's
per-request CPU (`Settings(transport="litellm")` turns that off; see `promptlab.direct`). The async path
writes the cache from a worker thread, so SQLite's commit never holds up the event loop.

A model alias (`promptlab.models`) is resolved here, before any model call: its target model, api_base,
extra params and (at call time, from its `api_key_env`) key; its limits (concurrency per endpoint, rpm,
tpm: `promptlab.limits`), its price and its `native_schema` choice. A call with an api_base adds the
endpoint identity to its cache key; the Completion's `model` is the name the caller wrote.

Under a spending cap (`promptlab.budget`, e.g. a sweep's `max_cost`) each provider request is checked first
and refused with BudgetExceeded when it would pass the cap; what a paid reply cost goes to the cap's ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel

from . import structured
from .budget import gate
from .cache import SECRET_FIELDS, cache_key, open_cache
from .cache_backend import CacheBackend
from .completion import Completion
from .errors import BudgetExceeded, CacheUnavailableError, ConfigError, ParseError, ProviderError, describe_cause
from .failures import raise_if_auth, request_host, transient
from .flight import ASYNC_FLIGHTS, THREAD_FLIGHTS
from .limits import arate_wait, rate_wait, shared_concurrency, slot
from .models import (
    ModelAlias,
    api_key,
    endpoint_identity,
    get_alias,
    refuses_schema,
    remember_schema_support,
    schema_support,
)
from .providers import check_model, is_own, native_schema
from .reply import Figures, Reply
from .settings import DEFAULT_SETTINGS, Settings
from .transport import TokenHandler, afetch, fetch

Prompt = Union[str, list[dict[str, Any]]]
"""A user prompt as text, or a list of chat messages ({'role': ..., 'content': ...})."""
CacheArg = Union[CacheBackend, str, Path, bool, None]
"""None or True: the default cache; False: no cache; a directory, a URL (redis://host:port/db) or a cache
object: that one."""


@dataclass
class _Call:
    kwargs: dict[str, Any]
    reply_key: str | None = None
    """Structured calls cache every provider reply under this key, so a replay re-parses the same
    replies (a ParseError replays without model calls); the final Completion is cached as well."""


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
    target: str = ""
    """The litellm model the request goes to (an alias's `model`, else `model`)."""
    alias: ModelAlias | None = None
    """The alias `model` names, if it is one."""
    endpoint: str = ""
    """What the limits count against: '<target>@<provider>@<host>' with an api_base, else the target."""

    def concurrency(self) -> int:
        """Calls in flight allowed to this request's endpoint: the settings' override for the name written
        (or the target), else the alias's max_concurrency, else the settings' max_concurrency; shared."""
        s, overrides = self.settings, self.settings.per_model_concurrency
        if self.model in overrides or self.target in overrides or self.alias is None:
            limit = s.concurrency(self.model if self.model in overrides else self.target)
        else:
            limit = self.alias.max_concurrency or s.max_concurrency
        return shared_concurrency(limit)

    def rates(self) -> tuple[float | None, float | None]:
        """The alias's (rpm, tpm); (None, None) for a plain model name."""
        return (self.alias.rpm, self.alias.tpm) if self.alias is not None else (None, None)


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
    alias = get_alias(model)
    target = model
    if alias is not None:
        target = alias.model
        params = {**alias.params, **params}
        if alias.api_base and "api_base" not in params and "base_url" not in params:
            params["api_base"] = alias.api_base
    gen = {"temperature": temperature, "max_tokens": max_tokens, **params}
    payload = {
        "model": target,
        "messages": messages,
        "params": {k: v for k, v in gen.items() if k not in SECRET_FIELDS},
        "schema": structured.schema_json(schema) if schema is not None else None,
        "sample": sample,
    }
    base = gen.get("api_base") or gen.get("base_url")
    endpoint = target
    if base and not is_own(target):  # two servers with one model name never share replies (host only)
        payload["endpoint"] = endpoint_identity(target, str(base))
        endpoint = f"{target}@{payload['endpoint']}"
    return _Request(model, messages, gen, schema, sample, settings or DEFAULT_SETTINGS, cache_key(payload),
                    target=target, alias=alias, endpoint=endpoint)


def _schema_mode(req: _Request) -> str:
    """How the schema goes out: 'native' (response_format), 'prompt', or 'detect' (native, the prompt once
    the endpoint refuses it: an alias without a `native_schema` choice, `openai/` model with an api_base)."""
    alias = req.alias
    if alias is not None and alias.native_schema is None and req.target.startswith("openai/") and (
            req.params.get("api_base") or req.params.get("base_url")):
        learnt = schema_support(req.endpoint)
        return "detect" if learnt is None else ("native" if learnt else "prompt")
    return "native" if native_schema(req.model) else "prompt"


def _priced(req: _Request, reply: Reply) -> Reply:
    """The reply priced by the alias's own price, when it has one and the reply reports its tokens."""
    price = req.alias.price if req.alias is not None else None
    if price is None or reply.input_tokens is None:
        return reply
    return reply.model_copy(update={"cost_usd": price.cost(reply.input_tokens, reply.output_tokens or 0)})


def _protocol(req: _Request) -> Generator[_Call | _Sleep, Any, Completion]:
    """The call, step by step: yields provider calls and sleeps, returns the Completion."""
    s = req.settings
    messages = list(req.messages)
    kwargs: dict[str, Any] = {k: v for k, v in req.params.items() if v is not None}
    own = is_own(req.target)
    if not own:
        # promptlab owns retries: one request per attempt (litellm's and the OpenAI client's own off)
        kwargs.update(num_retries=0, max_retries=0)
    if req.alias is not None and "api_key" not in kwargs:
        key = api_key(req.alias)  # read now, from the alias's variable; never stored
        if key is not None:
            kwargs["api_key"] = key
    mode = _schema_mode(req) if req.schema is not None else "none"
    if req.schema is not None:
        if mode != "prompt":
            kwargs["response_format"] = structured.response_format(req.schema)
        else:
            messages.append({"role": "user", "content": structured.schema_instruction(req.schema)})
    if own:
        kwargs["seed"] = kwargs.get("seed", req.sample)

    started = time.monotonic()
    attempts, latency = 0, 0.0
    original, spent = Figures(), Figures()  # recorded figures of every reply; what this call paid now
    failures: list[dict[str, Any]] = []
    for _ in range(max(1, s.parse_attempts if req.schema is not None else 1)):
        reply_key = None
        if req.schema is not None:
            reply_key = cache_key({"reply_of": req.key, "messages": messages})
        retry = 0
        while True:
            left = None if s.deadline_s is None else s.deadline_s - (time.monotonic() - started)
            if left is not None and left <= 0:
                raise ProviderError(req.model, f"deadline of {s.deadline_s:g}s exceeded", attempts=attempts,
                                    retryable=True, host=request_host(req.target, req.params))
            timeout = s.timeout_s if left is None else min(left, s.timeout_s or left)
            call_kwargs = {**kwargs, "timeout": timeout} if timeout is not None else kwargs
            attempts += 1
            t0 = time.perf_counter()
            try:
                reply: Reply = yield _Call({"model": req.target, "messages": messages, **call_kwargs}, reply_key)
            except (BudgetExceeded, ConfigError):  # the budget refused: no request was made, nothing to retry
                raise
            except Exception as e:
                latency += time.perf_counter() - t0
                if mode == "detect" and refuses_schema(e):
                    # the server refused response_format: remember it, put the schema in the prompt instead
                    assert req.schema is not None
                    mode = "prompt"
                    remember_schema_support(req.endpoint, False)
                    kwargs.pop("response_format", None)
                    messages = messages + [{"role": "user", "content": structured.schema_instruction(req.schema)}]
                    reply_key = cache_key({"reply_of": req.key, "messages": messages})
                    continue
                raise_if_auth(req.model, e, attempts)
                cause = describe_cause(e, timeout)
                if not transient(e):
                    raise ProviderError(req.model, cause, attempts=attempts, retryable=False,
                                        host=request_host(req.target, req.params)) from e
                if retry == s.retries:
                    raise ProviderError(req.model, cause, attempts=attempts, retryable=True, host=request_host(req.target, req.params)) from e
                delay = min(s.backoff_max_s, s.backoff_s * 2**retry) * (0.5 + random.random())
                if s.deadline_s is not None:
                    delay = min(delay, max(0.0, s.deadline_s - (time.monotonic() - started)))
                retry += 1
                yield _Sleep(delay)
                continue
            latency += time.perf_counter() - t0
            break
        if mode == "detect" and not reply.replayed:
            mode = "native"
            remember_schema_support(req.endpoint, True)
        reply = _priced(req, reply)
        original.add(reply)
        if not reply.replayed:  # a replayed reply was paid for when it was first made
            spent.add(reply)
        text = reply.text
        done = Completion(
            model=req.model, text=text, input_tokens=original.input, output_tokens=original.output,
            cost_usd=original.cost, latency_s=latency, attempts=attempts, sample=req.sample, key=req.key,
            finish_reason=reply.finish_reason, logprobs=reply.logprobs, response_model=reply.response_model,
            endpoint=reply.endpoint,
        )
        if (spent.input, spent.output, spent.cost) != (original.input, original.output, original.cost):
            # some replies were replayed from the cache: this call spent less than the original did
            done.spent_input_tokens, done.spent_output_tokens = spent.input or 0, spent.output or 0
            done.spent_cost_usd = spent.cost
        if req.schema is None:
            return done
        try:
            done.parsed = structured.parse(text, req.schema)
            return done
        except ValueError as e:
            failures.append({"raw": text, "error": str(e), "finish_reason": done.finish_reason})
            messages = messages + [{"role": "assistant", "content": text}, structured.repair_message(str(e))]
    assert req.schema is not None
    raise ParseError(req.model, req.schema.__name__, failures, input_tokens=spent.input or 0,
                     output_tokens=spent.output or 0, cost_usd=spent.cost, requests=attempts)


def _replayed(store: CacheBackend | None, op: _Call, on_token: TokenHandler | None) -> Reply | None:
    if store is None or op.reply_key is None:
        return None
    reply = store.get(op.reply_key, Reply)
    if reply is not None:
        reply.replayed = True
        if on_token is not None:
            on_token(reply.text)
    return reply


def _keep(store: CacheBackend | None, op: _Call, reply: Reply) -> Reply:
    if store is not None and op.reply_key is not None:
        store.add(op.reply_key, reply)
    return reply


def _resolve_cache(cache: CacheArg) -> CacheBackend | None:
    if cache is False:
        return None
    if cache is None or cache is True:
        return open_cache()
    if isinstance(cache, CacheBackend):
        return cache
    return open_cache(cache)


def _from_cache(store: CacheBackend | None, req: _Request) -> Completion | None:
    if store is None:
        return None
    hit = store.get(req.key)
    if hit is None:
        return None
    if req.schema is not None:
        try:
            hit.parsed = structured.parse(hit.text, req.schema)
        except ValueError:
            store.discard(req.key)  # the schema changed shape under the same JSON: a miss, never a crash
            return None
    hit.cache_hit = True
    hit.model = req.model  # the name this caller wrote (an alias of the same endpoint shares the record)
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
        cache: None/True for the default cache ($PROMPTLAB_CACHE, else $PROMPTLAB_CACHE_DIR), False for
            none, or a directory, a URL (redis://host:port/db) or a cache object.
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
    with THREAD_FLIGHTS.hold(req.key) if store is not None else contextlib.nullcontext():
        hit = _from_cache(store, req)  # another thread may have made this very call while we waited
        if hit is not None:
            if on_token is not None:
                on_token(hit.text)
            return hit
        return _drive(req, store, on_token)


def _drive(req: _Request, store: CacheBackend | None, on_token: TokenHandler | None) -> Completion:
    """Run the protocol with blocking calls and store the Completion (write-once)."""
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
        # the cache is read and written outside the provider's try: a cache outage is never a provider error
        value = _replayed(store, op, on_token)
        if value is None:
            try:
                rpm, tpm = req.rates()
                if rpm or tpm:
                    rate_wait(req.endpoint, rpm, tpm, op.kwargs)
                budget = gate(req.model, op.kwargs)  # BudgetExceeded before a request that would pass the cap
                reply = fetch(op.kwargs, req.settings, on_token)
            except Exception as e:
                error = e
                continue
            if budget is not None:
                budget.charge(req.model, _priced(req, reply).cost_usd, reply.input_tokens, reply.output_tokens)
            value = _keep(store, op, reply)
    return _settle(store, req, done)


def _settle(store: CacheBackend | None, req: _Request, done: Completion) -> Completion:
    """Store the Completion, write-once. When another process stored this request first, adopt its record
    (every later replay then agrees with this call) and keep what this call spent as its billed figures."""
    if store is None or store.add(req.key, done):
        return done
    try:
        first = _from_cache(store, req)
    except CacheUnavailableError:  # the server went away after refusing our write: keep this call's record
        return done
    if first is None:
        return done
    return first.model_copy(update={
        "cache_hit": False, "spent_input_tokens": done.billed_input_tokens,
        "spent_output_tokens": done.billed_output_tokens, "spent_cost_usd": done.billed_cost_usd})


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
    async with ASYNC_FLIGHTS.hold(req.key) if store is not None else contextlib.nullcontext(False) as waited:
        # an identical call in flight finished while we waited: its result
        hit = _from_cache(store, req) if waited else None
        if hit is not None:
            if on_token is not None:
                on_token(hit.text)
            return hit
        return await _adrive(req, store, on_token)


async def _adrive(req: _Request, store: CacheBackend | None, on_token: TokenHandler | None) -> Completion:
    """Run the protocol with async calls (within the model's concurrency limit) and store the Completion;
    cache writes run in a worker thread (SQLite's commit off the event loop)."""
    gen = _protocol(req)
    value: Any = None
    error: BaseException | None = None
    rpm, tpm = req.rates()
    async with slot(req.endpoint, req.concurrency()):
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
            value = _replayed(store, op, on_token)  # outside the try: a cache outage is no provider error
            if value is None:
                try:
                    if rpm or tpm:
                        await arate_wait(req.endpoint, rpm, tpm, op.kwargs)
                    budget = gate(req.model, op.kwargs)  # BudgetExceeded before a request that would pass the cap
                    reply = await afetch(op.kwargs, req.settings, on_token)
                except Exception as e:
                    error = e
                    continue
                if budget is not None:  # a locked file update: off the event loop
                    await asyncio.to_thread(budget.charge, req.model, _priced(req, reply).cost_usd,
                                            reply.input_tokens, reply.output_tokens)
                keep = store is not None and op.reply_key is not None  # else there is nothing to write
                value = await asyncio.to_thread(_keep, store, op, reply) if keep else reply
    if store is None:
        return done
    return await asyncio.to_thread(_settle, store, req, done)
