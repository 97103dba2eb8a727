"""Measure a prompt on labelled examples: run it on each example's input, score each reply, report the mean.

`aevaluate_prompt` (and its sync twin `evaluate_prompt`, which also works inside a running Jupyter kernel)
formats the prompt for each example (`promptlab.eval.tasks.format_prompt`), sends it as ONE user message (plus a
system message only when one is given) through the one cached call path, scores the reply with a scorer
(`promptlab.eval.scorers`) and returns an `EvalResult`: the mean, n, a 95% CI (Wilson for 0/1 scores, bootstrap
otherwise), the errors, and a record per example in example order. A failed model call or scorer leaves that
example's score missing with the error recorded; it never stops the evaluation and never becomes a 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..aio import run_sync
from ..errors import ConfigError
from ..llm.cache.location import open_cache
from ..llm.call.completion import Completion
from ..llm.call.entry import CacheArg, acomplete
from ..llm.call.request import concurrency_limit
from ..llm.call.settings import DEFAULT_SETTINGS, Settings
from ..llm.providers.resolved import resolve_model
from ..llm.spending.tally import Tally, Usage
from ..record import Example, GroundedScore
from .scorers import get_scorer
from .scoring import Scored, Scorer, score_safely
from .stats import mean_ci
from .tasks import format_prompt

if TYPE_CHECKING:
    import pandas as pd

CallFn = Callable[[int, str, "str | None"], Awaitable[str]]
"""`async (index, formatted prompt, system) -> reply text` for one example, raising on failure."""


class ExampleRecord(BaseModel):
    """What happened on one example."""

    model_config = ConfigDict(extra="forbid")

    index: int
    """Position of the example in the evaluated list."""
    id: str | None = None
    """The example's id, if it has one."""
    input: str | dict[str, Any]
    """The example's input."""
    target: Any = None
    """The example's target."""
    output: str | None = None
    """The model's reply (None when the call failed)."""
    score: float | None = None
    """The scorer's value in [0, 1] (None when the call or the scorer failed)."""
    error: str | None = None
    """What failed ("ProviderError: ...", "scorer: ..."), or None."""
    detail: str | None = None
    """The scorer's note (label found, number read, ...)."""


class EvalResult(BaseModel):
    """A prompt measured on labelled examples."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    """The prompt template that was measured."""
    model: str
    """The model that ran it."""
    split: str = "all"
    """Which examples: 'dev', 'test' or 'all' (a label; the caller chose the examples)."""
    score: float | None
    """Mean score over the examples that got one; None if none did."""
    n: int
    """Examples that got a score."""
    ci_low: float | None = None
    """Lower end of the 95% CI."""
    ci_high: float | None = None
    """Upper end of the 95% CI."""
    errors: int = 0
    """Examples whose call or scorer failed."""
    records: list[ExampleRecord] = Field(default_factory=list)
    """One record per example, in example order."""
    usage: Usage = Field(default_factory=Usage)
    """Model calls made by this evaluation, hits and failures included: the prompt's calls (unless a caller's
    `call` function made them, which then accounts for them itself) and a judge scorer's calls."""
    spent: Tally = Field(default_factory=Tally)
    """The same calls as a loop's budget counts them: a cache hit with its original call's tokens and cost, so
    an evaluation replayed from the cache spends what the first one did."""

    @property
    def scores(self) -> list[float | None]:
        """Per-example scores in example order (None where missing)."""
        return [r.score for r in self.records]

    @property
    def prompt_hash(self) -> str:
        """sha256 (16 hex) of the prompt text."""
        return hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()[:16]

    @property
    def per_example(self) -> pd.DataFrame:
        """A frame with one row per example: input, target, output, score, error, detail."""
        import pandas as pd

        cols = ["input", "target", "output", "score", "error", "detail"]
        return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in self.records], columns=cols)

    def grounded(self, split: str | None = None) -> GroundedScore:
        """The result as the record a loop keeps (`split` defaults to this result's)."""
        return GroundedScore(
            split=split or self.split,
            score=self.score,
            n=self.n,
            ci_low=self.ci_low,
            ci_high=self.ci_high,
            errors=self.errors,
            scores=self.scores,
            prompt_hash=self.prompt_hash,
        )


