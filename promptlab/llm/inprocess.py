"""promptlab's in-process models (`local/...`, `fake/...`) as a litellm custom provider: the handler that
`promptlab.llm.model_names.litellm` registers, and the worker threads that run those models for async callers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any


def _reply(lm: ModuleType, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
    """Run a promptlab model and wrap its answer as a litellm ModelResponse (with its token
    log-probabilities in the OpenAI chat shape when asked for, and what identifies the weights as `model`)."""
    provider, _, name = model.partition("/")
    if provider == "fake":
        from .fake import reply as fake_reply

        done = fake_reply(name, messages, params)
    else:
        from .local import generate

        done = generate(name, messages, params)
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": done.finish_reason,
        "message": {"role": "assistant", "content": done.text},
    }
    if done.logprobs is not None:
        choice["logprobs"] = {"content": [t.model_dump() for t in done.logprobs]}
    response = lm.ModelResponse(
        model=done.model or model,
        choices=[choice],
        usage={"prompt_tokens": done.usage[0], "completion_tokens": done.usage[1], "total_tokens": sum(done.usage)},
        created=int(time.time()),
    )
    return response


def _stream(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A promptlab model's reply as litellm GenericStreamingChunk dicts."""
    provider, _, name = model.partition("/")
    from .fake import reply_stream
    from .local import generate_stream

    pieces = reply_stream if provider == "fake" else generate_stream
    for piece in pieces(name, messages, params):
        last = "usage" in piece
        usage = None
        if last:
            i, o = piece["usage"]
            usage = {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}
        yield {
            "text": piece["text"],
            "tool_use": None,
            "is_finished": last,
            "finish_reason": piece.get("finish_reason", ""),
            "usage": usage,
            "index": 0,
        }


MODEL_THREADS = 64
"""Worker threads that run in-process models (`local/`, `fake/`) for async callers. A request waiting for a
llama.cpp instance waits in one of them, where the instance scheduler sees it (`promptlab.llm.local.instance`
hands a freed instance to the waiting request that shares most of its prompt); asyncio's default executor has
only a few threads (cores + 4), which hid the other waiting requests from it."""


@functools.cache
def model_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The executor of in-process model calls (made on first use; `MODEL_THREADS` threads)."""
    return concurrent.futures.ThreadPoolExecutor(MODEL_THREADS, thread_name_prefix="promptlab-model")


def make_handler(lm: ModuleType) -> Any:
    """The litellm CustomLLM that serves `fake/...` and `local/...`."""

    def params_of(kwargs: dict[str, Any]) -> dict[str, Any]:
        p = dict(kwargs.get("optional_params") or {})
        return p

    def model_of(kwargs: dict[str, Any], args: tuple[Any, ...]) -> str:
        model = kwargs.get("model") or (args[0] if args else "")
        provider = (kwargs.get("litellm_params") or {}).get("custom_llm_provider")
        if provider and not str(model).startswith(f"{provider}/"):
            model = f"{provider}/{model}"
        elif "/" not in str(model):
            model = f"fake/{model}"
        return str(model)

    class PromptlabProvider(lm.CustomLLM):  # type: ignore[name-defined,misc]
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            return _reply(lm, model_of(kwargs, args), kwargs["messages"], params_of(kwargs))

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            call: Callable[[], Any] = lambda: self.completion(*args, **kwargs)  # noqa: E731
            return await asyncio.get_running_loop().run_in_executor(
                model_threads(), contextvars.copy_context().run, call
            )

        def streaming(self, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
            yield from _stream(model_of(kwargs, args), kwargs["messages"], params_of(kwargs))

        async def astreaming(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
            # the model runs in a worker thread; pieces come back through a queue as they are made
            queue: asyncio.Queue[Any] = asyncio.Queue()
            loop = asyncio.get_running_loop()
            done = object()

            def produce() -> None:
                try:
                    for piece in self.streaming(*args, **kwargs):
                        loop.call_soon_threadsafe(queue.put_nowait, piece)
                except BaseException as e:  # handed to the consumer, raised there
                    loop.call_soon_threadsafe(queue.put_nowait, e)
                loop.call_soon_threadsafe(queue.put_nowait, done)

            worker = loop.run_in_executor(model_threads(), produce)
            while (item := await queue.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
            await worker

    return PromptlabProvider()


__all__ = ["MODEL_THREADS", "make_handler", "model_threads"]
