"""The malformed-output corpus: what a model really sends back, and the score that must come out of it.

Each case is (kind, reply, score), the score None when the reply must be refused (so the call path re-asks and,
in the end, records a ParseError instead of inventing a value). tests/llm/test_parsing.py asserts on each case and
benchmarks/reliability.py sends each through the call path and counts them.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from promptlab.llm.call.structured import MAX_JSON_CHARS


class Verdict(BaseModel):
    """The critic's verdict the corpus is parsed into."""

    score: int = Field(ge=1, le=10)
    reason: str


def v(score: object, reason: str = "ok") -> str:
    """A verdict's JSON with this score (any value, valid or not)."""
    return json.dumps({"score": score, "reason": reason})


CORPUS: list[tuple[str, str, int | None]] = [
    ("plain", v(7), 7),
    ("fenced json", f"```json\n{v(6)}\n```", 6),
    ("fenced without language", f"```\n{v(5)}\n```", 5),
    ("leading prose", f"Sure! Here is my verdict: {v(8)}", 8),
    ("trailing prose", f"{v(4)}\nLet me know if you need anything else.", 4),
    ("example then answer", f"Example format: {v(2, 'example')} My actual answer: {v(7, 'real')}", 7),
    ("several objects, last invalid", f'{v(3)} and then {{"note": "no score here"}}', 3),
    ("answer then a stray unrelated object", f'{v(9)} (metadata: {{"tokens": 12}})', 9),
    ("bool score", v(True), None),
    ("bool false score", v(False), None),
    ("string score", v("7"), None),
    ("score out of range", v(11), None),
    ("float score for an int", v(7.5), None),
    ("null score", v(None), None),
    ("missing field", json.dumps({"score": 7}), None),
    ("nested: the object holds an example object", json.dumps({"score": 6, "reason": 'see {"score": 1}'}), 6),
    ("nested object in prose", 'Result -> {"score": 5, "reason": "fine", "extra": {"a": {}}}', 5),
    ("truncated", '{"score": 7, "reason": "the reply stops in the mid', None),
    ("truncated second after a good first", f'{v(4)} {{"score": 9, "reason": "cut', 4),
    ("unicode", v(8, "naïve café — ✓ 日本語"), 8),
    ("escaped quotes and braces in strings", v(6, 'he said "{not json}" and left'), 6),
    ("raw newline inside a string", '{"score": 3, "reason": "line one\nline two"}', 3),
    ("single quotes (not JSON)", "{'score': 7, 'reason': 'python dict'}", None),
    ("empty reply", "", None),
    ("no JSON at all", "I would rate this a seven out of ten.", None),
    ("unbalanced prose brace before the answer", f"Use {{curly braces like this: {v(7)}", 7),
    ("stray quote in prose", f'He said "hello. Anyway: {v(5)}', 5),
    ("array instead of object", f"[{v(7)}]", None),
    ("deeply nested garbage then answer", "[" * 5000 + " " + v(6), 6),
    ("huge: over the size cap", '{"score": 7, "reason": "' + "x" * (MAX_JSON_CHARS + 10) + '"}', None),
    ("many objects, the last is the answer", " ".join(v(k % 10 + 1) for k in range(200)), 199 % 10 + 1),
]
