"""P³RO's texts: how criteria, past attempts and an evaluation are written into role prompts, and POLISH's
account of the journey (`journey_summary`)."""

from __future__ import annotations

from ...record import Iteration, Run, Score
from ..runtime.toolkit import cut
from .config import P3ROConfig
from .schemas import norm_criterion


def numbered(criteria: list[str]) -> str:
    """The criteria as a numbered list, one per line."""
    return "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, start=1))


def distinct(items: list[str]) -> list[str]:
    """Items in order without case-insensitive repeats."""
    seen: set[str] = set()
    out = []
    for item in items:
        if norm_criterion(item) not in seen:
            seen.add(norm_criterion(item))
            out.append(item)
    return out


def _average(it: Iteration) -> str:
    return f"average {it.average:g}" if it.average is not None else "no average"


def history_text(
    iterations: list[Iteration], config: P3ROConfig, reasoning: dict[int, str], feedback: dict[int, str]
) -> str:
    """The attempts with a candidate (the last `history_window`), each with its full evaluation (every
    criterion's score and justification, the overall feedback), the generator's reasoning and the lesson;
    texts are cut to `history_chars` only when it is set."""
    tried = [it for it in iterations if it.candidate is not None]
    if config.history_window is not None:
        tried = tried[len(tried) - config.history_window :] if config.history_window else []
    if not tried:
        return "(no attempts yet)"
    limit = config.history_chars
    blocks = []
    for it in tried:
        lines = [f"Attempt {it.index} ({_average(it)}):", cut(it.candidate or "", limit)]
        if reasoning.get(it.index):
            lines.append(f"Reasoning: {cut(reasoning[it.index], limit)}")
        lines += ["Evaluation:", evaluation_text(it.scores, feedback.get(it.index), limit)]
        if it.reflection:
            lines.append(f"Lesson: {cut(it.reflection, limit)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def evaluation_text(scores: list[Score], feedback: str | None, limit: int | None = None) -> str:
    """An evaluation as the reflector (and the history) reads it: every criterion, its score and
    justification, then the overall feedback (cut to `limit` characters each only when given)."""
    lines = [
        f"- {s.criterion}: "
        + (
            f"{s.score:g}/10. {cut(s.justification, limit)}"
            if s.score is not None
            else f"not scored ({cut(s.justification, limit)})"
        )
        for s in scores
    ]
    overall = cut(feedback, limit) if feedback else "(none)"
    return "\n".join(lines) + f"\nOverall feedback: {overall}"


def missing_scores(criteria: list[str], why: str, judge: str) -> list[Score]:
    """One missing Score per criterion, saying why."""
    return [Score(criterion=c, score=None, justification=why, judge=judge) for c in criteria]


def journey_summary(run: Run, criteria: list[str], best: Iteration | None, revisions: list[int]) -> str:
    """POLISH's account: the chosen prompt's score per criterion, the averages, the strategy revisions."""
    lines = [f"P³RO on task {run.task.id!r}: the goal was decomposed into {len(criteria)} criteria."]
    if best is None:
        lines.append("No attempt could be scored, so there is no chosen prompt.")
    else:
        average = "missing" if best.average is None else f"{best.average:g}"
        dev = (
            f", dev score {best.grounded.score:.3g} (n={best.grounded.n})"
            if best.grounded is not None and best.grounded.score is not None
            else ""
        )
        which = (
            "the starting prompt (candidate 0)"
            if best.index == 0
            else f"attempt {best.index} of {sum(i.index > 0 for i in run.iterations)}"
        )
        lines.append(f"Chosen prompt: {which}, critic average {average}{dev}.")
        lines += [
            f"  {k}. {s.criterion.rstrip('.')}: "
            + (f"{s.score:g}/10 ({cut(s.justification, 120)})" if s.score is not None else "not scored")
            for k, s in enumerate(best.scores, start=1)
        ]
    trail = " -> ".join(f"{i.average:g}" if i.average is not None else "missing" for i in run.iterations)
    first = " (from candidate 0, the starting prompt)" if run.iterations and run.iterations[0].index == 0 else ""
    lines.append(f"Average by attempt{first}: {trail or '(no attempts)'}.")
    if revisions:
        before = ", ".join(map(str, revisions))
        lines.append(f"Strategy revised {len(revisions)} time(s), before attempt(s) {before}.")
    else:
        lines.append("The initial strategy was kept throughout.")
    last = run.iterations[-1] if run.iterations else None
    lines.append(f"Stopped: {run.stop_reason}" + (f" ({last.reason})." if last and last.reason else "."))
    return "\n".join(lines)
