"""The errors a sweep's runs recorded and went on past, for summary.md: a run that goes on past a reply that did
not parse, or a score it could not read (`ScoreMissing`), is recorded with its errors, never shown as clean."""

from __future__ import annotations

from collections import Counter

from ..results.store import Results, read_runs


def errors_markdown(res: Results) -> list[str]:
    """ "## Errors recorded in runs": one line per ok cell whose runs recorded errors (how many, in how many runs,
    by kind); nothing when no run recorded one."""
    runs = res.runs
    if not len(runs) or not (runs["n_errors"].fillna(0) > 0).any():
        return []
    lines = [
        "## Errors recorded in runs",
        "",
        "The runs went on past these errors, with the values they could not read missing (never invented).",
        "",
    ]
    for cell_id, g in runs.groupby("cell_id", sort=True):
        n = int(g["n_errors"].fillna(0).sum())
        if not n:
            continue
        kinds = Counter(e.kind for r in read_runs(res.path, str(cell_id)) for e in r.errors)
        said = ", ".join(f"{kind} x{count}" for kind, count in kinds.most_common())
        lines.append(f"- `{cell_id}`: {n} error(s) in {int((g['n_errors'] > 0).sum())} of {len(g)} runs ({said})")
    return [*lines, ""]


__all__ = ["errors_markdown"]
