"""promptlab's in-process models (`local/...`, `fake/...`) called directly, without litellm.

A request to an in-process model is answered here, by its provider (`promptlab.llm.providers.own_models`): the scripted
model (`promptlab.llm.providers.scripted`) or the local model (the batching engine, `promptlab.llm.local.engine`, or the instance
pool, `promptlab.llm.local.pool`) makes a
`Generated`, which `promptlab.llm.call.transport.own_reply` reads into the same `Reply` litellm's path made of it
(text, token counts, finish reason, log-probabilities, cost 0.0, the reported model and the endpoint), so the
`Completion`, its cache key and its record are unchanged; litellm's CustomLLM round trip (about 4 ms of CPU
per call, and the text converted three times) is gone.

Blocking calls run the model in the caller's thread; async calls run a scripted model or the instance pool
in `MODEL_THREADS` worker threads (a scripted model may block), and wait for the engine without a thread.
The call's `timeout` is the engine's deadline for that sequence, counted from its admission into the batch
(`Watch` says when a caller gives up on a hung worker); the scripted model and the instance pool are not cut
short.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import queue
import time
from collections.abc import Callable
from typing import Any

from ..call.completion import Generated, logprobs_of
from ..call.failures import InvalidReply
from ..providers.resolved import ResolvedModel
from . import engine
from . import pool as local

MODEL_THREADS = 64
"""Worker threads that run scripted models and the instance pool for async callers (asyncio's default
executor has only cores + 4 threads, which would hide waiting requests from the pool's scheduler)."""
NOT_PARAMS = frozenset(
    {"model", "messages", "timeout", "api_key", "api_base", "base_url", "num_retries", "max_retries", "stream"}
)
"""Request fields that say how a request is made, not what the model is asked: not passed to the model."""

HUNG_GRACE_S = 30.0
"""How much longer than a call's timeout a caller waits on a silent engine worker before giving up on it. The
worker itself ends a sequence at its timeout (counted from its admission into the batch) and, while it
decodes, says it is alive every `engine_worker.HEARTBEAT_S`: a worker that sends nothing for the call's
timeout plus this grace is hung in native code, whether the call is queued or decoding."""

TokenHandler = Callable[[str], None]


@functools.cache
def model_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The executor of in-process model calls (made on first use; `MODEL_THREADS` threads)."""
    return concurrent.futures.ThreadPoolExecutor(MODEL_THREADS, thread_name_prefix="promptlab-model")


def params_of(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The generation parameters of a request (None values left out, as litellm left them out)."""
    return {k: v for k, v in kwargs.items() if k not in NOT_PARAMS and v is not None}


def _engine_request(model: ResolvedModel, kwargs: dict[str, Any], stream: bool) -> tuple[engine.Engine, dict[str, Any]]:
    asked = params_of(kwargs)
    path = local.resolve_model_path(model.model_id)  # the GGUF file `local/<name>` names
    params = local.engine_params(asked)
    if kwargs.get("timeout") is not None:
        params["timeout"] = float(kwargs["timeout"])  # the worker counts it from the call's admission
    params["stream"] = stream
    return engine.engine_for(path, local.N_CTX), params


def _outcome(model: ResolvedModel, event: tuple[Any, ...], model_file: str) -> Generated:
    """The Generated of an engine's last event, or the exception it stands for."""
    kind = event[0]
    if kind == "done":
        body = event[2]
        return Generated(
            text=body["text"],
            usage=tuple(body["usage"]),  # type: ignore[arg-type]
            finish_reason=body["finish_reason"],
            logprobs=logprobs_of({"content": body["logprobs"]}) if body["logprobs"] is not None else None,
            model=model_file,
        )
    if kind == "crash":
        raise engine.LocalModelCrashed(event[2])
    what, message = event[2], event[3]
    target = model.target
    if what == "timeout":
        raise TimeoutError(f"{target}: {message}")
    if what == "bad_request":
        raise ValueError(f"{target}: {message}")
    raise InvalidReply(f"{target}: {message}")


class Watch:
    """When a caller gives up on the engine's worker: it has sent nothing (no event, no heartbeat) for the
    call's timeout plus `HUNG_GRACE_S` since the call was submitted, or the call was admitted longer ago than
    that and the worker has not ended it. A call waiting in the queue behind a working batch waits on."""

    def __init__(self, model: ResolvedModel, eng: engine.Engine, timeout: float | None) -> None:
        self.target, self.eng = model.target, eng
        self.limit = (timeout or 0.0) + HUNG_GRACE_S
        self.since = time.monotonic()
        self.admitted: float | None = None
        self.bounded = timeout is not None

    def seen(self, event: tuple[Any, ...]) -> None:
        if event[0] == "admitted":
            self.admitted = time.monotonic()

    def left(self) -> float:
        """Seconds to wait for the next event before giving up (raises TimeoutError when none are left)."""
        silent = self.limit - (time.monotonic() - max(self.since, self.eng.heard))
        running = self.limit - (time.monotonic() - self.admitted) if self.admitted and self.bounded else silent
        left = min(silent, running)
        if left <= 0:
            why = "sent nothing" if silent <= 0 else "did not end the call"
            raise TimeoutError(f"{self.target}: the local model's worker {why} within {self.limit:g}s (hung?)")
        return left


def _engine_generate(model: ResolvedModel, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Generated:
    eng, params = _engine_request(model, kwargs, on_token is not None)
    call = engine.Pending()
    rid = eng.submit(kwargs["messages"], params, call)
    watch = Watch(model, eng, params.get("timeout"))
    try:
        while True:
            try:
                event = call.events.get(timeout=watch.left())
            except queue.Empty:
                continue  # `left` says whether to wait on
            watch.seen(event)
            if event[0] == "piece" and on_token is not None:
                on_token(event[2])
            elif event[0] not in engine.PASSING:
                return _outcome(model, event, eng.path.name)
    except BaseException:
        eng.cancel(rid)
        raise


async def _engine_agenerate(model: ResolvedModel, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Generated:
    eng, params = _engine_request(model, kwargs, on_token is not None)
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()

    def wake() -> None:
        loop.call_soon_threadsafe(ready.set)

    call = engine.Pending(notify=wake)
    rid = eng.submit(kwargs["messages"], params, call)
    watch = Watch(model, eng, params.get("timeout"))
    try:
        while True:
            try:
                await asyncio.wait_for(ready.wait(), watch.left())
            except TimeoutError:
                continue  # `left` says whether to wait on
            ready.clear()
            while not call.events.empty():
                event = call.events.get_nowait()
                watch.seen(event)
                if event[0] == "piece" and on_token is not None:
                    on_token(event[2])
                elif event[0] not in engine.PASSING:
                    return _outcome(model, event, eng.path.name)
    except BaseException:
        eng.cancel(rid)
        raise


def _here(model: ResolvedModel, kwargs: dict[str, Any], on_token: TokenHandler | None) -> Generated:
    """A scripted model's or the instance pool's reply, made in this thread (pieces to `on_token`)."""
    provider, name = model.provider, model.model_id
    params, messages = params_of(kwargs), kwargs["messages"]
    if on_token is None or params.get("logprobs"):
        made: Generated = provider.reply(name, messages, params)
        return made
    text: list[str] = []
    for piece in provider.reply_stream(name, messages, params):
        if piece["text"]:
            text.append(piece["text"])
            on_token(piece["text"])
        if "usage" in piece:
            reported = provider.stream_model(name)  # a stream reports no id
            return Generated("".join(text), piece["usage"], piece.get("finish_reason") or "stop", None, reported)
    raise InvalidReply("the in-process model's stream ended without its last piece")


def generate(
    model: ResolvedModel, kwargs: dict[str, Any], on_token: TokenHandler | None = None
) -> tuple[Generated, bool]:
    """Answer one request to an in-process model in this thread, and say whether its text went to `on_token`
    in pieces as it was made (when a handler is given and no log-probabilities are asked for)."""
    handler = on_token if on_token is not None and not kwargs.get("logprobs") else None
    if model.batched:
        made = _engine_generate(model, kwargs, handler)
    else:
        made = _here(model, kwargs, handler)
    return made, handler is not None


async def agenerate(
    model: ResolvedModel, kwargs: dict[str, Any], on_token: TokenHandler | None = None
) -> tuple[Generated, bool]:
    """`generate` for async callers: the engine is awaited; the others run in `model_threads()`."""
    handler = on_token if on_token is not None and not kwargs.get("logprobs") else None
    if model.batched:
        made = await _engine_agenerate(model, kwargs, handler)
    else:
        loop = asyncio.get_running_loop()
        put: TokenHandler | None = None
        if handler is not None:
            shown = handler

            def put(text: str) -> None:
                loop.call_soon_threadsafe(shown, text)

        run = functools.partial(_here, model, kwargs, put)
        made = await loop.run_in_executor(model_threads(), contextvars.copy_context().run, run)
    return made, handler is not None


__all__ = ["MODEL_THREADS", "agenerate", "generate", "model_threads", "params_of"]