def _examples(examples: Sequence[Example | dict[str, Any]]) -> list[Example]:
    out = []
    for i, ex in enumerate(examples):
        if isinstance(ex, Example):
            out.append(ex)
        elif isinstance(ex, dict):
            try:
                out.append(Example.model_validate(ex))
            except ValueError as e:
                raise ConfigError(f"examples[{i}]: {e}") from None
        else:
            raise ConfigError(f"examples[{i}]: an Example or a dict with 'input' and 'target', got {ex!r}")
    return out


DEFAULT_CONCURRENCY = 8
"""Examples an evaluation keeps in flight when it does not say (a model other than a batched local one)."""


def default_concurrency(model: str) -> int:
    """Examples in flight by default: a local model on the batching engine takes as many as it decodes at once
    (`promptlab.llm.local.engine.capacity`), any other `DEFAULT_CONCURRENCY`."""
    from ..llm.providers.resolved import resolve_model

    try:
        resolved = resolve_model(model)
        return (resolved.capacity or DEFAULT_CONCURRENCY) if resolved.batched else DEFAULT_CONCURRENCY
    except Exception:  # an unknown model name or a bad setting: named by the call itself, before any request
        return DEFAULT_CONCURRENCY


async def aevaluate_prompt(
    prompt: str,
    examples: Sequence[Example | dict[str, Any]],
    *,
    model: str,
    scorer: str | dict[str, Any] | Scorer,
    system: str | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = 256,
    sample: int = 0,
    concurrency: int | None = None,
    cache: CacheArg = None,
    settings: Settings | None = None,
    call: CallFn | None = None,
    split: str = "all",
    **params: Any,
) -> EvalResult:
    """Run `prompt` on every example with `model` and score the replies.

    Args:
        prompt: the prompt template; applied to each input by the placeholder rule (`promptlab.eval.tasks`).
        examples: the labelled examples (Example records or dicts), scored in this order.
        model: the model that runs the prompt (with `call`, only a label).
        scorer: a scorer kind, a {"kind": ..., options} spec, or a Scorer.
        system: a system message sent before the prompt (none when None).
        temperature: sampling temperature.
        max_tokens: cap on each reply.
        sample: the cache's sample index (independent draws at temperature > 0).
        concurrency: examples in flight at once (the model's call limit for these calls is raised to it when
            lower); None: `DEFAULT_CONCURRENCY`, or for a local model on the batching engine as many as it
            decodes at once (`promptlab.llm.local.engine.capacity`: a batch of more sequences costs less per example).
        cache: as for `promptlab.complete`.
        settings: retries, timeouts; its concurrency for `model` is replaced by `concurrency`.
        call: `async (index, formatted prompt, system) -> text` making the model call instead of
            `acomplete` (the loops pass one that records steps); it raises on failure.
        split: a label kept on the result ('dev', 'test' or 'all').
        **params: further litellm parameters for the prompt's calls, as `promptlab.acomplete` takes them
            (generation parameters enter the cache key; `api_base` and `api_key` never do).

    Returns:
        An EvalResult with the mean, n, CI, errors, per-example records and usage.
    """
    items = _examples(examples)  # validate
    judge = get_scorer(scorer)
    concurrency = _checked_concurrency(concurrency, model, call, params)
    if cache is None or cache is True or isinstance(cache, (str, os.PathLike)):
        cache = open_cache(None if isinstance(cache, bool) else cache)  # once, not once per example
    base = settings or DEFAULT_SETTINGS  # plan: how the calls are made
    # this evaluation's own gate holds it to `concurrency` examples at once; the model's limit is raised to that
    # when lower (so concurrency=16 gets 16 in flight), never lowered (other calls to the model keep theirs)
    at_once = max(concurrency, concurrency_limit(resolve_model(model), base))
    limited = dataclasses.replace(base, per_model_concurrency={**base.per_model_concurrency, model: at_once})
    call_args = {"temperature": temperature, "max_tokens": max_tokens, "sample": sample, "settings": limited}
    gate = asyncio.Semaphore(concurrency)
    run = _Evaluation(prompt, judge, model, system, call, cache, base, gate, Usage(), Tally(), {**call_args, **params})
    records = list(await asyncio.gather(*(run.one(i, ex) for i, ex in enumerate(items))))  # run
    mean, n, low, high = mean_ci([r.score for r in records])
    return EvalResult(
        prompt=prompt,
        model=model,
        split=split,
        score=mean,
        n=n,
        ci_low=low,
        ci_high=high,
        errors=sum(r.error is not None for r in records),
        records=records,
        usage=run.usage,
        spent=run.spent,
    )


