"""Expected scores (G-Eval): a critic's score as the probability-weighted mean of the values its model
considered, read from the token log-probabilities of its reply, instead of the one integer it sampled.

For each occurrence of a JSON field (`"score": 7`) in the reply, the token that holds the value is found
by laying the reply's tokens end to end over its text; the alternatives the model gave at that position
that read as integers in [low, high] (after stripping spaces, quotes and JSON punctuation) are kept, their
probabilities renormalised, and their mean taken.

Numbers spread over several tokens (a tokenizer that writes "10" as "1" then "0", as SmolLM2's does) are
read along the sampled path. At the value's first token, each alternative is read as a number. Staying on
the sampled path, each next token's alternatives split the probability again: one that starts with digits
extends the number by them, anything else ends it; this includes the token right after the value (when the
value's last token holds nothing else), so a sampled "1" can still give 10 weight. With "1" sampled at
p=0.6 and "0" (p=0.9) or "," (p=0.1) next, 10 gets 0.54 and 1 gets 0.06. Alternatives off the path are
never extended: an unsampled "1" at the first digit counts as 1, not 10, since the model's continuation
after it is unknown. Numbers outside [low, high] (15, 100) are dropped with the rest of the invalid mass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..llm.call.completion import TokenLogprob

_STRIP = " \t\r\n\"':,{}"
"""Characters around a token's digits that do not change the value it stands for."""


class ExpectedScore(BaseModel):
    """The expected value of one scored field of a reply, from the model's token log-probabilities."""

    model_config = ConfigDict(extra="forbid")

    expected: float | None
    """Probability-weighted mean of the valid values; None when it could not be computed (see `reason`)."""
    sampled: int | None
    """The value written in the reply (None when it is not an integer)."""
    mass: float = 0.0
    """Probability the valid values held before renormalising (how much of the model's choice they cover)."""
    distribution: dict[int, float] = Field(default_factory=dict)
    """Renormalised probability of each valid value."""
    offset: int
    """Character offset of the value in the reply."""
    reason: str | None = None
    """Why `expected` is None, else None."""


def _field_values(text: str, field: str) -> list[re.Match[str]]:
    """Every `"field": value` in the text, in order (an escaped `\\"field\\"` inside a string is skipped)."""
    pattern = re.compile(r'(?<!\\)"' + re.escape(field) + r'"\s*:\s*"?(?P<value>-?\d+(?:\.\d+)?)')
    return list(pattern.finditer(text))


def _spans(text: str, tokens: Sequence[TokenLogprob]) -> list[tuple[int, int] | None]:
    """Character span of each token in the text; tokens that cannot be placed (e.g. parts of a multi-byte
    character a tokenizer reports as '') get None, and a few unplaced characters are skipped over."""
    out: list[tuple[int, int] | None] = []
    pos = 0
    for t in tokens:
        if not t.token:
            out.append(None)
            continue
        at = pos if text.startswith(t.token, pos) else text.find(t.token, pos)
        if at < 0 or at - pos > 4:
            out.append(None)
            continue
        out.append((at, at + len(t.token)))
        pos = at + len(t.token)
    return out


def _alternatives(t: TokenLogprob) -> dict[str, float]:
    """The token's alternatives as {text: probability}, the sampled token included."""
    alts = {a.token: math.exp(a.logprob) for a in t.top_logprobs}
    alts.setdefault(t.token, math.exp(t.logprob))
    return alts


def _digits(token: str) -> str | None:
    """The digits a token stands for once spaces, quotes and JSON punctuation are stripped; else None."""
    core = token.strip(_STRIP)
    return core if core.isascii() and core.isdigit() else None


def _leading_digits(token: str) -> str:
    """The digits a continuation token starts with ('' when it starts otherwise: the number has ended)."""
    m = re.match(r"\d+", token)
    return m.group(0) if m else ""


