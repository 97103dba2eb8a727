"""The one call path: `complete` and `acomplete`, over litellm, cached, structured, retried.

A call's arguments become a `promptlab.llm.call.request.Request` (alias resolved, cache key computed); its steps are
the one generator `promptlab.llm.call.steps.protocol`, which yields provider calls and sleeps. Here it is driven
twice over: `complete` with blocking calls and `time.sleep`, so it works inside a running Jupyter event loop,
and `acomplete` with async calls and `asyncio.sleep`. The drivers read and write the cache, hold the limits
and charge the spending cap; the protocol never sees them.

Each request goes out through `promptlab.llm.call.transport`: litellm, or, for a plain chat request to an
OpenAI-compatible endpoint (`openai/<name>` with an api_base), a direct HTTP post that skips litellm's
per-request CPU (`Settings(transport="litellm")` turns that off; see `promptlab.llm.providers.openai_http`). The async path
writes the cache from a worker thread, so SQLite's commit never holds up the event loop.

A model alias (`promptlab.llm.providers.aliases`) is resolved before any model call: its target model, api_base,
extra params and (at call time, from its `api_key_env`) key; its limits (concurrency per endpoint, rpm,
tpm: `promptlab.llm.concurrency.limits`), its price and its `native_schema` choice. A call with an api_base adds the
endpoint identity to its cache key; the Completion's `model` is the name the caller wrote.

Under a spending cap (`promptlab.llm.spending.cap`, e.g. a sweep's `max_cost`) each provider request is checked first
and refused with SpendingCapExceeded when it would pass the cap; what a paid reply cost goes to the cap's ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, TypeVar, Union

from pydantic import BaseModel

from ...errors import CacheUnavailableError
from ..cache.backend import CacheBackend
from ..cache.location import open_cache
from ..concurrency.limits import arate_wait, rate_wait, slot
from ..concurrency.single_flight import ASYNC_FLIGHTS, THREAD_FLIGHTS
from ..providers.litellm_lazy import litellm, litellm_loaded
from ..spending.cap import SpendingCap, gate
from . import structured
from .completion import Completion
from .failures import invalid_reply_of
from .preflight import check_model
from .replay import replay_only
from .request import Prompt, Request, build_request
from .settings import Settings
from .steps import ProviderCall, Sleep, priced, protocol
from .transport import Reply, TokenHandler, afetch, fetch

F = TypeVar("F", Reply, Completion)
"""What a cache lookup finds: a provider's Reply, a whole Completion, or nothing."""
CacheArg = Union[CacheBackend, str, Path, bool, None]
"""None or True: the default cache; False: no cache; a directory, a URL (redis://host:port/db) or a cache
object: that one."""


def _stored_reply(store: CacheBackend | None, op: ProviderCall) -> Reply | None:
    if store is None or op.reply_key is None:
        return None
    reply = store.get(op.reply_key, Reply)
    if reply is not None:
        reply.replayed = True
    return reply


def _told(found: F | None, on_token: TokenHandler | None) -> F | None:
    """`found` (a cached Reply or Completion, or None), its whole text sent to `on_token` first when found."""
    if found is not None and on_token is not None:
        on_token(found.text)
    return found


def _replayed(store: CacheBackend | None, op: ProviderCall, on_token: TokenHandler | None) -> Reply | None:
    return _told(_stored_reply(store, op), on_token)


async def _areplayed(store: CacheBackend | None, op: ProviderCall, on_token: TokenHandler | None) -> Reply | None:
    """`_replayed` with the lookup in a worker thread (never holding the event loop); `on_token` on the loop."""
    reply = None if store is None or op.reply_key is None else await asyncio.to_thread(_stored_reply, store, op)
    return _told(reply, on_token)


def _keep(store: CacheBackend | None, op: ProviderCall, reply: Reply) -> Reply:
    if store is not None and op.reply_key is not None:
        store.add(op.reply_key, reply)
    return reply


def _charge(cap: SpendingCap, req: Request, request: dict[str, Any], reply: Reply) -> None:
    """Charge a paid reply to the spending cap: its cost, or an estimate when the cost is unknown."""
    paid = priced(req, reply)
    cap.charge(
        req.resolved, paid.cost_usd, paid.input_tokens, paid.output_tokens, request=request, reply_text=paid.text
    )


