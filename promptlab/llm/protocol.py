"""The steps of one call, apart from how they are carried out: `protocol(request)` is a generator that yields
`ProviderCall`s and `Sleep`s and returns the Completion (or raises ProviderError / ParseError).

`promptlab.llm.call` drives it twice over: `complete` with blocking requests and `time.sleep`, `acomplete` with
async requests and `asyncio.sleep`; the driver sends each provider reply back in (or throws the request's
exception in). So retries with backoff, the deadline, the per-request timeout, the schema (natively, in the
prompt, or detected: native until the endpoint refuses it; a served endpoint that refuses OpenAI's json_schema
form is given the json_object form before the prompt), re-asks after an unparseable reply and the
figures of every reply are written once, here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetExceeded, ConfigError, ParseError, ProviderError, describe_cause
from . import structured
from .aliases import SCHEMA_FORMS, api_key, refuses_schema, remember_schema_support, schema_form, schema_support
from .cache.keys import cache_key
from .completion import Completion
from .failures import raise_if_auth, request_host, transient
from .providers import is_own, native_schema
from .reply import Figures, Reply
from .request import Request


@dataclass
class ProviderCall:
    """A step: send these litellm kwargs to the provider and send the Reply back."""

    kwargs: dict[str, Any]
    reply_key: str | None = None
    """Structured calls cache every provider reply under this key, so a replay re-parses the same
    replies (a ParseError replays without model calls); the final Completion is cached as well."""


@dataclass
class Sleep:
    """A step: wait this long (a retry's backoff), then send None back."""

    seconds: float


def _served(req: Request) -> bool:
    """Whether the request goes to an OpenAI-compatible server of an alias (an `openai/` model with an api_base)."""
    return req.alias is not None and req.target.startswith("openai/") and bool(
        req.params.get("api_base") or req.params.get("base_url"))


def _schema_mode(req: Request) -> str:
    """How the schema goes out: 'native' (response_format), 'prompt', or 'detect' (native, the prompt once
    the endpoint refuses it: an alias without a `native_schema` choice, `openai/` model with an api_base)."""
    if _served(req) and req.alias is not None and req.alias.native_schema is None:
        learnt = schema_support(req.endpoint)
        return "detect" if learnt is None else ("native" if learnt else "prompt")
    return "native" if native_schema(req.model) else "prompt"


def priced(req: Request, reply: Reply) -> Reply:
    """The reply priced by the alias's own price, when it has one and the reply reports its tokens."""
    price = req.alias.price if req.alias is not None else None
    if price is None or reply.input_tokens is None:
        return reply
    return reply.model_copy(update={"cost_usd": price.cost(reply.input_tokens, reply.output_tokens or 0)})


def protocol(req: Request) -> Generator[ProviderCall | Sleep, Any, Completion]:
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
    served = _served(req)
    form = (schema_form(req.endpoint) if served else None) or SCHEMA_FORMS[0]  # the native form sent
    if req.schema is not None:
        if mode != "prompt":
            kwargs["response_format"] = structured.response_format(req.schema, form)
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
                reply: Reply = yield ProviderCall({"model": req.target, "messages": messages, **call_kwargs},
                                                  reply_key)
            except (BudgetExceeded, ConfigError):  # the budget refused: no request was made, nothing to retry
                raise
            except Exception as e:
                latency += time.perf_counter() - t0
                if mode in ("detect", "native") and served and refuses_schema(e):
                    assert req.schema is not None
                    if form != SCHEMA_FORMS[-1]:  # the server refused this form: try the next one
                        form = SCHEMA_FORMS[SCHEMA_FORMS.index(form) + 1]
                        kwargs["response_format"] = structured.response_format(req.schema, form)
                        continue
                    if mode == "native":  # told native: no fallback to the prompt, and no retry
                        raise ProviderError(req.model, "the server refused the schema in every response_format "
                                            f"form ({', '.join(SCHEMA_FORMS)}): {describe_cause(e, timeout)}",
                                            attempts=attempts, retryable=False,
                                            host=request_host(req.target, req.params)) from e
                    # the server refused response_format: remember it, put the schema in the prompt instead
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
                yield Sleep(delay)
                continue
            latency += time.perf_counter() - t0
            break
        if mode in ("detect", "native") and served and not reply.replayed:
            mode = "native"
            remember_schema_support(req.endpoint, True, form)
        reply = priced(req, reply)
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


__all__ = ["ProviderCall", "Sleep", "priced", "protocol"]
