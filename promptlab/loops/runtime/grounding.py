"""Grounded scoring for the loops whose output is a prompt (P³RO, Creator/Critic).

When the task has labelled examples, every iteration's candidate is run on the dev split and scored
(`Iteration.grounded`), and the original and final prompts on the test split (`Run.baseline_test`,
`Run.final_test`, `Run.delta`), whatever `score_source` says. The test split is never seen inside the loop.

`score_source` picks what the router decides on:

- `critic`: the critic's 1-10 average (the grounded score is recorded when there are examples);
- `grounded`: the dev-split score mapped onto 1-10 as `1 + 9 * score` (`grounded_decision_score`), so a
  threshold of 8.5 means dev accuracy >= (8.5 - 1) / 9 = 0.833; the critic still runs (its feedback feeds
  reflection, and calibration needs its scores);
- `both`: the critic decides; the grounded score is recorded next to it.

Every evaluation call is a Step (phase `score_dev` / `score_test`, role `target`, output {"text", "example",
"score"}) placed in example order, so tokens and cost count in totals and a replay records the same run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...errors import ConfigError
from ...eval.evaluate import aevaluate_prompt
from ...eval.stats import paired_delta_ci
from ...eval.tasks import check_task, examples_of, task_scorer
from ...llm.providers import supports_logprobs, validate_model_name
from ...record import Delta, GroundedScore, Iteration, Step, Task
from .base import LoopConfig
from .context import RunContext

ScoreSource = Literal["critic", "grounded", "both"]
ScoreMode = Literal["sampled", "expected"]


class PromptLoopConfig(LoopConfig):
    """Settings shared by the loops whose output is a prompt: who runs candidates, what decides, how critics
    score, and what a critic reply that cannot be read counts as."""

    target_model: str | None = None
    """Model that executes candidate prompts on the examples (None: the generator model)."""
    score_source: ScoreSource = "critic"
    """What the router decides on: 'critic' (critic average), 'grounded' (1 + 9 x dev score; needs examples)
    or 'both' (critic decides, grounded recorded)."""
    eval_max_tokens: int | None = Field(256, ge=1)
    """Cap on each reply when a candidate runs on an example (evaluation runs at temperature 0)."""
    eval_concurrency: int = Field(4, ge=1, le=64)
    """Examples evaluated at once."""
    score_mode: ScoreMode = "sampled"
    """'sampled': the integer the critic wrote; 'expected': the probability-weighted mean over 1-10 from the
    critic's token log-probabilities (G-Eval; refused for a critic model without them)."""
    parse_failure_score: float | None = Field(None, ge=1, le=10)
    """Score given for a critic reply that cannot be read: None (missing, error recorded; promptlab's
    default) or a number (the design documents use 5)."""

    def target(self) -> str:
        """The model that runs candidate prompts on examples."""
        return self.target_model or self.generator_model or self.model


def check_prompt_loop(task: Task, cfg: PromptLoopConfig, critic_models: list[str]) -> list[str]:
    """ConfigError (naming the field) before any call; returns the extra models the run will use
    (the target model and a judge scorer's model) for the preflight."""
    if cfg.target_model is not None:
        validate_model_name(cfg.target_model)
    if cfg.score_source == "grounded" and not task.grounded:
        raise ConfigError(f"score_source: 'grounded' needs a task with examples; task {task.id!r} has none "
                          "(use 'critic', or give the task examples, a scorer and a split)")
    if cfg.score_mode == "expected":
        blind = [m for m in dict.fromkeys(critic_models) if not supports_logprobs(m)]
        if blind:
            raise ConfigError(f"score_mode: 'expected' needs token log-probabilities, which {', '.join(blind)} "
                              "does not return; use score_mode 'sampled'")
    extra: list[str] = []
    if task.grounded:
        check_task(task, where=f"task {task.id!r}")
        extra.append(cfg.target())
        judge = (task.scorer or {}).get("model")
        if isinstance(judge, str):
            extra.append(judge)
    return extra


def grounded_decision_score(score: float | None) -> float | None:
    """A dev-split score in [0, 1] mapped onto the critic's 1-10 scale: `1 + 9 * score`."""
    return None if score is None else 1.0 + 9.0 * score


def decision_score(it: Iteration, cfg: PromptLoopConfig) -> float | None:
    """What the router uses for `it` (also recorded as `Iteration.decision_score`)."""
    if cfg.score_source == "grounded":
        return grounded_decision_score(it.grounded.score if it.grounded else None)
    return it.average


async def measure(ctx: RunContext, cfg: PromptLoopConfig, prompt: str, split: str,
                  iteration: Iteration | None = None) -> GroundedScore:
    """Run `prompt` on the task's `split` examples with the target model at temperature 0 and score it;
    each call is a Step in example order, a judge scorer's calls count in the run's totals."""
    task = ctx.run.task
    examples = examples_of(task, split)
    phase = f"score_{split}"
    steps: dict[int, Step] = {}
    n_errors = len(ctx.run.errors)

    async def call(index: int, text: str, system: str | None) -> str:
        c, step = await ctx.completion("target", phase, text, iteration=iteration, system=system,
                                       model=cfg.target(), place=False, temperature=0.0,
                                       max_tokens=cfg.eval_max_tokens)
        step.output = {"text": c.text if c is not None else None, "example": index}
        steps[index] = step
        if c is None:
            raise RuntimeError(step.error.message if step.error else "the model call failed")
        return c.text

    result = await aevaluate_prompt(prompt, examples, model=cfg.target(), scorer=task_scorer(task),
                                    system=task.system, concurrency=cfg.eval_concurrency, cache=ctx.cache,
                                    settings=ctx.settings, call=call, split=split)
    for rec in result.records:
        step = steps.get(rec.index)
        if step is None:
            continue
        step.output["score"] = rec.score
        if rec.error and rec.error.startswith("scorer:"):
            step.output["scorer_error"] = rec.error
        ctx.place(step, iteration)
    order = {id(s.error): i for i, s in steps.items() if s.error is not None}
    ctx.run.errors[n_errors:] = sorted(ctx.run.errors[n_errors:], key=lambda e: order.get(id(e), -1))
    _account_judge(ctx, result.usage.model_dump())
    return result.grounded(split)


def _account_judge(ctx: RunContext, usage: dict[str, Any]) -> None:
    """Add a judge scorer's calls (the evaluation's usage; the target's calls were counted as steps)."""
    t = ctx.run.totals
    t.calls += usage.get("calls", 0)
    t.cache_hits += usage.get("cache_hits", 0)
    t.failed_calls += usage.get("failed_calls", 0)
    t.input_tokens += usage.get("input_tokens", 0)
    t.output_tokens += usage.get("output_tokens", 0)
    cost = usage.get("cost_usd", 0.0)
    if t.cost_usd is not None:
        t.cost_usd = None if cost is None else round(t.cost_usd + cost, 10)


async def measure_test(ctx: RunContext, cfg: PromptLoopConfig, final_prompt: str | None) -> None:
    """The original and the final prompt on the test split, and their paired difference."""
    run = ctx.run
    run.baseline_test = await measure(ctx, cfg, run.task.prompt, "test")
    if final_prompt is None:
        return
    run.final_test = await measure(ctx, cfg, final_prompt, "test")
    value, n, low, high = paired_delta_ci(run.baseline_test.scores, run.final_test.scores)
    run.delta = Delta(value=value, n=n, ci_low=low, ci_high=high)


__all__ = ["PromptLoopConfig", "ScoreMode", "ScoreSource", "check_prompt_loop", "decision_score",
           "grounded_decision_score", "measure", "measure_test"]
