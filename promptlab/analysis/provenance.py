"""Provenance checks over a runs frame: does a results directory mix role prompts, data or experiment files?

Runs record a hash of each role prompt template they used (`prompt_hashes`, JSON text per role). Two runs of
one loop were made under different role prompts only when some role they both used has different hashes: a
run that stopped before a role (e.g. before P³RO's reflector) used fewer templates, and that is not a mix.

Runs also record the inference fingerprints their replies rest on (`fingerprints`, JSON text: model -> id ->
fields; `promptlab.llm.local.fingerprint`). Replies of one model made under different fingerprints (another build, other
kernels, another engine, other weights, another hosted snapshot) may differ for the same request, so pooling or
comparing them warns, naming the fields that differ (`mixed_fingerprints`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..llm.local.fingerprint import differing_fields

if TYPE_CHECKING:
    import pandas as pd

PROVENANCE_CHECKS = {
    "prompts_hash": ("loop", "role prompts"),
    "task_hash": ("task_id", "task data (task, examples or split)"),
    "experiment_hash": (None, "experiment files"),
}
"""Provenance column -> (column within whose values it must not vary, or None for the whole directory; what)."""


def mixed_roles(hashes: list[str]) -> list[str]:
    """The roles whose template hash differs between runs, given each run's JSON `prompt_hashes` text."""
    seen: dict[str, set[str]] = {}
    for text in hashes:
        for role, h in json.loads(text).items():
            seen.setdefault(role, set()).add(h)
    return sorted(role for role, values in seen.items() if len(values) > 1)


def provenance_warnings(runs: pd.DataFrame) -> list[str]:
    """Sentences naming what a results directory mixes: different role prompts for one loop (compared role by
    role), different data for one task id, or several experiment files. Empty when consistent or absent."""
    out = []
    for col, (within, what) in PROVENANCE_CHECKS.items():
        if col not in runs.columns or runs[col].isna().all():
            continue
        groups = runs.groupby(within, sort=True) if within else [(None, runs)]
        for key, g in groups:
            hashes = sorted(str(h) for h in g[col].dropna().unique())
            if len(hashes) < 2:
                continue
            detail = f"{col}: {', '.join(h[:10] for h in hashes)}"
            if col == "prompts_hash" and "prompt_hashes" in g.columns:
                roles = mixed_roles([str(t) for t in g["prompt_hashes"].dropna().unique()])
                if not roles:
                    continue
                detail = f"roles {', '.join(roles)}"
            value = key[0] if isinstance(key, tuple) else key
            where = f" for {within} {value!s}" if within else ""
            cells = ", ".join(sorted(str(c) for c in g["cell_id"].unique()))
            out.append(
                f"cells made under different {what}{where} ({detail}; cells {cells}): their rows are not "
                "directly comparable"
            )
    return out + mixed_fingerprints(runs)


def mixed_fingerprints(runs: pd.DataFrame) -> list[str]:
    """One sentence per model whose replies rest on more than one inference fingerprint across the runs (or
    within one run, replayed partly from another machine's cache): the ids, the fields that differ and the
    cells."""
    if "fingerprints" not in runs.columns:
        return []
    seen: dict[str, dict[str, dict[str, Any]]] = {}
    cells: dict[str, set[str]] = {}
    for text, cell in zip(runs["fingerprints"], runs["cell_id"], strict=True):
        if text is None or not isinstance(text, str):
            continue
        for model, by_id in json.loads(text).items():
            seen.setdefault(model, {}).update(by_id)
            cells.setdefault(model, set()).add(str(cell))
    out = []
    for model, by_id in sorted(seen.items()):
        if len(by_id) < 2:
            continue
        fields = differing_fields(list(by_id.values()))
        out.append(
            f"{model}'s replies rest on different inference fingerprints ({', '.join(sorted(by_id))}; they differ "
            f"in {', '.join(fields) or 'their ids only'}; cells {', '.join(sorted(cells[model]))}): the same request "
            "may get another reply under each, so its rows are not directly comparable (docs/reproducibility.md)"
        )
    return out


__all__ = ["PROVENANCE_CHECKS", "mixed_fingerprints", "mixed_roles", "provenance_warnings"]
