"""Grounded scoring for the loops whose output is a prompt (P³RO, Creator/Critic), and the API a new
prompt-optimising loop builds on.

More in docs/grounded.md, section "promptlab.loops.runtime.grounding".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from ...critics.simulated import SimCritic, simulated_critic
from ...errors import ConfigError
from ...eval.evaluate import EvalResult, aevaluate_prompt
from ...eval.stats import paired_delta_ci
from ...eval.tasks import check_task, examples_of, task_scorer
from ...llm.call.entry import CacheArg
from ...llm.call.preflight import validate_model_name
from ...llm.call.settings import Settings
from ...llm.providers.resolved import resolve_model
from ...record import Delta, GroundedScore, Iteration, Run, Score, Step, Task
from .budget import OUTPUT_PHASE
from .config import LoopConfig
from .context import RunContext
from .missing import record_unscored
from .role_call import RoleCall

ScoreSource = Literal["critic", "grounded", "both"]
ScoreMode = Literal["sampled", "expected"]


class GroundedConfig(LoopConfig):
    """Settings of a loop that measures candidate prompts on a grounded task's examples: who runs them, how
    long a reply may be, how many examples are in flight, and which candidates are measured on test."""

    target_model: str | None = None
    """Model that executes candidate prompts on the examples (None: the generator model)."""
    eval_max_tokens: int | None = Field(256, ge=1)
    """Cap on each reply when a candidate runs on an example (evaluation runs at temperature 0)."""
    eval_concurrency: int = Field(4, ge=1, le=64)
    """Examples evaluated at once."""
    test_incumbents: bool = False
    """Also measure on the test split, after the loop and outside its budget, every candidate that was ever
    the one the run would return (`Iteration.incumbent`; its score in `Iteration.test`), so that
    `analysis.equal_budget` gives exact test scores at every budget. It costs one test-split evaluation (60
    calls on the shipped tasks) per incumbent that is neither the starting nor the final prompt, cached at
    sample 0 and so shared by every run that measures the same prompt."""

    def target(self) -> str:
        """The model that runs candidate prompts on examples."""
        return self.target_model or self.generator_model or self.model


class PromptLoopConfig(GroundedConfig):
    """Settings shared by the critic-driven loops whose output is a prompt (P³RO, Creator/Critic): what decides,
    how critics score, whether the starting prompt is a candidate, and what an unreadable critic reply counts
    as."""

    SIMULATED_CRITICS = True

    score_source: ScoreSource = "critic"
    """What the router decides on: 'critic' (critic average), 'grounded' (1 + 9 x dev score; needs examples)
    or 'both' (critic decides, grounded recorded)."""
    score_mode: ScoreMode = "sampled"
    """'sampled': the integer the critic wrote; 'expected': the probability-weighted mean over 1-10 from the
    critic's token log-probabilities (G-Eval; refused for a critic model without them)."""
    parse_failure_score: float | None = Field(None, ge=1, le=10)
    """Score given for a critic reply that cannot be read: None (missing, error recorded; promptlab's
    default) or a number (the design documents use 5)."""
    record_outputs: bool = False
    """On a task without examples, run the starting and the returned prompt once each with the target model after
    the loop (temperature 0, outside its budget) and record the replies (`Run.final`, phase 'output', output
    {"text", "prompt": "start" | "returned"}): what people judge (`promptlab.people`). A grounded task's test
    replies serve instead."""
    include_start: bool | None = None
    """Score the starting prompt as candidate 0 (iteration 0: on dev and by the critics) so that stopping and
    the final selection may return it. None: yes for a grounded task, no otherwise; False: the design
    documents' behaviour (only rewrites are candidates). Generation is the same either way."""

    def starts_with_start(self, task: Task) -> bool:
        """Whether the starting prompt is candidate 0 of a run on `task` (`include_start`, resolved)."""
        return task.grounded if self.include_start is None else self.include_start


