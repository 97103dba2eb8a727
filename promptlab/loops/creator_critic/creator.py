"""Creator/Critic's creator side: what the creator is shown (the critiques, in promptlab's extended form or as
the design document passes them) and how the prompt is taken out of its reply."""

from __future__ import annotations

import json
import re

from ...record import Task
from ..runtime.context import RunContext
from ..runtime.toolkit import cut
from .config import CreatorCriticConfig, Critique

FALLBACK_WEAKNESS = "Critic returned invalid JSON"
"""The weakness of the design document's fallback critique, given with `parse_failure_score`."""

_FENCED = re.compile(r"```[\w-]*[ \t]*\n?(.*?)\n?```", re.DOTALL)
_LEAD = re.compile(
    r"^(?:here(?:'s| is)[^\n]*?:\s*\n"  # "Here is the improved prompt:" on its own line
    r"|\**(?:improved|revised|new|final)?\s*prompt\**\s*:\**\s*)",  # "**Improved prompt:**"
    re.IGNORECASE,
)
_MID_LEAD = re.compile(  # "... Here is the improved prompt:" ending a preamble line
    r"\bhere(?:'s| is)\b[^\n]{0,60}?\b(?:prompt|version)\b[^\n]{0,30}?:\**[ \t]*\n", re.IGNORECASE
)
_PREAMBLE_CHARS = 400
"""A mid-text lead-in is cut only with what comes before it when that is at most this long (a preamble)."""
_QUOTES = {'"': '"', "'": "'", "“": "”", "«": "»"}


class FallbackCritique(Critique):
    """The design document's critique for a critic reply that cannot be read: the `parse_failure_score`, one
    weakness ("Critic returned invalid JSON") and the raw reply."""

    raw_output: str = ""
    """The critic's reply as it came."""


def fallback_critique(score: float, raw: str | None) -> FallbackCritique:
    """The fallback critique the creator sees in place of an unreadable one."""
    return FallbackCritique(score=score, weaknesses=[FALLBACK_WEAKNESS], raw_output=raw or "")


def clean_prompt_text(text: str) -> str:
    """The prompt inside a creator's reply: a wrapping code fence, a lead-in such as 'Improved prompt:'
    or 'Here is the improved prompt:' (also at the end of a short preamble: 'This is the first rewritten
    version... Here is the improved prompt:' and what precedes it), and surrounding quotes are removed."""
    t = text.strip()
    fenced = _FENCED.fullmatch(t)
    if fenced:
        t = fenced.group(1).strip()
    t = _LEAD.sub("", t, count=1).strip()
    mid = _MID_LEAD.search(t)
    if mid and mid.start() <= _PREAMBLE_CHARS and t[mid.end() :].strip():
        t = t[mid.end() :].strip()
        fenced = _FENCED.fullmatch(t)
        t = fenced.group(1).strip() if fenced else t
    if len(t) >= 2 and _QUOTES.get(t[0]) == t[-1] and t[0] not in t[1:-1]:
        t = t[1:-1].strip()
    return t


def critique_summary(c: Critique) -> str:
    """A critique's strengths and weaknesses as one short line (a critic Score's justification)."""
    parts = [
        f"{label}: {'; '.join(items)}"
        for label, items in (("strengths", c.strengths), ("weaknesses", c.weaknesses))
        if items
    ]
    return cut(" | ".join(parts), 300)


def critique_text(critiques: list[tuple[str, Critique | None]], limit: int | None = None) -> str:
    """Every critic's score, strengths, weaknesses and suggestions, then any other key the critic wrote (as the
    design document passes the whole critique), items cut to `limit` only when given."""
    if not critiques:
        return "(none yet: this is the first rewrite)"
    blocks = []
    for judge, c in critiques:
        if c is None:
            continue
        parts = [f"{judge}: " + (f"score {c.score:g}/10" if c.score is not None else "no score")]
        for label, items in (("strength", c.strengths), ("weakness", c.weaknesses), ("suggestion", c.suggestions)):
            parts += [f"  {label}: {cut(item, limit)}" for item in items if item]
        parts += [f"  {key}: {cut(value, limit)}" for key, value in (c.model_extra or {}).items()]
        blocks.append("\n".join(parts))
    return "\n".join(blocks) or "(no usable critique: the critics' replies could not be read)"


def seed_critique_text(critiques: list[tuple[str, Critique | None]]) -> str:
    """The previous critique as the design document hands it to the creator: the critique object itself
    (None before the first one, and for a critic whose reply could not be read without a fallback)."""
    if not critiques:
        return "None"
    texts = [
        json.dumps(c.model_dump(mode="json"), ensure_ascii=False) if c is not None else "None" for _, c in critiques
    ]
    return texts[0] if len(texts) == 1 else "\n".join(f"{j}: {t}" for (j, _), t in zip(critiques, texts, strict=True))


def creator_prompt(
    ctx: RunContext,
    cfg: CreatorCriticConfig,
    task: Task,
    goal: str,
    current: str,
    latest: list[tuple[str, Critique | None]],
) -> str:
    """The creator's prompt for the next rewrite (`role_inputs` picks the template; every template may use
    the fields original, goal, current and critique)."""
    limit = cfg.history_chars
    seed = cfg.role_inputs == "seed"
    return ctx.prompt(
        "creator",
        CREATOR_SEED_PROMPT if seed else CREATOR_PROMPT,
        goal=goal,
        original=cut(task.prompt, limit),
        current=cut(current, limit),
        critique=seed_critique_text(latest) if seed else critique_text(latest, limit),
    )


# Role prompts (override with config.prompts["creator"]; fields: original, goal, current, critique) ---------
CREATOR_PROMPT = """You improve prompts that users give to AI assistants. Do not answer the prompt: \
rewrite it.

Original prompt: {original}
Goal: {goal}
Latest version:
{current}
Critique of the latest version:
{critique}

Write an improved version that keeps the original's purpose, meets the goal and fixes what the critique \
names. Reply with the improved prompt only: no title, no quotes, no explanation."""

CREATOR_SEED_PROMPT = """You are an expert in writing prompts for AI assistants.

Original prompt:
{original}

Previous critique:
{critique}

Rewrite the prompt so that it answers the critique. Reply with the improved prompt only."""


__all__ = [
    "CREATOR_PROMPT",
    "CREATOR_SEED_PROMPT",
    "FALLBACK_WEAKNESS",
    "FallbackCritique",
    "clean_prompt_text",
    "creator_prompt",
    "critique_summary",
    "critique_text",
    "fallback_critique",
    "seed_critique_text",
]
