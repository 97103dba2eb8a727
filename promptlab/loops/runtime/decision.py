"""What a loop's router returns: the next action, why, and (when the action ends the run) the run's stop reason.

Each loop's stop rule is one pure function in its own `router` module (`p3ro.router.route`, ...), a function of
numbers and settings that a test can call without a model; the loop records the decision as it is and closes the
run with its `stop_reason`, without working either out again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

A = TypeVar("A", bound=str)


@dataclass(frozen=True)
class Decision(Generic[A]):
    """A router's decision after a step."""

    action: A
    """What the loop does next (recorded as `Iteration.decision`)."""
    reason: str
    """Why, in words (recorded as `Iteration.reason`)."""
    stop_reason: str | None = None
    """The run's stop reason when `action` ends the run ('threshold', 'max_iterations', ...); None otherwise."""

    @property
    def stops(self) -> bool:
        """Whether the decision ends the run."""
        return self.stop_reason is not None


__all__ = ["Decision"]
