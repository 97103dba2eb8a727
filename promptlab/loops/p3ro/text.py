"""P³RO's texts: how criteria, past attempts and an evaluation are written into role prompts, and POLISH's
account of the journey (`journey_summary`)."""

from __future__ import annotations

from ...record import Iteration, Run, Score
from ..runtime.base import cut
from .config import P3ROConfig
from .schemas import EvaluationResult, norm_criterion


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


def _score_line(it: Iteration) -> str:
    """An iteration's average and per-criterion scores on one line."""
    parts = [f"{cut(s.criterion, 40)}: " + (f"{s.score:g}" if s.score is not None else "-")
             for s in it.scores]
    avg = f"average {it.average:g}" if it.average is not None else "no score"
    return f"{avg}; " + "; ".join(parts) if parts else avg


def history_text(iterations: list[Iteration], config: P3ROConfig, reasoning: dict[int, str]) -> str:
    """The attempts with a candidate (the last `history_window`), each with its scores, reasoning and lesson."""
    tried = [it for it in iterations if it.candidate is not None]
    if config.history_window is not None:
        tried = tried[len(tried) - config.history_window:] if config.history_window else []
    if not tried:
        return "(no attempts yet)"
    blocks = [f"Attempt {it.index} ({_score_line(it)}):\n{cut(it.candidate or '', config.history_chars)}"
              + (f"\nReasoning: {cut(reasoning[it.index], config.history_chars)}" if reasoning.get(it.index) else "")
              + (f"\nLesson: {it.reflection}" if it.reflection else "") for it in tried]
    return "\n\n".join(blocks)


def evaluation_text(scores: list[Score], result: EvaluationResult) -> str:
    """The evaluator's scores and overall feedback, as the reflector reads them."""
    lines = [f"- {cut(s.criterion, 80)}: "
             + (f"{s.score:g}/10. {cut(s.justification, 200)}" if s.score is not None else "not scored")
             for s in scores]
    return "\n".join(lines) + f"\nOverall feedback: {cut(result.qualitative_feedback, 500) or '(none)'}"


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
        dev = f", dev score {best.grounded.score:.3g} (n={best.grounded.n})" \
            if best.grounded is not None and best.grounded.score is not None else ""
        which = ("the starting prompt (candidate 0)" if best.index == 0
                 else f"attempt {best.index} of {sum(i.index > 0 for i in run.iterations)}")
        lines.append(f"Chosen prompt: {which}, critic average {average}{dev}.")
        lines += [f"  {k}. {s.criterion.rstrip('.')}: "
                  + (f"{s.score:g}/10 ({cut(s.justification, 120)})" if s.score is not None
                     else "not scored")
                  for k, s in enumerate(best.scores, start=1)]
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


