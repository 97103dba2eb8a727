"""What a scorer is, and how callers use one: `Scorer` (the base of every kind in `promptlab.eval.scorers`),
`Scored` (one example's score, or the error that prevented it), and `score_safely` / `bounded`, which turn a
scorer's exception or out-of-range value into an error recorded on the example (its value missing), never a
crash of the run and never an invented number.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..llm.call.completion import Completion
from ..llm.call.entry import CacheArg
from ..llm.call.settings import Settings
from ..record import Example


@dataclass
class Scored:
    """One example's score: a value in [0, 1], or None with the error that prevented it."""

    value: float | None
    detail: str | None = None
    error: str | None = None
    calls: list[Completion] = field(default_factory=list)
    """Model calls the scorer made (a judge's), for the caller's usage totals."""
    failed_calls: list[str] = field(default_factory=list)
    """Models of calls the scorer made that failed for good (for the caller's usage totals)."""
    out_of_range: bool = False
    """True when the scorer returned something that is not a number in [0, 1] (a defect of the scorer)."""


class Scorer(BaseModel):
    """Base of every scorer kind: its fields are the kind's options (unknown options are refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ClassVar[str] = ""
    needs_target: ClassVar[bool] = True
    """Whether every example must carry a non-null target."""
    needs_model: ClassVar[bool] = False
    """Whether scoring makes model calls (such scorers are not self-checked before a run)."""

    def score(self, output: str, target: Any) -> float | tuple[float, str | None]:
        """The value (or value and detail) of `output` against `target`; raise on a failure."""
        raise NotImplementedError

    def score_example(self, output: str, example: Example) -> Scored:
        """Score one reply to one example without model calls (exceptions propagate)."""
        result = self.score(output, example.target)
        value, detail = result if isinstance(result, tuple) else (result, None)
        return Scored(value, detail)

    async def ascore(
        self, output: str, example: Example, *, cache: CacheArg = None, settings: Settings | None = None
    ) -> Scored:
        """Score one reply to one example (exceptions propagate; see `score_safely`). The scoring runs in a
        worker thread, off the event loop: a slow scorer (a regex near its time limit, a large reply parsed) never
        holds up the other calls in flight, whose timeouts the loop keeps."""
        return await asyncio.to_thread(self.score_example, output, example)

    def check_target(self, target: Any) -> None:
        """Raise ValueError when `target` cannot be scored by this scorer (checked before any model call)."""

    def models(self) -> list[str]:
        """Model names the scorer calls (for a preflight check)."""
        return []

    def spec(self) -> dict[str, Any]:
        """The spec that rebuilds this scorer."""
        return {"kind": self.kind, **self.model_dump(mode="json")}


def bounded(scorer: Scorer, scored: Scored) -> Scored:
    """`scored` with its value checked: a value that is not a number in [0, 1] becomes an error."""
    if scored.error is not None:
        scored.value = None
        return scored
    value = float(scored.value) if isinstance(scored.value, bool) else scored.value
    if not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
        return Scored(
            None,
            scored.detail,
            f"scorer {scorer.kind} returned {value!r}, not a number in [0, 1]",
            scored.calls,
            scored.failed_calls,
            out_of_range=True,
        )
    scored.value = float(value)
    return scored


async def score_safely(
    scorer: Scorer, output: str, example: Example, *, cache: CacheArg = None, settings: Settings | None = None
) -> Scored:
    """Score one example; a failure or an out-of-range value becomes a recorded error with no value."""
    try:
        scored = await scorer.ascore(output, example, cache=cache, settings=settings)
    except Exception as e:
        return Scored(None, error=f"{type(e).__name__}: {e}")
    return bounded(scorer, scored)


__all__ = ["Scored", "Scorer", "bounded", "score_safely"]