def check_prompt_loop(task: Task, cfg: PromptLoopConfig, critic_models: list[str]) -> list[str]:
    """ConfigError (naming the field) before any call; returns the extra models the run will use
    (the target model and a judge scorer's model) for the preflight."""
    if cfg.target_model is not None:
        validate_model_name(cfg.target_model)
    if cfg.score_source == "grounded" and not task.grounded:
        raise ConfigError(
            f"score_source: 'grounded' needs a task with examples; task {task.id!r} has none "
            "(use 'critic', or give the task examples, a scorer and a split)"
        )
    simulated = [m for m in dict.fromkeys(critic_models) if simulated_critic(m) is not None]
    if simulated and not task.grounded:
        raise ConfigError(
            f"critic_model: {', '.join(simulated)} is a simulated critic, which scores a candidate "
            f"from its dev accuracy; task {task.id!r} has no examples to measure it on (use a model, "
            "or give the task examples, a scorer and a split)"
        )
    judge = (task.scorer or {}).get("model")
    for field, model in (("target_model", cfg.target()), ("scorer.model", judge)):
        if simulated_critic(model) is not None:
            raise ConfigError(f"{field}: {model!r} is a simulated critic; it can only play a critic role")
    if cfg.score_mode == "expected":
        called = [resolve_model(m) for m in dict.fromkeys(critic_models)]
        blind = [m.name for m in called if m.makes_calls and not m.logprobs]
        if blind:
            raise ConfigError(
                f"score_mode: 'expected' needs token log-probabilities, which {', '.join(blind)} "
                "does not return; use score_mode 'sampled'"
            )
    extra: list[str] = []
    if task.grounded:
        check_task(task, where=f"task {task.id!r}")
        extra.append(cfg.target())
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


EVAL_SAMPLE = 0
"""The sample index of every evaluation call: at temperature 0 a prompt's reply to an example is one
measurement, shared by every run, replicate and configuration that measures that prompt (replicates differ by
what their loops write, not by measuring the same prompt again), and found in the cache after the first."""


async def measure(
    ctx: RunContext,
    cfg: GroundedConfig,
    prompt: str,
    split: str,
    iteration: Iteration | None = None,
    *,
    indices: Sequence[int] | None = None,
) -> GroundedScore:
    """Run `prompt` on the task's `split` examples with the target model at temperature 0 (sample
    `EVAL_SAMPLE`, whatever the run's) and score it; each call is a Step in example order, a judge scorer's
    calls count in the run's totals (and, outside the test split, in its budget spend).

    With `indices` (positions within the split), only those examples are run: the result's `scores` follow
    `indices`, and each step's `example` is the split position."""
    return (await measure_examples(ctx, cfg, prompt, split, iteration, indices=indices)).grounded(split)


async def measure_examples(
    ctx: RunContext,
    cfg: GroundedConfig,
    prompt: str,
    split: str,
    iteration: Iteration | None = None,
    *,
    indices: Sequence[int] | None = None,
) -> EvalResult:
    """`measure`, returning the whole EvalResult: per example its input, target, the model's reply, the
    scorer's value and note, and any error (`records`, in the order of `indices`), for a loop that shows them
    to a model (GEPA's reflective dataset)."""
    task = ctx.run.task
    split_examples = examples_of(task, split)
    positions = list(range(len(split_examples))) if indices is None else list(indices)
    examples = [split_examples[i] for i in positions]
    phase = f"score_{split}"
    steps: dict[int, Step] = {}
    n_errors = len(ctx.run.errors)

    async def call(index: int, text: str, system: str | None) -> str:
        c, step = await ctx.ask(
            RoleCall(
                "target",
                phase,
                text,
                iteration=iteration,
                system=system,
                model=cfg.target(),
                place=False,
                temperature=0.0,
                max_tokens=cfg.eval_max_tokens,
                sample=EVAL_SAMPLE,
            )
        )
        step.output = {"text": c.text if c is not None else None, "example": positions[index]}
        steps[index] = step
        if c is None:
            raise RuntimeError(step.error.message if step.error else "the model call failed")
        return c.text

    result = await aevaluate_prompt(
        prompt,
        examples,
        model=cfg.target(),
        scorer=task_scorer(task),
        system=task.system,
        concurrency=cfg.eval_concurrency,
        cache=ctx.cache,
        settings=ctx.settings,
        call=call,
        split=split,
    )
    _record_scored(ctx, result, steps, iteration, n_errors)
    record_unscored(ctx, result, phase, iteration)
    _account_judge(ctx, result.usage.model_dump(), phase)
    ctx.spend_tally(phase, result.spent)
    return result


