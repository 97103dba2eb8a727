"""The reproducibility reference: local/smollm2's greedy replies to fixed prompts, and how to compare a run with it.

The prompts are the shipped grounded tasks' starting prompts (data/grounded_tasks.jsonl) filled with their first
`PER_TASK` examples in split order (the dev split, then the test split): the demo's own kind of request. Each is
asked once at temperature 0 with at most `MAX_TOKENS` tokens. `benchmarks/reference_replies.py` writes the
reference (`REFERENCE`) and measures every local path against it; `tests/llm/test_reference.py` asserts the
default path reproduces it exactly (docs/reproducibility.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "llm" / "reference" / "smollm2_greedy.json"
TASKS = ROOT / "data" / "grounded_tasks.jsonl"
MODEL = "local/smollm2"
MAX_TOKENS = 24
PER_TASK = 22
"""Examples per task (3 tasks: 66 prompts)."""


def reference_prompts() -> list[str]:
    """The fixed prompts, in order."""
    from promptlab.eval.tasks import examples_of, format_prompt, read_tasks

    prompts = []
    for task in read_tasks(TASKS):
        examples = [*examples_of(task, "dev"), *examples_of(task, "test")][:PER_TASK]
        prompts += [format_prompt(task.prompt, e.input) for e in examples]
    return prompts


def replies_hash(replies: list[str]) -> str:
    """sha256 of the replies, as canonical JSON (a list of strings, in prompt order)."""
    return hashlib.sha256(json.dumps(replies, ensure_ascii=False).encode("utf-8")).hexdigest()


async def _ask(prompts: list[str], at_once: int) -> list[str]:
    import promptlab as pl

    gate = asyncio.Semaphore(at_once)

    async def one(prompt: str) -> str:
        async with gate:
            c = await pl.acomplete(MODEL, prompt, temperature=0.0, max_tokens=MAX_TOKENS, cache=False)
            return c.text

    return list(await asyncio.gather(*(one(p) for p in prompts)))


def greedy_replies(prompts: list[str], *, at_once: int = 1, order: list[int] | None = None) -> list[str]:
    """local/smollm2's greedy replies to `prompts` (never cached), `at_once` calls in flight at a time, asked in
    `order` (indices; default the prompts' order); returned in the prompts' order."""
    order = order if order is not None else list(range(len(prompts)))
    got = asyncio.run(_ask([prompts[i] for i in order], at_once))
    out = [""] * len(prompts)
    for i, text in zip(order, got, strict=True):
        out[i] = text
    return out


def current_fingerprint() -> dict[str, Any]:
    """The inference fingerprint local/smollm2 runs under in this process now."""
    from promptlab.llm.local.fingerprint import local_fingerprint
    from promptlab.llm.local.pool import resolve_model_path

    return local_fingerprint(resolve_model_path("smollm2"))


def reference_record(prompts: list[str], replies: list[str]) -> dict[str, Any]:
    """What the reference file holds: the settings, the fingerprint it was made under, the hash and the texts."""
    return {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "fingerprint": current_fingerprint(),
        "sha256": replies_hash(replies),
        "items": [{"prompt": p, "reply": r} for p, r in zip(prompts, replies, strict=True)],
    }


def load_reference(path: Path = REFERENCE) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@dataclass
class Comparison:
    """How a run's replies compare with the reference."""

    same: int
    total: int
    first: tuple[int, str, str, str] | None
    """(index, prompt, expected, got) of the first reply that differs; None when all are the same."""

    @property
    def exact(self) -> bool:
        return self.first is None


def compare(reference: dict[str, Any], replies: list[str]) -> Comparison:
    """Compare replies (in prompt order) with the reference's."""
    items = reference["items"]
    differ = [i for i, (item, got) in enumerate(zip(items, replies, strict=True)) if item["reply"] != got]
    first = None
    if differ:
        i = differ[0]
        first = (i, items[i]["prompt"], items[i]["reply"], replies[i])
    return Comparison(len(items) - len(differ), len(items), first)


def mismatch_report(reference: dict[str, Any], replies: list[str], fingerprint: dict[str, Any]) -> str:
    """The failure message: how many replies differ, the fingerprints (reference and here, and the fields that
    differ), and the first differing reply (prompt, expected, got)."""
    from promptlab.llm.local.fingerprint import describe, differing_fields

    result = compare(reference, replies)
    if result.first is None:
        return "all replies reproduce the reference"
    i, prompt, expected, got = result.first
    made = reference["fingerprint"]
    fields = differing_fields([made, fingerprint])
    return "\n".join(
        [
            f"{result.total - result.same} of {result.total} greedy replies differ from the reference "
            f"({REFERENCE.name}; sha256 {reference['sha256'][:16]}, here {replies_hash(replies)[:16]})",
            f"reference made under fingerprint {describe(made)}",
            f"this run's fingerprint          {describe(fingerprint)}",
            f"fields that differ: {', '.join(fields) or 'none (same fingerprint: the path is not exact here)'}",
            f"first differing reply: #{i}",
            f"  prompt:   {prompt!r}",
            f"  expected: {expected!r}",
            f"  got:      {got!r}",
        ]
    )
