"""One llama.cpp model and context for the batching engine, over llama-cpp-python's low-level API.

Used only inside the engine's worker process (`promptlab.llm.local.engine_worker`): loading (extra buffer types
off on an AMX CPU), the chat template and tokenizer, the shared `llama_batch`, token pieces, a token's
log-probability and its most likely alternatives, a prefix copied from one sequence slot to another, and the
sampler chain of one request.

The context is made so that a sequence is computed alone whatever else is in the batch (docs/reproducibility.md,
"Why the engine is exact"): one KV stream per sequence slot (`kv_unified` off: a sequence's cells start at 0 in
its own stream, as in an instance of the pool, so attention's sums over cells group the same floats) and flash
attention off (as llama-cpp-python's `Llama`, the pool, has it: the CPU's flash-attention kernel picks a
split-KV or tiled variant by the number of cells, queries and threads).
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .grammar import schema_grammar

DEFAULT_MAX_TOKENS = 512


@dataclass
class Model:
    """A loaded model, its context (n_seq sequence slots, each with its own KV stream of n_ctx_seq cells) and its
    batch."""

    lib: Any
    path: Path
    model: Any
    ctx: Any
    vocab: Any
    mem: Any
    batch: Any
    n_vocab: int
    n_seq: int
    n_ctx: int
    """KV cells of all streams together (n_seq x n_ctx_seq)."""
    n_ctx_seq: int
    """The most tokens one sequence may hold (prompt and reply), as the instance pool's context."""
    n_batch: int
    threads: int
    extra_bufts: bool
    template: Any
    eos: str
    pieces: dict[int, bytes] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str, options: dict[str, Any]) -> Model:
        """Load `path` with the engine's options: threads, n_seq, n_ctx, n_ctx_seq, n_batch, extra_bufts."""
        import llama_cpp as lib

        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's load log stays quiet
        lib.llama_backend_init()
        mp = lib.llama_model_default_params()
        mp.use_extra_bufts = bool(options["extra_bufts"])
        model = lib.llama_model_load_from_file(path.encode("utf-8"), mp)
        if not model:
            raise ValueError(f"llama.cpp could not load {path}")
        cp = lib.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = int(options["n_ctx"]), int(options["n_batch"]), int(options["n_batch"])
        cp.n_seq_max = int(options["n_seq"])
        cp.n_threads = cp.n_threads_batch = int(options["threads"])
        cp.kv_unified = False  # a stream per slot: the cells' places, and so attention's sums, as when alone
        cp.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as the pool's `Llama`
        cp.no_perf = True
        ctx = lib.llama_init_from_model(model, cp)
        if not ctx:
            raise ValueError(f"llama.cpp could not make a context for {path}")
        vocab = lib.llama_model_get_vocab(model)
        m = cls(
            lib=lib,
            path=Path(path),
            model=model,
            ctx=ctx,
            vocab=vocab,
            mem=lib.llama_get_memory(ctx),
            batch=lib.llama_batch_init(int(options["n_batch"]), 0, 1),
            n_vocab=int(lib.llama_vocab_n_tokens(vocab)),
            n_seq=int(options["n_seq"]),
            n_ctx=int(lib.llama_n_ctx(ctx)),
            n_ctx_seq=int(options["n_ctx_seq"]),
            n_batch=int(options["n_batch"]),
            threads=int(options["threads"]),
            extra_bufts=bool(options["extra_bufts"]),
            template=None,
            eos="",
        )
        m.template = m.formatter()
        return m

    def describe(self) -> dict[str, Any]:
        return {"n_seq": self.n_seq, "n_ctx": self.n_ctx, "threads": self.threads, "extra_bufts": self.extra_bufts}

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def token_text(self, token: int) -> str:
        return self.lib.llama_vocab_get_text(self.vocab, token).decode("utf-8", errors="replace") if token >= 0 else ""

    def formatter(self) -> Any:
        """The chat formatter llama-cpp-python's `Llama` builds from the model's own template (None without one)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.meta("tokenizer.chat_template")
        if not template:
            return None
        eos_id, bos_id = self.lib.llama_vocab_eos(self.vocab), self.lib.llama_vocab_bos(self.vocab)
        return Jinja2ChatFormatter(
            template=template,
            eos_token=self.token_text(eos_id),
            bos_token=self.token_text(bos_id),
            stop_token_ids=[eos_id],
        )

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        """The prompt's tokens, rendered and tokenized as llama-cpp-python's chat completion does."""
        if self.template is None:
            text, add_bos = "\n".join(str(m.get("content", "")) for m in messages), True
        else:
            result = self.template(messages=messages)
            text, add_bos = result.prompt, not result.added_special
        return self.tokenize(text, add_bos=add_bos)

    def tokenize(self, text: str, *, add_bos: bool) -> list[int]:
        data = text.encode("utf-8")
        size = len(data) + 16
        buf = (self.lib.llama_token * size)()
        n = self.lib.llama_tokenize(self.vocab, data, len(data), buf, size, add_bos, True)
        if n < 0:
            raise ValueError(f"the prompt could not be tokenized ({-n} tokens)")
        return list(buf[:n])

    def budget(self, prompt: int, params: dict[str, Any]) -> int:
        """The reply's token budget: `max_tokens`, cut to what the context leaves (as the instance pool does)."""
        if prompt >= self.n_ctx_seq:
            raise ValueError(
                f"the prompt has {prompt} tokens, more than the local model's context of {self.n_ctx_seq} "
                "(env PROMPTLAB_LOCAL_N_CTX)"
            )
        return min(int(params.get("max_tokens") or DEFAULT_MAX_TOKENS), self.n_ctx_seq - prompt)

    def add(self, n: int, token: int, pos: int, seq: int, logits: bool) -> int:
        """Put one token in the batch at row `n`; the next free row."""
        b = self.batch
        b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = token, pos, 1, logits
        b.seq_id[n][0] = seq
        return n + 1

    def piece(self, token: int) -> bytes:
        """The bytes of one token (cached)."""
        got = self.pieces.get(token)
        if got is None:
            buf = ctypes.create_string_buffer(64)
            n = self.lib.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
            got = self.pieces[token] = buf.raw[: max(n, 0)]
        return got

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        """Give slot `dst` the first `n` cells of slot `src`, bit for bit: the source sequence's state (only its
        own cells) written into the emptied destination stream from its first cell, then cut to `n`."""
        lib = self.lib
        size = int(lib.llama_state_seq_get_size(self.ctx, src))
        buf = (ctypes.c_uint8 * size)()
        if lib.llama_state_seq_get_data(self.ctx, buf, size, src) != size:
            raise RuntimeError(f"llama.cpp could not read sequence {src}'s state")
        lib.llama_memory_seq_rm(self.mem, dst, -1, -1)
        if not lib.llama_state_seq_set_data(self.ctx, buf, size, dst):
            raise RuntimeError(f"llama.cpp could not write sequence {src}'s state into {dst}")
        lib.llama_memory_seq_rm(self.mem, dst, n, -1)

    def sampler(self, params: dict[str, Any]) -> Any:
        """The request's sampler chain (`sampler_for`)."""
        return sampler_for(self, params)

    def logprob_entry(self, row: int, token: int, top: int) -> dict[str, Any]:
        """The token's log-probability at batch row `row` and the `top` most likely tokens there (the model's
        own distribution: before temperature and grammar), in the OpenAI chat shape."""
        ptr = self.lib.llama_get_logits_ith(self.ctx, row)
        logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float64)
        peak = logits.max()
        lp = logits - (peak + np.log(np.exp(logits - peak).sum()))
        best: list[int] = []
        if top > 0:
            part = np.argpartition(-lp, top)[:top]
            best = [int(i) for i in part[np.argsort(-lp[part])]]
        text = self.piece(token).decode("utf-8", errors="ignore")
        return {
            "token": text,
            "logprob": float(lp[token]),
            "top_logprobs": [
                {"token": self.piece(i).decode("utf-8", errors="ignore"), "logprob": float(lp[i])} for i in best
            ],
        }


