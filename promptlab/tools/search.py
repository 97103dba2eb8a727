"""The `search_docs` tool: keyword search over a local folder of text documents (there is no web).

Ranking is a small tf-idf: each query word found in a document adds (1 + ln tf) * ln(1 + N / df),
and a query word in the file name adds one more idf. The snippet is the paragraph with the most
query words, cut to `SNIPPET_CHARS` around the first hit.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .registry import Tool, ToolError

DOC_SUFFIXES = (".md", ".txt", ".rst")
"""Files searched."""
SNIPPET_CHARS = 320
"""Longest snippet returned per match."""
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by do does for from how i in is it of on or that the this to what when where which "
    "who why with you your".split()
)


def default_docs_dir() -> Path:
    """The documents shipped with the repository: `<repo>/data/docs`."""
    return Path(__file__).resolve().parents[2] / "data" / "docs"


class SearchInput(BaseModel):
    """Input of the search_docs tool."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=500)
    """Keywords to look for."""
    top_k: int = Field(3, ge=1, le=10)
    """How many matches to return at most."""


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def search(folder: Path, query: str, top_k: int = 3) -> list[dict[str, Any]]:
    """The best-matching documents in `folder` for `query`: [{"file", "score", "snippet"}], best first.

    Raises:
        ToolError: the folder does not exist, or the query has no searchable word.
    """
    if not folder.is_dir():
        raise ToolError(f"documents folder {str(folder)!r} does not exist")
    terms = list(dict.fromkeys(_words(query)))
    if not terms:
        raise ToolError(f"the query {query!r} has no searchable word")
    docs = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in DOC_SUFFIXES):
        text = path.read_text(encoding="utf-8", errors="replace")
        words = _words(text)
        counts = {t: words.count(t) for t in terms}
        docs.append((path, text, counts, set(_words(path.stem))))
    n = len(docs)
    df = {t: sum(1 for d in docs if d[2][t]) for t in terms}
    scored = []
    for path, text, counts, name_words in docs:
        score = 0.0
        for t in terms:
            idf = math.log(1 + n / df[t]) if df[t] else 0.0
            if counts[t]:
                score += (1 + math.log(counts[t])) * idf
            if t in name_words:
                score += math.log(1 + n / max(df[t], 1))
        if score > 0:
            scored.append((score, path, text))
    scored.sort(key=lambda s: (-s[0], str(s[1])))
    return [
        {"file": str(p.relative_to(folder)), "score": round(s, 4), "snippet": _snippet(text, terms)}
        for s, p, text in scored[:top_k]
    ]


def _snippet(text: str, terms: list[str]) -> str:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    best = max(paragraphs, key=lambda p: sum(1 for w in _words(p) if w in terms), default="")
    flat = " ".join(best.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    lower = flat.lower()
    hits = [lower.find(t) for t in terms if lower.find(t) >= 0]
    start = max(0, min(hits) - SNIPPET_CHARS // 4) if hits else 0
    piece = flat[start : start + SNIPPET_CHARS]
    return ("..." if start else "") + piece + ("..." if start + SNIPPET_CHARS < len(flat) else "")


def _render(out: dict[str, Any]) -> str:
    if not out["matches"]:
        return f"no document matches {out['query']!r}"
    return "\n".join(f"[{m['file']}] {m['snippet']}" for m in out["matches"])


def search_docs_tool(folder: str | Path | None = None, *, name: str = "search_docs") -> Tool:
    """The `search_docs` tool over `folder` (default `data/docs` in the repository).

    Input {"query", "top_k"=3}; output {"query", "folder", "matches": [{"file", "score", "snippet"}]}.
    """
    root = Path(folder) if folder is not None else default_docs_dir()

    def run(args: dict[str, Any]) -> dict[str, Any]:
        return {"query": args["query"], "folder": str(root), "matches": search(root, args["query"], args["top_k"])}

    return Tool(
        name=name,
        description="Keyword search over a local folder of reference documents on prompt engineering; "
        "returns the best matching files with a snippet each. There is no web access.",
        execute=run,
        input_model=SearchInput,
        string_arg="query",
        render=_render,
    )
