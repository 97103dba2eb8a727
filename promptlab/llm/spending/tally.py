"""Running totals over model calls: `Tally` (calls, cache hits, failures, tokens and cost; a run's `Totals`, a
sweep's progress) and `Usage` (a Tally with the seconds spent waiting and the calls per model, an evaluation's),
with the one rule for summing figures (`plus`, `total`: an unknown figure makes every sum that includes it
unknown)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..call.completion import Completion

N = TypeVar("N", int, float)


def plus(a: N | None, b: N | None) -> N | None:
    """The sum of two figures, unknown (None) when either is: an unknown price, or usage a provider did not
    report, makes every sum that includes it unknown. Costs are rounded to 10 decimals (float noise)."""
    if a is None or b is None:
        return None
    total = a + b
    return round(total, 10) if isinstance(total, float) else total  # type: ignore[return-value]


def total(values: Iterable[N | None], start: N) -> N | None:
    """`plus` over values, from `start`: unknown as soon as one value is."""
    acc: N | None = start
    for v in values:
        acc = plus(acc, v)
    return acc


class Tally(BaseModel):
    """Running totals over model calls (a run's `Totals`, an evaluation's `Usage`, a sweep's progress): a
    cache hit counts as a call and adds no tokens or cost; a cost that is unknown makes the total unknown."""

    model_config = ConfigDict(extra="forbid")

    calls: int = 0
    """Model calls (hits included, failures included)."""
    cache_hits: int = 0
    """Calls answered from the cache."""
    failed_calls: int = 0
    """Calls that ended in an error."""
    input_tokens: int = 0
    """Input tokens of calls that reached a provider."""
    output_tokens: int = 0
    """Output tokens of calls that reached a provider."""
    cost_usd: float | None = 0.0
    """Cost in USD; None when some paid call's price is unknown."""

    @property
    def tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def count(
        self,
        *,
        hit: bool = False,
        failed: bool = False,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = 0.0,
    ) -> None:
        """Add one call: a hit adds no tokens or cost; what a call spent adds to the sums (`plus`)."""
        self.calls += 1
        if hit:
            self.cache_hits += 1
            return
        self.failed_calls += int(failed)
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost_usd = plus(self.cost_usd, cost_usd)

    def add(self, c: Completion) -> None:
        """Account one completion by what it spent now (`billed_*`)."""
        self.count(
            hit=c.cache_hit,
            input_tokens=c.billed_input_tokens,
            output_tokens=c.billed_output_tokens,
            cost_usd=c.billed_cost_usd,
        )

    def add_failure(
        self, model: str | None = None, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float | None = 0.0
    ) -> None:
        """Account a call that failed for good, with what its requests spent (a structured call whose replies
        never parsed still paid for them: pass `ParseError`'s figures)."""
        self.count(failed=True, input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd)

    def merge(self, other: Tally) -> None:
        """Add another tally's figures to these."""
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.failed_calls += other.failed_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd = plus(self.cost_usd, other.cost_usd)


class Usage(Tally):
    """Running totals over many calls (`Tally`), with the seconds spent waiting and the calls per model."""

    model_seconds: float = 0.0
    """Seconds spent waiting on providers (cache misses only)."""
    per_model: dict[str, int] = Field(default_factory=dict)
    """Calls per model name."""

    def add(self, c: Completion) -> None:
        """Account one completion."""
        super().add(c)
        self.per_model[c.model] = self.per_model.get(c.model, 0) + 1
        if not c.cache_hit:
            self.model_seconds += c.latency_s

    def add_failure(
        self, model: str | None = None, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float | None = 0.0
    ) -> None:
        """Account a call that failed for good, with what its requests spent."""
        super().add_failure(model, input_tokens, output_tokens, cost_usd)
        if model is not None:
            self.per_model[model] = self.per_model.get(model, 0) + 1


__all__ = ["Tally", "Usage", "plus", "total"]