def grammar_text(params: dict[str, Any]) -> str | None:
    """The GBNF grammar of a structured call (`response_format` with a JSON schema, or any JSON object)."""
    if isinstance(params.get("grammar"), str):
        return str(params["grammar"])  # compiled by the caller before admission (`promptlab.llm.local.grammar`)
    fmt = params.get("response_format")
    if not isinstance(fmt, dict):
        return None
    return schema_grammar(fmt.get("schema"))


def sampler_for(m: Model, params: dict[str, Any]) -> Any:
    """The request's sampler chain, as llama-cpp-python builds it: grammar, then greedy at temperature 0,
    else top-k, top-p, min-p, temperature and a seeded draw.

    Raises:
        ValueError: the grammar of the request's schema does not parse.
    """
    lib = m.lib
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    grammar = grammar_text(params)
    if grammar is not None:
        g = lib.llama_sampler_init_grammar(m.vocab, grammar.encode("utf-8"), b"root")
        if not g:
            lib.llama_sampler_free(chain)
            raise ValueError("the JSON schema's grammar could not be parsed by llama.cpp")
        lib.llama_sampler_chain_add(chain, g)
    temp = float(params.get("temperature") or 0.0)
    if temp == 0.0:
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        return chain
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(int(_given(params, "top_k", 40))))
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(float(_given(params, "top_p", 0.95)), 1))
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_min_p(float(_given(params, "min_p", 0.05)), 1))
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(temp))
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(int(params.get("seed") or 0)))
    return chain


def _given(params: dict[str, Any], key: str, default: float) -> float:
    """A sampling parameter, or llama-cpp-python's default for it when the request leaves it out."""
    value = params.get(key)
    return default if value is None else float(value)
