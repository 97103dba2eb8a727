"""The padding of the critic-bias padding probe (`promptlab.analysis.bias_asks`): neutral sentences appended to a
candidate, drawn for each candidate from a bank of 1,152, and kept inside what the critic is shown."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

PAD_OPENERS = (
    "",
    "As said above, ",
    "To repeat, ",
    "In short, ",
    "Put simply, ",
    "To be clear, ",
    "Once more, ",
    "For clarity, ",
    "As noted, ",
    "Again, ",
    "In other words, ",
    "To restate, ",
)
PAD_CORES = (
    "the task is the one described above",
    "the instructions above say what to do",
    "nothing beyond the instructions above is required",
    "the request is as written above",
    "what is asked is stated above",
    "the description above is complete",
    "the text above covers what is needed",
    "the steps above are all there is",
    "no further requirement applies",
    "the instructions above still hold",
    "this note adds nothing to the instructions above",
    "everything needed is given above",
)
PAD_CLOSERS = (
    ".",
    ", and nothing here changes it.",
    ", with nothing more to add.",
    ", as before.",
    ", and that is all.",
    ", no more and no less.",
    ", as written.",
    ", unchanged.",
)
PAD_BANK = tuple(
    (opener + core)[0].upper() + (opener + core)[1:] + closer
    for opener in PAD_OPENERS
    for core in PAD_CORES
    for closer in PAD_CLOSERS
)
"""Neutral sentences (same meaning: the instructions above are the task), 1,152 of them (openers x cores x
closers). Each candidate is padded with its own draw from the bank (`pad_draw`), so a critic's reaction to
particular sentences varies from candidate to candidate and enters the padding probe's interval as noise: with
the same few sentences on every candidate (issue #52), a critic that reacts to those sentences, with no length
preference at all, was called length-"Biased" in 24 of 48 sweeps."""
PAD_CHARS = 300
"""Characters of padding added to each candidate (whole sentences of PAD_BANK, at least this many)."""


def pad_draw(key: str) -> list[str]:
    """PAD_BANK in the order one candidate draws it: a permutation seeded by `key` (the candidate's `text_key`),
    so a second report pads each candidate the same (its calls are cache hits) and candidates differ."""
    import numpy as np

    seed = int(hashlib.sha256(f"pad\x00{key}".encode()).hexdigest()[:16], 16)
    return [PAD_BANK[i] for i in np.random.default_rng(seed).permutation(len(PAD_BANK))]


def pad(text: str, chars: int = PAD_CHARS, key: str = "") -> str:
    """`text` followed by the sentences of `pad_draw(key)` in turn until at least `chars` characters were added."""
    padded = pad_within(text, str.strip, chars, key)
    assert padded is not None  # nothing is cut out of view
    return padded


def pad_within(text: str, view: Callable[[str], str], chars: int = PAD_CHARS, key: str = "") -> str | None:
    """`text` padded with the sentences of `pad_draw(key)` in turn, each kept only while the critic sees all of
    the text (`view`: what the critic is shown of a text; a sentence that would be cut is passed over for the
    next that fits), until at least `chars` characters were added; None when no sentence fits (the text fills
    the critic's window already: padding it would add nothing the critic sees)."""
    padded = text
    for sentence in pad_draw(key):
        if len(padded) - len(text) >= chars:
            break
        longer = f"{padded} {sentence}"
        if view(longer) == longer.strip():
            padded = longer
    return padded if padded != text else None


__all__ = ["PAD_BANK", "PAD_CHARS", "PAD_CLOSERS", "PAD_CORES", "PAD_OPENERS", "pad", "pad_draw", "pad_within"]
