"""The "Inference fingerprints" section of summary.md: what the runs' replies rest on, per model.

Each model's fingerprints (`promptlab.llm.local.fingerprint`), read from the runs frame's `fingerprints` column, with
the runs that rest on each; more than one for a model is also a provenance warning (`analysis.mixed_fingerprints`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..llm.local.fingerprint import describe

if TYPE_CHECKING:
    import pandas as pd


def run_fingerprints(runs: pd.DataFrame) -> dict[str, dict[str, tuple[dict[str, Any], int]]]:
    """Model -> fingerprint id -> (its fields, how many runs rest on it)."""
    out: dict[str, dict[str, tuple[dict[str, Any], int]]] = {}
    if "fingerprints" not in runs.columns:
        return out
    for text in runs["fingerprints"]:
        if not isinstance(text, str):
            continue
        for model, by_id in json.loads(text).items():
            seen = out.setdefault(model, {})
            for fid, fields in by_id.items():
                seen[fid] = (fields, seen.get(fid, (fields, 0))[1] + 1)
    return out


def fingerprint_markdown(runs: pd.DataFrame) -> list[str]:
    """The section's lines: per model, each fingerprint in one line with its run count (docs/reproducibility.md)."""
    found = run_fingerprints(runs)
    lines = ["## Inference fingerprints", ""]
    if not found:
        return [
            *lines,
            "No reply carries an inference fingerprint (scripted or simulated models only, or runs recorded "
            "before fingerprints).",
            "",
        ]
    lines += [
        "What the replies rest on (docs/reproducibility.md): the same requests under the same fingerprint give "
        "the same greedy replies.",
        "",
    ]
    for model, by_id in sorted(found.items()):
        for _, (fields, n) in sorted(by_id.items()):
            lines.append(f"- {model}: `{describe(fields)}` ({n} run{'s' if n != 1 else ''})")
    return [*lines, ""]


FINGERPRINT_LINE = re.compile(r"`[0-9a-f]{12}: ")
"""A line describing an inference fingerprint: it names the machine's CPU and the local path, so it differs
between machines by design (the id in it is what must match)."""


def machine_free(summary: str) -> list[str]:
    """The lines of a summary.md that should come out the same on any machine under the same fingerprint: all
    but its title (which names the results folder) and the lines describing fingerprints."""
    lines = summary.splitlines()
    return [line for line in lines[1:] if not FINGERPRINT_LINE.search(line)]


def summary_difference(ours: str, reference: str) -> str | None:
    """None when two summary.md texts agree but for the lines naming the machine and the folder; else the first
    line that differs, both versions quoted."""
    a, b = machine_free(ours), machine_free(reference)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"compared line {i + 1}: {x[:200]!r}, reference {y[:200]!r}"
    if len(a) != len(b):
        return f"{len(a)} lines compared against the reference's {len(b)}"
    return None


__all__ = ["FINGERPRINT_LINE", "fingerprint_markdown", "machine_free", "run_fingerprints", "summary_difference"]
