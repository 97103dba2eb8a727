"""How the batching engine reads a prompt so that every token is computed as when the prompt is read alone
(`chunks`), and how much of a prompt a slot's cells already hold (`common_prefix`): the two rules its prefix
reuse rests on (docs/reproducibility.md, "Why the engine is exact")."""

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