def _record_scored(
    ctx: RunContext, result: EvalResult, steps: dict[int, Step], iteration: Iteration | None, n_errors: int
) -> None:
    """Place each example's step in example order with its score (and a scorer's error), and put the errors
    the measurement added in that order too."""
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


def simulated_score(model: str, it: Iteration, candidate: str, *, sample: int, criterion: str, judge: str) -> Score:
    """A simulated critic's Score of `candidate` from its dev accuracy (`it.grounded`, measured first): mode
    "simulated", or missing when the candidate has no dev score."""
    critic = sim(model)
    accuracy = it.grounded.score if it.grounded is not None else None
    anchor = it.metrics.get("anchor")  # a previous score shown to it (a re-score of the anchoring probe)
    value = critic.score(
        accuracy,
        candidate,
        sample=sample,
        criterion=criterion,
        iteration=it.index,
        anchor=float(anchor) if isinstance(anchor, int | float) else None,
    )
    if value is None:
        return Score(
            criterion=criterion,
            score=None,
            judge=judge,
            justification=f"missing: the candidate has no dev score for the simulated critic {critic.name}",
        )
    return Score(
        criterion=criterion,
        score=value,
        judge=judge,
        mode="simulated",
        justification=f"simulated critic {critic.name}: {critic.formula} with a = {accuracy:.4g}",
    )


def sim(model: str) -> SimCritic:
    """The simulated critic `model` names (a ConfigError for a model that is called)."""
    critic = simulated_critic(model)
    if critic is None:
        raise ConfigError(f"{model!r} is not a simulated critic")
    return critic


def simulated_step(it: Iteration, phase: str, role: str, model: str, scores: list[Score]) -> Step:
    """The record of a simulated critic's turn: a step without a model call (`call` is None, so it adds no
    call, token or cost), its output the scores it gave."""
    return Step(
        iteration=it.index,
        phase=phase,
        role=role,
        model=model,
        output={"simulated": sim(model).formula, "scores": {s.criterion: s.score for s in scores}},
    )


def simulated_info(models: list[str]) -> dict[str, Any]:
    """What a Run records about the simulated critics among `models` (name -> kind, parameters, formula)."""
    return {m: c.record() for m in dict.fromkeys(models) if (c := simulated_critic(m)) is not None}


def _account_judge(ctx: RunContext, usage: dict[str, Any], phase: str) -> None:
    """Add a judge scorer's calls (the evaluation's usage; the target's calls were counted as steps) to the
    run's totals (its budget spend is `EvalResult.spent`, counted by `measure`)."""
    t = ctx.run.totals
    t.calls += usage.get("calls", 0)
    t.cache_hits += usage.get("cache_hits", 0)
    t.failed_calls += usage.get("failed_calls", 0)
    t.input_tokens += usage.get("input_tokens", 0)
    t.output_tokens += usage.get("output_tokens", 0)
    cost = usage.get("cost_usd", 0.0)
    if t.cost_usd is not None:
        t.cost_usd = None if cost is None else round(t.cost_usd + cost, 10)


