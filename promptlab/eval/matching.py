"""Reading replies: normalising text, finding numbers, comparing a value read from a reply with a target.

The scorers (`promptlab.eval.scorers`) build on these; they are public so a `python` scorer can reuse them.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

_KEPT = frozenset("+-$%#@")
"""Symbols that carry meaning at a text's edge (signs, currency, percent) and are not stripped."""


def _edge(ch: str) -> bool:
    return (unicodedata.category(ch)[0] in "PSZ" or ch.isspace()) and ch not in _KEPT


def normalise(text: Any) -> str:
    """Case-folded, NFKC, whitespace collapsed, surrounding punctuation (quotes, asterisks, dots) removed."""
    s = unicodedata.normalize("NFKC", text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))
    s = " ".join(s.casefold().split())
    start, end = 0, len(s)
    while start < end and _edge(s[start]):
        start += 1
    while end > start and _edge(s[end - 1]):
        end -= 1
    return s[start:end]


def alternatives(target: Any) -> list[Any]:
    return list(target) if isinstance(target, (list, tuple)) else [target]


_NUMBER = re.compile(
    r"(?<![\w.])([+\-\u2212]?)"  # sign (ASCII or the unicode minus)
    r"(\d{1,3}(?:[,_]\d{3})+(?!\d)|\d+)?"  # integer part, with thousands separators
    r"(?:\.(\d+))?"  # decimals
    r"(?:[eE]([+-]?\d+))?"  # exponent
)


def numbers(text: str) -> list[float]:
    """Every number in `text`, in order: '-1,234.5 kg' gives [-1234.5]; units after a number are ignored."""
    out = []
    thin = str.maketrans({"\u2009": "_", "\u202f": "_", "\u00a0": "_"})  # NFKC would make them spaces
    for m in _NUMBER.finditer(unicodedata.normalize("NFKC", text.translate(thin))):
        sign, whole, frac, exp = m.groups()
        if whole is None and frac is None:
            continue
        digits = re.sub(r"\D", "", whole or "0") + (f".{frac}" if frac else "")
        value = float(digits + (f"e{exp}" if exp else ""))
        out.append(-value if sign in ("-", "\u2212") else value)
    return out


def as_number(target: Any) -> float:
    if isinstance(target, bool):
        raise ValueError(f"target {target!r} is not a number")
    if isinstance(target, (int, float)):
        return float(target)
    found = numbers(str(target)) if isinstance(target, str) else []
    if not found:
        raise ValueError(f"target {target!r} is not a number")
    return found[0]


def same_value(value: Any, target: Any) -> bool:
    """Field equality: numbers numerically, texts after normalising, anything else as JSON values."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        or isinstance(target, (int, float))
        and not isinstance(target, bool)
    ):
        try:
            return math.isclose(as_number(value), as_number(target), rel_tol=1e-9, abs_tol=1e-9)
        except ValueError:
            return False
    if isinstance(value, str) or isinstance(target, str):
        return normalise(value) == normalise(target)
    return bool(value == target)


__all__ = ["alternatives", "as_number", "normalise", "numbers", "same_value"]