def _weigh(
    tokens: Sequence[TokenLogprob], positions: list[int], sampled: list[str], after: int | None
) -> dict[int, float]:
    """Unnormalised probability of each value along the sampled path (see the module docstring)."""
    weights: dict[int, float] = {}

    def add(number: str, p: float) -> None:
        if number:
            weights[int(number)] = weights.get(int(number), 0.0) + p

    stay, prefix = 1.0, ""
    for step, i in enumerate(positions):
        alts = _alternatives(tokens[i])
        for text, p in alts.items():
            if text == tokens[i].token:
                continue  # the sampled path, followed below
            if step == 0:
                digits = _digits(text)
                if digits is not None:
                    add(digits, p)
            else:  # a continuation: its leading digits extend the number; anything else ends it
                add(prefix + _leading_digits(text), stay * p)
        stay *= alts[tokens[i].token]
        prefix += sampled[step]
    if after is None:
        add(prefix, stay)
    else:  # the token after the value: did the number really end there?
        for text, p in _alternatives(tokens[after]).items():
            add(prefix + _leading_digits(text), stay * p)
    return weights


def _one(
    text: str,
    tokens: Sequence[TokenLogprob],
    spans: list[tuple[int, int] | None],
    match: re.Match[str],
    low: int,
    high: int,
) -> ExpectedScore:
    value = match.group("value")
    start, end = match.span("value")
    sampled = None if "." in value else int(value)
    if sampled is None:
        return ExpectedScore(expected=None, sampled=None, offset=start, reason=f"the value {value!r} is not an integer")
    covering = [(i, s) for i, s in enumerate(spans) if s is not None and s[0] < end and s[1] > start]
    if not covering or covering[0][1][0] > start:
        return ExpectedScore(
            expected=None,
            sampled=sampled,
            offset=start,
            reason=f"no token of the reply covers the value at character {start}",
        )
    positions = [i for i, _ in covering]
    pieces = [text[max(start, s[0]) : min(end, s[1])] for _, s in covering]
    last = positions[-1]
    following = spans[last + 1] if last + 1 < len(spans) else None
    after = last + 1 if covering[-1][1][1] == end and following is not None and following[0] == end else None
    weights = {v: w for v, w in _weigh(tokens, positions, pieces, after).items() if low <= v <= high}
    mass = sum(weights.values())
    if mass <= 0:
        return ExpectedScore(
            expected=None,
            sampled=sampled,
            offset=start,
            reason=f"no alternative at the value's position is an integer in [{low}, {high}]",
        )
    dist = {v: w / mass for v, w in sorted(weights.items())}
    return ExpectedScore(
        expected=sum(v * p for v, p in dist.items()), sampled=sampled, mass=mass, distribution=dist, offset=start
    )


def expected_scores(
    text: str, logprobs: Sequence[TokenLogprob] | None, *, field: str = "score", low: int = 1, high: int = 10
) -> list[ExpectedScore]:
    """The expected value of every `"<field>": <integer>` in a reply, in order of appearance.

    Args:
        text: the reply text (`Completion.text`).
        logprobs: its tokens with their top alternatives (`Completion.logprobs`, asked for with
            `logprobs=True, top_logprobs=k`; k of 10-20 covers a 1-10 scale).
        field: the JSON field that holds the score.
        low: the lowest valid score.
        high: the highest valid score.

    Returns:
        One ExpectedScore per occurrence (empty when the field does not occur). `expected` is None, with
        the `reason`, where there are no log-probabilities, the value is not an integer, no token covers
        it, or no alternative there is a valid score.
    """
    matches = _field_values(text, field)
    if logprobs is None:
        return [
            ExpectedScore(
                expected=None,
                sampled=_int_or_none(m.group("value")),
                offset=m.start("value"),
                reason="the reply has no token log-probabilities",
            )
            for m in matches
        ]
    spans = _spans(text, logprobs)
    return [_one(text, logprobs, spans, m, low, high) for m in matches]


def _int_or_none(value: str) -> int | None:
    return None if "." in value else int(value)