def _charge_refused(cap: SpendingCap | None, req: Request, request: dict[str, Any], e: Exception) -> Exception | None:
    """A reply refused for its figures (a count out of range: `InvalidReply.paid_text`) was delivered and is
    billed: charge its estimate to the spending cap. Returns the charge's own failure (a full results disk), if
    any, to be raised once the call has ended."""
    invalid = invalid_reply_of(e) if cap is not None else None
    if cap is None or invalid is None or invalid.paid_text is None:
        return None
    try:
        cap.charge(req.resolved, None, request=request, reply_text=invalid.paid_text)
    except Exception as failed:  # noqa: BLE001 -- raised by the driver once the call has ended
        return failed
    return None


def _resolve_cache(cache: CacheArg) -> CacheBackend | None:
    if cache is False:
        return None
    if cache is None or cache is True:
        return open_cache()
    if isinstance(cache, CacheBackend):
        return cache
    return open_cache(cache)


def _from_cache(store: CacheBackend | None, req: Request) -> Completion | None:
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


def _answered(store: CacheBackend | None, req: Request, on_token: TokenHandler | None) -> Completion | None:
    """The cached Completion of `req`, its whole text sent to `on_token` (None on a miss)."""
    return _told(_from_cache(store, req), on_token)


async def _aanswered(store: CacheBackend | None, req: Request, on_token: TokenHandler | None) -> Completion | None:
    """`_answered` with the lookup in a worker thread: a read that waits on the cache (a busy Redis, a locked
    database) or parses a large record never holds the event loop; `on_token` is called on the loop."""
    return _told(None if store is None else await asyncio.to_thread(_from_cache, store, req), on_token)


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
    req = build_request(
        model,
        prompt,
        schema=schema,
        system=system,
        temperature=temperature,
        max_tokens=max_tokens,
        sample=sample,
        settings=settings,
        params=params,
    )
    store = _resolve_cache(cache)
    hit = _answered(store, req, on_token)
    if hit is not None:
        return hit
    check_model(req.resolved, params)
    with THREAD_FLIGHTS.hold(req.key) if store is not None else contextlib.nullcontext():
        hit = _answered(store, req, on_token)  # another thread may have made this very call while we waited
        return hit if hit is not None else _drive(req, store, on_token)


def needs_litellm(req: Request) -> bool:
    """Whether litellm's one-time import (seconds, more under load) is still to come for this call: a hosted model
    needs it (its checks, transport, price and errors); replay only sends nothing. `acomplete` spends it in a worker
    thread before the call's checks, so it never holds the event loop (nor eats the deadlines of the calls waiting on
    it); `preflight.warm_up` spends it before a process's first call, so that call's deadline counts from the call."""
    return not req.resolved.in_process and not litellm_loaded() and not replay_only()


def _drive(req: Request, store: CacheBackend | None, on_token: TokenHandler | None) -> Completion:
    """Run the protocol with blocking calls and store the Completion (write-once). A paid reply whose charge to
    the spending cap fails (a full results disk: `ResultsDiskFull`) is finished and stored before the error is
    raised, so a resume replays it and never pays for it again."""
    gen = protocol(req)
    value: Any = None
    error: BaseException | None = None
    unbilled: Exception | None = None
    while True:
        try:
            op = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            done: Completion = stop.value
            break
        value, error = None, None
        if isinstance(op, Sleep):
            time.sleep(op.seconds)
            continue
        # the cache is read and written outside the provider's try: a cache outage is never a provider error
        value, cap = _replayed(store, op, on_token), None
        if value is None:
            try:
                rpm, tpm = req.resolved.rates
                if rpm or tpm:
                    rate_wait(req.resolved.endpoint, rpm, tpm, op.kwargs)
                cap = gate(req.resolved, op.kwargs)  # SpendingCapExceeded before a request that would pass the cap
                reply = fetch(req, op.kwargs, on_token)
            except Exception as e:
                error, unbilled = e, unbilled or _charge_refused(cap, req, op.kwargs, e)
                continue
            value = _keep(store, op, reply)
            if cap is not None:
                try:
                    _charge(cap, req, op.kwargs, reply)
                except Exception as e:  # noqa: BLE001 -- raised once the paid reply is stored
                    unbilled = unbilled or e
    settled = _settle(store, req, done)
    if unbilled is not None:
        raise unbilled
    return settled


