"""What makes a greedy reply depend on its batch: minimal reproductions, one llama.cpp setting at a time (#50).

    PYTHONPATH=. .venv/bin/python benchmarks/batch_invariance.py            # every case below
    PYTHONPATH=. .venv/bin/python benchmarks/batch_invariance.py --only unified

Each case decodes the reference's 66 prompts (benchmarks/support/greedy_reference.py: greedy, 24 tokens) in a
fresh process with llama-cpp-python's low-level API and no promptlab scheduling: a context made with the case's
settings, the prompts in groups of `--group` decoded together (each in its own sequence; its prompt read alone in
chunks of 512, or all the group's prompts in shared `llama_decode` calls; then one `llama_decode` per step for a
token of every live sequence; argmax). It prints how many replies equal the reference (made on the instance
pool) and the sha256 of the 66. The cases:

- alone: one sequence, flash attention off, its own KV cache (the pool's arithmetic);
- flash attention: the same with llama.cpp's default (`auto`: on for the CPU), as the engine had it;
- unified: 16 at once in one KV cache shared by all sequences (a sequence's cells sit where the others leave
  room, so attention's vector sums over cells group other floats; and one attention product for all queries);
- streams: 16 at once, one KV stream per sequence (`kv_unified` off), prompts read alone: the exact engine's
  arithmetic (the output product over several rows then goes through llamafile's tiled Q8_0 kernel, one row
  through ggml's dot product);
- streams, reversed: 4 at once in reversed order;
- shared reading: 16 at once, one stream each, the prompts read together in shared `llama_decode` calls
  (llama.cpp splits them into equal parts per sequence, so a prompt's chunks depend on its neighbours').

A llama_cpp built otherwise (e.g. `-DGGML_LLAMAFILE=OFF`) is measured by putting it first on PYTHONPATH.
Results: docs/reproducibility.md, "Why the engine is exact".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import greedy_reference as ref  # noqa: E402

CASES: dict[str, dict[str, Any]] = {
    "alone": {"fa": 0, "unified": 0, "n_seq": 1, "group": 1, "read": "alone", "order": "forward"},
    "flash attention": {"fa": -1, "unified": 0, "n_seq": 1, "group": 1, "read": "alone", "order": "forward"},
    "unified": {"fa": 0, "unified": 1, "n_seq": 16, "group": 16, "read": "alone", "order": "forward"},
    "streams": {"fa": 0, "unified": 0, "n_seq": 16, "group": 16, "read": "alone", "order": "forward"},
    "streams, reversed": {"fa": 0, "unified": 0, "n_seq": 16, "group": 4, "read": "alone", "order": "reversed"},
    "shared reading": {"fa": 0, "unified": 0, "n_seq": 16, "group": 16, "read": "shared", "order": "forward"},
}
N_CTX_SEQ = 1024
CHUNK = 512


def load(case: dict[str, Any]) -> Any:
    import llama_cpp as lib

    from promptlab.llm.local.engine_model import Model
    from promptlab.llm.local.pool import resolve_model_path

    lib.llama_backend_init()
    path = resolve_model_path("smollm2")
    model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
    cp = lib.llama_context_default_params()
    n_seq = case["n_seq"]
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = N_CTX_SEQ * n_seq, CHUNK, CHUNK, n_seq
    cp.n_threads = cp.n_threads_batch = 2
    cp.kv_unified = bool(case["unified"])
    cp.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED if case["fa"] == 0 else case["fa"]
    ctx = lib.llama_init_from_model(model, cp)
    vocab = lib.llama_model_get_vocab(model)
    m = Model(lib, path, model, ctx, vocab, lib.llama_get_memory(ctx), lib.llama_batch_init(CHUNK, 0, 1),
              int(lib.llama_vocab_n_tokens(vocab)), n_seq, N_CTX_SEQ * n_seq, N_CTX_SEQ, CHUNK, 2, True, None, "")  # fmt: skip
    m.template = m.formatter()
    return m


def decode(m: Any, rows: list[tuple[int, int, int, bool]]) -> None:
    for n, (token, pos, seq, logits) in enumerate(rows):
        m.add(n, token, pos, seq, logits)
    m.batch.n_tokens = len(rows)
    assert m.lib.llama_decode(m.ctx, m.batch) == 0


def argmax(m: Any, row: int) -> int:
    import numpy as np

    return int(np.argmax(np.ctypeslib.as_array(m.lib.llama_get_logits_ith(m.ctx, row), shape=(m.n_vocab,))))


def first_tokens(m: Any, prompts: list[list[int]], read: str) -> list[int]:
    """Read the group's prompts (sequence k holds prompt k); the first reply token of each."""
    first = [0] * len(prompts)
    if read == "alone":
        for k, p in enumerate(prompts):
            for i in range(0, len(p), CHUNK):
                part = p[i : i + CHUNK]
                decode(m, [(t, i + j, k, i + j == len(p) - 1) for j, t in enumerate(part)])
            first[k] = argmax(m, len(part) - 1)
        return first
    rows = [(t, j, k, j == len(p) - 1) for k, p in enumerate(prompts) for j, t in enumerate(p)]
    for i in range(0, len(rows), CHUNK):
        part = rows[i : i + CHUNK]
        decode(m, part)
        for r, row in enumerate(part):
            if row[3]:
                first[row[2]] = argmax(m, r)
    return first


def greedy(m: Any, prompts: list[list[int]], read: str) -> list[list[int]]:
    """Greedy replies of a group decoded together."""
    m.lib.llama_memory_clear(m.mem, True)
    nxt = first_tokens(m, prompts, read)
    outs: list[list[int]] = [[] for _ in prompts]
    pos = [len(p) for p in prompts]
    live = list(range(len(prompts)))
    while live:
        live = [k for k in live if not m.lib.llama_vocab_is_eog(m.vocab, nxt[k])]
        for k in live:
            outs[k].append(nxt[k])
        live = [k for k in live if len(outs[k]) < ref.MAX_TOKENS]
        if live:
            decode(m, [(nxt[k], pos[k], k, True) for k in live])
            for r, k in enumerate(live):
                pos[k], nxt[k] = pos[k] + 1, argmax(m, r)
    return outs


def run_case(name: str) -> dict[str, Any]:
    case = CASES[name]
    m = load(case)
    tokens = [m.prompt_tokens([{"role": "user", "content": p}]) for p in ref.reference_prompts()]
    order = list(range(len(tokens)))
    if case["order"] == "reversed":
        order.reverse()
    outs: dict[int, list[int]] = {}
    cpu = time.process_time()
    for g in range(0, len(order), case["group"]):
        idx = order[g : g + case["group"]]
        outs.update(zip(idx, greedy(m, [tokens[i] for i in idx], case["read"]), strict=True))
    replies = [b"".join(m.piece(t) for t in outs[i]).decode("utf-8", errors="ignore") for i in range(len(tokens))]
    return {"replies": replies, "cpu": time.process_time() - cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="only the cases whose name holds this text")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run_case(a.case)))
        return
    reference = ref.load_reference()
    import llama_cpp

    print(f"llama_cpp from {Path(llama_cpp.__file__).parent}: {llama_cpp.llama_print_system_info().decode().strip()}")
    for name in CASES:
        if a.only not in name:
            continue
        done = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, check=True)
        got = json.loads(done.stdout.strip().splitlines()[-1])
        result = ref.compare(reference, got["replies"])
        print(
            f"{name:20s} {result.same:2d}/{result.total} equal to the reference  sha256 "
            f"{ref.replies_hash(got['replies'])[:12]}  ({got['cpu']:.0f} CPU-s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
