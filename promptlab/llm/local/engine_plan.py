"""How the batching engine plans its `llama_decode` calls: a prompt read so that every token is computed as when
the prompt is read alone (`chunks`), how much of a prompt a slot's cells already hold (`common_prefix`), the
two rules its prefix reuse rests on (docs/reproducibility.md, "Why the engine is exact"), and the groups one
decode step is computed in (`decode_groups`), which change what a step costs, never a reply."""

from __future__ import annotations

import numpy as np


def chunks(start: int, length: int, n_batch: int) -> tuple[int, list[int]]:
    """How a prompt of `length` tokens whose first `start` are already in the KV cache is read so that every
    token is computed as when the whole prompt is read alone from its first token, in chunks of `n_batch`:
    `(start, sizes)`, `start` lowered by one where needed.

    One token alone in a `llama_decode` goes through other kernels than two or more (ggml's vector dot product,
    not llamafile's tiled one, for attention's products), and nothing else about a chunk changes a token's
    floats. Read alone, only a prompt of k*n_batch+1 tokens has such a token, its last; so the chunks here hold
    two tokens or more, and that last token alone where the whole read has it so."""
    single = length % n_batch == 1
    end = length - 1 if single else length
    if end - start == 1:
        start -= 1
    rest = end - start
    sizes = [n_batch] * (rest // n_batch) + ([rest % n_batch] if rest % n_batch else [])
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes[-2:] = [n_batch - 1, 2]
    return start, sizes + ([1] if single else [])


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x, y = np.asarray(a[:n]), np.asarray(b[:n])
    diff = np.flatnonzero(x != y)
    return int(diff[0]) if diff.size else n


GROUP_COST = (1.3, 1.0, 0.18)
"""What a decode step's `llama_decode` costs, in units of one sequence's token at 256 KV cells: the call itself
(a pass over the weights, one token's worth again), each sequence in it, and each sequence per 256 cells of the
longest stream in the call (attention's KV length in a ubatch is its longest stream's, padded to 256).
Measured with benchmarks/bench_engine_steps.py: 22.4 CPU-ms for one sequence alone, 90.6 for 8 in one call,
158.9 for 8 of which one holds 1,500 cells (docs/benchmarks.md, "What a decode step costs")."""


def decode_groups(lengths: list[int]) -> list[tuple[int, int]]:
    """The cheapest split of one decode step's sequences, in slot order, into runs each decoded in its own
    `llama_decode` (`[(start, end), ...]`): a sequence holding many more cells than its neighbours is decoded
    apart, so that they do not compute attention over its length. `lengths` are the cells each holds after the
    step. Every sequence's floats are the same in any grouping (a group only pads attention with masked cells,
    whose weights are exact zeros), so the split changes what the step costs, never a reply."""
    call, token, cells = GROUP_COST
    blocks = [max(1, -(-n // 256)) for n in lengths]
    best = [0.0] + [float("inf")] * len(lengths)
    cut = [0] * (len(lengths) + 1)
    for end in range(1, len(lengths) + 1):
        for start in range(end):
            cost = best[start] + call + (end - start) * (token + cells * max(blocks[start:end]))
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(lengths)
    while end > 0:
        groups.append((cut[end], end))
        end = cut[end]
    return groups[::-1]