def _settle(store: CacheBackend | None, req: Request, done: Completion) -> Completion:
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
    return first.model_copy(
        update={
            "cache_hit": False,
            "spent_input_tokens": done.billed_input_tokens,
            "spent_output_tokens": done.billed_output_tokens,
            "spent_cost_usd": done.billed_cost_usd,
        }
    )


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
    req = build_request(
        model,
        prompt,
        schema=schema,
        system=system,
        temperature=temperature,
        max_tokens=max_tokens,
        sample=sample,
        settings=settings,
        params=params,
    )
    store = _resolve_cache(cache)
    hit = await _aanswered(store, req, on_token)
    if hit is not None:
        return hit
    if needs_litellm(req):  # its checks import it: in a worker thread, so the other calls on the loop go on
        await asyncio.to_thread(litellm)
    check_model(req.resolved, params)
    async with ASYNC_FLIGHTS.hold(req.key) if store is not None else contextlib.nullcontext(False) as waited:
        # an identical call in flight finished while we waited: its result
        hit = await _aanswered(store, req, on_token) if waited else None
        return hit if hit is not None else await _adrive(req, store, on_token)


HEAVY_REPLY_CHARS = 50_000
"""A structured reply at least this long is parsed in a worker thread (extraction is linear, but 8 MiB of it
would hold the event loop, and every call in flight on it, for a while)."""


def _heavy(req: Request, value: Any) -> bool:
    return req.schema is not None and isinstance(value, Reply) and len(value.text) >= HEAVY_REPLY_CHARS


def _step(gen: Any, value: Any) -> Any:
    """`gen.send(value)` for a worker thread: the StopIteration that ends it is returned, since a future cannot
    carry one."""
    try:
        return gen.send(value)
    except StopIteration as stop:
        return stop


def _ended(op: Any) -> Any:
    if isinstance(op, StopIteration):
        raise op
    return op


async def _adrive(req: Request, store: CacheBackend | None, on_token: TokenHandler | None) -> Completion:
    """Run the protocol with async calls (within the model's concurrency limit) and store the Completion;
    cache writes run in a worker thread (SQLite's commit off the event loop)."""
    gen = protocol(req)
    value: Any = None
    error: BaseException | None = None
    unbilled: Exception | None = None
    rpm, tpm = req.resolved.rates
    async with slot(req.resolved, req.concurrency):
        while True:
            try:
                if error is not None:
                    op = gen.throw(error)
                elif _heavy(req, value):  # a large structured reply is parsed off the event loop
                    op = _ended(await asyncio.to_thread(_step, gen, value))
                else:
                    op = gen.send(value)
            except StopIteration as stop:
                done: Completion = stop.value
                break
            value, error = None, None
            if isinstance(op, Sleep):
                await asyncio.sleep(op.seconds)
                continue
            value, cap = (
                await _areplayed(store, op, on_token),
                None,
            )  # outside the try: an outage is no provider error
            if value is None:
                try:
                    if rpm or tpm:
                        await arate_wait(req.resolved.endpoint, rpm, tpm, op.kwargs)
                    cap = gate(req.resolved, op.kwargs)  # SpendingCapExceeded before a request that would pass the cap
                    reply = await afetch(req, op.kwargs, on_token)
                except Exception as e:
                    error = e
                    if cap is not None:  # a refused reply's charge: a locked file update, off the event loop
                        unbilled = unbilled or await asyncio.to_thread(_charge_refused, cap, req, op.kwargs, e)
                    continue
                keep = store is not None and op.reply_key is not None  # else there is nothing to write
                value = await asyncio.to_thread(_keep, store, op, reply) if keep else reply
                if cap is not None:  # a locked file update: off the event loop
                    try:
                        await asyncio.to_thread(_charge, cap, req, op.kwargs, reply)
                    except Exception as e:  # noqa: BLE001 -- raised once the paid reply is stored
                        unbilled = unbilled or e
    settled = done if store is None else await asyncio.to_thread(_settle, store, req, done)
    if unbilled is not None:
        raise unbilled
    return settled


__all__ = ["CacheArg", "acomplete", "complete"]
