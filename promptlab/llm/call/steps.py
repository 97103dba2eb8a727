"""The steps of one call, apart from how they are carried out: `protocol(request)` is a generator that yields
`ProviderCall`s and `Sleep`s and returns the Completion (or raises ProviderError / ParseError).

`promptlab.llm.call.entry` drives it twice over: `complete` with blocking requests and `time.sleep`, `acomplete` with
async requests and `asyncio.sleep`; the driver sends each provider reply back in (or throws the request's
exception in). The steps, each written once here:
- `prepare`: the request's arguments, with the schema natively (`response_format`), in the prompt, or detected
  (native until the endpoint refuses it);
- `send`: one reply, the request retried on transient errors with backoff (`backoff`, or the server's
  `Retry-After`) within the call's deadline, each request's timeout cut to what the deadline leaves;
- `schema_fallback`: a served endpoint that refuses OpenAI's json_schema form is given the json_object form,
  then the schema in the prompt (remembered per endpoint);
- `protocol`: the parse re-asks after an unparseable reply, and the figures of every reply.

The wait rule is our own (`backoff`, two lines) rather than tenacity's: tenacity's waits take its
`RetryCallState` and its retry loops would drive the request themselves, where here the two drivers do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError, ParseError, ProviderError, SpendingCapExceeded
from ..cache.keys import reply_key
from ..providers.aliases import SCHEMA_FORMS, refuses_schema
from ..spending.tally import total
from . import structured
from .completion import Completion
from .failures import MAX_RETRY_AFTER_S, describe_cause, raise_if_auth, retry_after, transient
from .replay import NotCached, replay_only
from .request import Request
from .settings import Settings
from .transport import Reply, bounded_cost
from .wire import MAX_LATENCY_S


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


@dataclass
class Call:
    """One call as it goes: what is sent, how the schema goes, and what was spent on requests so far."""

    req: Request
    kwargs: dict[str, Any]
    """litellm's arguments besides the model, the messages and the timeout."""
    messages: list[dict[str, Any]]
    mode: str
    """How the schema goes: 'none', 'native', 'prompt' or 'detect' (native until the endpoint refuses it)."""
    form: str
    """The native `response_format` form sent (an entry of SCHEMA_FORMS)."""
    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    """Provider requests made."""
    latency: float = 0.0
    """Seconds spent waiting on them."""

    def error(self, cause: str, *, retryable: bool) -> ProviderError:
        """A ProviderError of this call: model, host, cause and the requests made."""
        host = self.req.resolved.host
        return ProviderError(self.req.model, cause, attempts=self.attempts, retryable=retryable, host=host)

    def left(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        deadline = self.req.settings.deadline_s
        return None if deadline is None else deadline - (time.monotonic() - self.started)

    def reply_key(self) -> str | None:
        """Where a structured call caches the reply to the current messages."""
        if self.req.schema is None:
            return None
        return reply_key(self.req.key, self.messages)


def prepare(req: Request) -> Call:
    """The call's first request: its arguments, the key read now, the schema where the model takes it
    (`ResolvedModel.schema_mode`: natively, in the prompt, or detected)."""
    kwargs: dict[str, Any] = {k: v for k, v in req.params.items() if v is not None}
    m = req.resolved
    if m.in_process:  # an in-process model draws by the call's sample, and a scripted `respond` may read it
        kwargs["seed"] = kwargs.get("seed", req.sample)
        kwargs["sample"] = req.sample
    else:  # promptlab owns retries: one request per attempt (litellm's and the OpenAI client's own off)
        kwargs.update(num_retries=0, max_retries=0)
    if "api_key" not in kwargs and (m.in_process or not replay_only()):
        key = m.api_key()  # read now, from an alias's variable; never stored (replay only sends nothing)
        if key is not None:
            kwargs["api_key"] = key
    mode = "none" if req.schema is None else m.schema_mode()
    call = Call(req, kwargs, list(req.messages), mode, m.schema_form())
    if req.schema is not None:
        if call.mode != "prompt":
            kwargs["response_format"] = structured.response_format(req.schema, call.form)
        else:
            call.messages.append({"role": "user", "content": structured.schema_instruction(req.schema)})
    return call


def backoff(s: Settings, retry: int) -> float:
    """The wait before retry number `retry` + 1: exponential from `backoff_s`, at most `backoff_max_s`, with
    jitter (x 0.5-1.5)."""
    return min(s.backoff_max_s, s.backoff_s * 2**retry) * (0.5 + random.random())


def send(call: Call) -> Generator[ProviderCall | Sleep, Any, Reply]:
    """One reply: the request, retried on transient errors within the deadline (and sent again at once when a
    served endpoint refuses the schema's form)."""
    s, retry = call.req.settings, 0
    while True:
        left = call.left()
        if left is not None and left <= 0:
            raise call.error(f"deadline of {s.deadline_s:g}s exceeded", retryable=True)
        timeout = s.timeout_s if left is None else min(left, s.timeout_s or left)
        timed = {**call.kwargs, "timeout": timeout} if timeout is not None else call.kwargs
        call.attempts += 1
        t0 = time.perf_counter()
        try:
            reply: Reply = yield ProviderCall(
                {"model": call.req.resolved.target, "messages": call.messages, **timed}, call.reply_key()
            )
        except (SpendingCapExceeded, ConfigError, NotCached):  # refused (the cap, replay only): no request was made
            raise
        except Exception as e:
            call.latency += time.perf_counter() - t0
            if schema_fallback(call, e, timeout):
                continue
            yield Sleep(retry_wait(call, e, retry, timeout))
            retry += 1
            continue
        call.latency += time.perf_counter() - t0
        return reply


def retry_wait(call: Call, e: Exception, retry: int, timeout: float | None) -> float:
    """How long to wait before retrying after `e`; raises the call's error when it is not retried (not
    transient, retries spent, or a `Retry-After` that would pass the deadline)."""
    s = call.req.settings
    raise_if_auth(call.req.resolved, e, call.attempts)
    cause = describe_cause(e, timeout)
    if not transient(e):
        raise call.error(cause, retryable=False) from e
    if retry == s.retries:
        raise call.error(cause, retryable=True) from e
    delay, asked, left = backoff(s, retry), retry_after(e), call.left()
    if asked is not None and not asked <= MAX_RETRY_AFTER_S:  # NaN, infinite or past a day
        raise call.error(
            f"{cause}; the server asked to wait {asked:g}s (Retry-After), out of range (0 to {MAX_RETRY_AFTER_S:g}s)",
            retryable=True,
        ) from e
    if asked is not None:
        if left is not None and asked >= left:
            raise call.error(
                f"{cause}; the server asked to wait {asked:g}s (Retry-After), past the deadline of {s.deadline_s:g}s",
                retryable=True,
            ) from e
        delay = max(delay, asked)
    return delay if left is None else min(delay, max(0.0, left))


def schema_fallback(call: Call, e: Exception, timeout: float | None) -> bool:
    """When a served endpoint refused the schema's form: switch to the next form, or to the schema in the
    prompt (remembered for the endpoint), and say the request should go again (True); raises when told
    native and every form was refused."""
    req, schema = call.req, call.req.schema
    if schema is None or call.mode not in ("detect", "native") or not req.resolved.served or not refuses_schema(e):
        return False
    if call.form != SCHEMA_FORMS[-1]:  # the server refused this form: try the next one
        call.form = SCHEMA_FORMS[SCHEMA_FORMS.index(call.form) + 1]
        call.kwargs["response_format"] = structured.response_format(schema, call.form)
        return True
    if call.mode == "native":  # told native: no fallback to the prompt, and no retry
        raise call.error(
            "the server refused the schema in every response_format form "
            f"({', '.join(SCHEMA_FORMS)}): {describe_cause(e, timeout)}",
            retryable=False,
        ) from e
    call.mode = "prompt"
    req.resolved.remember_schema(False)
    call.kwargs.pop("response_format", None)
    call.messages = call.messages + [{"role": "user", "content": structured.schema_instruction(schema)}]
    return True


def priced(req: Request, reply: Reply) -> Reply:
    """The reply priced by the alias's own price, when it has one and the reply reports its tokens (a reply
    replayed from the cache, or an in-process model's), bounded as `transport.reply_cost` bounds a fresh one.

    Raises:
        InvalidReply: the cost is past `wire.MAX_COST_USD`."""
    price = req.resolved.price
    if price is None or reply.input_tokens is None:
        return reply
    cost = bounded_cost(price.cost(reply.input_tokens, reply.output_tokens or 0))
    return reply.model_copy(update={"cost_usd": cost})


def figures(replies: list[Reply]) -> tuple[int | None, int | None, float | None]:
    """Input tokens, output tokens and cost summed over replies (`total`: an unknown figure makes its sum
    unknown; no reported usage leaves both token sums unknown)."""
    tokens = total((r.input_tokens for r in replies), 0)
    out = None if tokens is None else total((r.output_tokens or 0 for r in replies), 0)
    return tokens, out, total((r.cost_usd for r in replies), 0.0)


def completion_of(call: Call, replies: list[Reply]) -> Completion:
    """The Completion of the last reply, with the figures of every reply of the call: the original ones, and
    what this call spent now where some replies were replayed from the cache."""
    original, spent = figures(replies), figures([r for r in replies if not r.replayed])
    last, req = replies[-1], call.req
    done = Completion(
        model=req.model,
        text=last.text,
        input_tokens=original[0],
        output_tokens=original[1],
        cost_usd=original[2],
        latency_s=min(max(call.latency, 0.0), MAX_LATENCY_S),  # bounded where it is measured
        attempts=call.attempts,
        sample=req.sample,
        key=req.key,
        finish_reason=last.finish_reason,
        logprobs=last.logprobs,
        response_model=last.response_model,
        endpoint=last.endpoint,
        fingerprint=last.fingerprint,
    )
    if spent != original:  # some replies were replayed from the cache: this call spent less than the original did
        done.spent_input_tokens, done.spent_output_tokens, done.spent_cost_usd = spent[0] or 0, spent[1] or 0, spent[2]
    return done


def protocol(req: Request) -> Generator[ProviderCall | Sleep, Any, Completion]:
    """The call, step by step: yields provider calls and sleeps, returns the Completion."""
    call = prepare(req)
    replies: list[Reply] = []
    failures: list[dict[str, Any]] = []
    for _ in range(max(1, req.settings.parse_attempts if req.schema is not None else 1)):
        reply = yield from send(call)
        if call.mode in ("detect", "native") and req.resolved.served and not reply.replayed:
            call.mode = "native"
            req.resolved.remember_schema(True, call.form)
        replies.append(priced(req, reply))
        done = completion_of(call, replies)
        if req.schema is None:
            return done
        try:
            done.parsed = structured.parse(done.text, req.schema)
            return done
        except ValueError as e:
            failures.append({"raw": done.text, "error": str(e), "finish_reason": done.finish_reason})
            call.messages = call.messages + [
                {"role": "assistant", "content": done.text},
                structured.repair_message(str(e)),
            ]
    assert req.schema is not None
    spent, original = figures([r for r in replies if not r.replayed]), figures(replies)
    raise ParseError(
        req.model,
        req.schema.__name__,
        failures,
        input_tokens=spent[0] or 0,
        output_tokens=spent[1] or 0,
        cost_usd=spent[2],
        requests=call.attempts,
        original=(original[0] or 0, original[1] or 0, original[2]),
    )


__all__ = [
    "Call",
    "ProviderCall",
    "Sleep",
    "backoff",
    "completion_of",
    "figures",
    "prepare",
    "priced",
    "protocol",
    "retry_wait",
    "schema_fallback",
    "send",
]
