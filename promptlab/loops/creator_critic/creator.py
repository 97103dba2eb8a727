"""Creator/Critic's creator side: what the creator is shown (the critiques, in promptlab's extended form or as
the design document passes them; optionally the latest version's wrong answers on dev, as ProTeGi shows them)
and how the prompt is taken out of its reply."""

from __future__ import annotations

import json
import random
import re

from ...eval.tasks import examples_of, input_text
from ...record import Iteration, Task
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
    # numbered from 1 whatever the critics' roles (one critic is the role `critic`): the creator's prompt reads as
    # it did before roles were named once, so the replies cached for it stay valid
    for k, (_, c) in enumerate(critiques, start=1):
        if c is None:
            continue
        parts = [f"critic[{k}]: " + (f"score {c.score:g}/10" if c.score is not None else "no score")]
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


def wrong_answers(task: Task, it: Iteration | None, limit: int, sample: int) -> str:
    """Up to `limit` dev examples the candidate of `it` got wrong (score below 1), each with its input, the
    expected output and the model's answer, in dev order; which ones is drawn by (`sample`, the iteration), so
    replicates see different errors and every critic's run the same. "" when there are none."""
    if it is None or limit < 1:
        return ""
    replies = {st.output.get("example"): st.output for st in it.steps if st.phase == "score_dev"}
    wrong = sorted(i for i, out in replies.items() if isinstance(i, int) and _wrong(out.get("score")))
    if not wrong:
        return ""
    shown = sorted(random.Random(f"wrong-answers:{sample}:{it.index}").sample(wrong, min(limit, len(wrong))))
    dev = examples_of(task, "dev")
    blocks = []
    for k, i in enumerate(shown, start=1):
        target = dev[i].target
        expected = target if isinstance(target, str) else json.dumps(target, ensure_ascii=False)
        blocks.append(
            f"Example {k}\nInput: {cut(input_text(dev[i].input), 300)}\nExpected output: {cut(expected, 100)}\n"
            f"The model's answer: {cut(str(replies[i].get('text') or ''), 200)}"
        )
    return "\n\n".join(blocks)


def _wrong(score: object) -> bool:
    return isinstance(score, int | float) and score < 1


def creator_prompt(
    ctx: RunContext,
    cfg: CreatorCriticConfig,
    task: Task,
    goal: str,
    current: str,
    latest: list[tuple[str, Critique | None]],
) -> str:
    """The creator's prompt for the next rewrite of `current` (the latest candidate).

    `role_inputs` picks the template when the creator sees the critique alone (every template may use the fields
    original, goal, current and critique); with `show_errors` or without `show_critique` it is
    `CREATOR_FEEDBACK_PROMPT` (fields original, goal, current, feedback: the critique and/or the wrong answers)."""
    limit = cfg.history_chars
    seed = cfg.role_inputs == "seed"
    critique = seed_critique_text(latest) if seed else critique_text(latest, limit)
    if cfg.show_critique and not cfg.show_errors:
        return ctx.prompt(
            "creator",
            CREATOR_SEED_PROMPT if seed else CREATOR_PROMPT,
            goal=goal,
            original=cut(task.prompt, limit),
            current=cut(current, limit),
            critique=critique,
        )
    parts = [f"Critique of the latest version:\n{critique}"] if cfg.show_critique else []
    shown = next((i for i in reversed(ctx.run.iterations) if i.candidate == current), None)
    errors = wrong_answers(task, shown, cfg.show_errors, ctx.run.sample)
    if cfg.show_errors:
        parts.append(
            f"With the latest version the model answered these examples wrongly:\n\n{errors}"
            if errors
            else "With the latest version the model answered every example it was tried on correctly."
        )
    return ctx.prompt(
        "creator",
        CREATOR_FEEDBACK_PROMPT,
        goal=goal,
        original=cut(task.prompt, limit),
        current=cut(current, limit),
        feedback="\n\n".join(parts) or "(no feedback)",
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


CREATOR_FEEDBACK_PROMPT = """You improve prompts that users give to AI assistants. Do not answer the prompt: \
rewrite it.

Original prompt: {original}
Goal: {goal}
Latest version:
{current}

{feedback}

Write an improved version that keeps the original's purpose, meets the goal and fixes what went wrong above. \
Reply with the improved prompt only: no title, no quotes, no explanation."""


__all__ = [
    "CREATOR_FEEDBACK_PROMPT",
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
    "wrong_answers",
]