def _checked_concurrency(concurrency: int | None, model: str, call: CallFn | None, params: dict[str, Any]) -> int:
    """The examples in flight (the default when None), after checking it and that `call` comes without params."""
    if concurrency is None:
        concurrency = default_concurrency(model) if call is None else DEFAULT_CONCURRENCY
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency: a whole number >= 1, got {concurrency!r}")
    if call is not None and params:
        raise ConfigError(
            f"{', '.join(params)}: model parameters have no effect when a `call` function makes the calls"
        )
    return concurrency


@dataclasses.dataclass
class _Evaluation:
    """One evaluation in flight: runs each example through the model and the scorer, counting what it spends."""

    prompt: str
    judge: Scorer
    model: str
    system: str | None
    call: CallFn | None
    cache: Any
    settings: Settings
    gate: asyncio.Semaphore
    usage: Usage
    spent: Tally
    call_args: dict[str, Any]
    """What `acomplete` takes besides the model, prompt, system and cache."""

    def account(self, c: Completion) -> None:
        self.usage.add(c)
        self.spent.count(input_tokens=c.input_tokens or 0, output_tokens=c.output_tokens or 0, cost_usd=c.cost_usd)

    async def run_model(self, i: int, text: str) -> str:
        if self.call is not None:
            return await self.call(i, text, self.system)
        try:
            c = await acomplete(self.model, text, system=self.system, cache=self.cache, **self.call_args)
        except Exception:
            self.usage.add_failure(self.model)
            self.spent.count(failed=True)
            raise
        self.account(c)
        return c.text

    async def one(self, i: int, ex: Example) -> ExampleRecord:
        record = ExampleRecord(index=i, id=ex.id, input=ex.input, target=ex.target)
        async with self.gate:
            try:
                record.output = await self.run_model(i, format_prompt(self.prompt, ex.input))
            except Exception as e:
                record.error = f"{type(e).__name__}: {e}"
                return record
            scored: Scored = await score_safely(self.judge, record.output, ex, cache=self.cache, settings=self.settings)
        for c in scored.calls:
            self.account(c)
        for failed in scored.failed_calls:
            self.usage.add_failure(failed)
            self.spent.count(failed=True)
        record.score, record.detail = scored.value, scored.detail
        if scored.error is not None:
            record.error = f"scorer: {scored.error}"
        return record


def evaluate_prompt(prompt: str, examples: Sequence[Example | dict[str, Any]], **kwargs: Any) -> EvalResult:
    """The sync twin of `aevaluate_prompt` (same arguments); works inside a running Jupyter kernel too."""
    return run_sync(aevaluate_prompt(prompt, examples, **kwargs))


__all__ = ["CallFn", "EvalResult", "ExampleRecord", "aevaluate_prompt", "evaluate_prompt"]