async def measure_test(ctx: RunContext, cfg: GroundedConfig, final_prompt: str | None) -> None:
    """The original and the final prompt on the test split, and their paired difference; with
    `test_incumbents`, then every candidate that was ever the run's incumbent (`Iteration.test`), each prompt
    measured once (the start's and the final prompt's measures are reused)."""
    run = ctx.run
    run.baseline_test = await measure(ctx, cfg, run.task.prompt, "test")
    measured = {run.task.prompt: run.baseline_test}
    if final_prompt is not None:
        run.final_test = await measure(ctx, cfg, final_prompt, "test")
        measured.setdefault(final_prompt, run.final_test)
        value, n, low, high = paired_delta_ci(run.baseline_test.scores, run.final_test.scores)
        run.delta = Delta(value=value, n=n, ci_low=low, ci_high=high)
    if not cfg.test_incumbents:
        return
    by_index = {it.index: it for it in run.iterations}
    for index in dict.fromkeys(it.incumbent for it in run.iterations if it.incumbent is not None):
        it = by_index.get(index)
        if it is None or it.candidate is None:
            continue
        if it.candidate not in measured:
            measured[it.candidate] = await measure(ctx, cfg, it.candidate, "test")
        it.test = measured[it.candidate]


async def finish_measures(ctx: RunContext, cfg: PromptLoopConfig, final_prompt: str | None) -> None:
    """After the loop: a grounded task's test-split measures (`measure_test`), or, with `record_outputs`, the
    starting and the returned prompts' own replies (`record_outputs`)."""
    if ctx.run.task.grounded:
        await measure_test(ctx, cfg, final_prompt)
    elif cfg.record_outputs:
        await record_outputs(ctx, cfg, final_prompt)


async def record_outputs(ctx: RunContext, cfg: GroundedConfig, final_prompt: str | None) -> None:
    """The starting and the returned prompt's replies from the target model (temperature 0, `EVAL_SAMPLE`), each a
    `Run.final` step (phase `OUTPUT_PHASE`, output {"text", "prompt"}; a failed call: its error, a null text)."""
    if final_prompt is None:
        return
    for which, prompt in (("start", ctx.run.task.prompt), ("returned", final_prompt)):
        request = RoleCall(
            "target",
            OUTPUT_PHASE,
            prompt,
            system=ctx.run.task.system,
            model=cfg.target(),
            place=False,
            temperature=0.0,
            max_tokens=cfg.eval_max_tokens,
            sample=EVAL_SAMPLE,
        )
        c, step = await ctx.ask(request)
        step.output = {"text": c.text if c is not None else None, "prompt": which}
        ctx.place(step, None)


async def measure_stopped(
    run: Run, cfg: GroundedConfig, *, cache: CacheArg = None, settings: Settings | None = None
) -> Run:
    """Measure a run that was stopped before its test-split measurement (`until_stopped`): its starting and
    returned prompts on the test split, as `measure_test` would have (`Run.baseline_test`, `final_test`,
    `delta`), outside its budget; the calls and their steps are added to the run (`Run.final`), which is
    returned. `cfg` is the run's config (`config_cls.model_validate(run.config)`).

    Raises:
        ConfigError: the run's task has no test examples.
    """
    if not examples_of(run.task, "test"):
        raise ConfigError(f"task {run.task.id!r} has no test examples to measure the prompt on")
    ctx = RunContext(run.loop, run.task, cfg, sample=run.sample, cache=cache, settings=settings)
    ctx.run = run
    await measure_test(ctx, cfg, run.final_output)
    run.info["test_measured_after_stop"] = True
    return run


__all__ = [
    "EVAL_SAMPLE",
    "GroundedConfig",
    "PromptLoopConfig",
    "ScoreMode",
    "ScoreSource",
    "check_prompt_loop",
    "decision_score",
    "grounded_decision_score",
    "measure",
    "measure_examples",
    "measure_stopped",
    "measure_test",
    "finish_measures",
    "record_outputs",
    "simulated_info",
    "simulated_score",
    "simulated_step",
]
