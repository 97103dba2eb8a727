"""The run record every loop returns: tasks, steps, iterations, scores, totals, errors.

A `Run` round-trips through JSON without loss (`Run.model_validate_json(run.model_dump_json())`).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from .llm.spending.tally import Tally


class Example(BaseModel):
    """One labelled example of a grounded task: an input the prompt is run on and the target answer."""

    model_config = ConfigDict(extra="forbid")

    input: str | dict[str, Any]
    """Filled into the prompt: `{input}` for a string, `{field}` for each key of a dict."""
    target: Any
    """The right answer, as the task's scorer expects it (required; may be null only if the scorer allows)."""
    id: str | None = None
    """Optional example id (kept in per-example records)."""


class Split(BaseModel):
    """How a grounded task's examples divide into dev (used inside the loop) and test (final measure only)."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    """Seed of the shuffle that assigns examples to splits (fixed: the same split on every run)."""
    dev: StrictInt | StrictFloat = Field(0.3, gt=0, allow_inf_nan=False)
    """Dev size: a count (int >= 1) or a fraction of the examples (float < 1); `true` is neither."""
    test: StrictInt | StrictFloat | None = Field(None, gt=0, allow_inf_nan=False)
    """Test size: a count, a fraction, or None for every example not in dev."""


class Task(BaseModel):
    """One thing to work on: a prompt (or request) and the goal it should meet; a grounded task also
    carries labelled examples, a scorer and a split (see `promptlab.eval.tasks`)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Stable task identifier (unique within a task set)."""
    prompt: str
    """The initial prompt, or the user's request for agent loops."""
    goal: str = ""
    """What a better result achieves, in the user's words."""
    system: str | None = None
    """System message sent with a candidate prompt when it is run on the examples (None: none)."""
    examples: list[Example] | None = None
    """Labelled examples (a file path in a task file is read into this list when the file is loaded)."""
    examples_source: str | None = None
    """Where the examples came from (the file path as written in the task file), for provenance."""
    scorer: dict[str, Any] | None = None
    """Scorer spec, e.g. {"kind": "choice", "labels": ["positive", "negative"]} (see promptlab.eval.scorers)."""
    split: Split | None = None
    """Dev/test split of the examples (None: `Split()` defaults when there are examples)."""

    @property
    def grounded(self) -> bool:
        """True when the task has labelled examples (prompts can be measured on them)."""
        return bool(self.examples)

    @field_validator("id", "prompt")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class ModelCall(BaseModel):
    """The accounting of one model call made by a step."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """Model name."""
    cache_hit: bool = False
    """Answered from the cache (adds no tokens or cost)."""
    input_tokens: int | None = None
    """Input tokens reported for the original call."""
    output_tokens: int | None = None
    """Output tokens reported for the original call."""
    cost_usd: float | None = None
    """Cost of the original call; None where the price is unknown."""
    latency_s: float = 0.0
    """Provider wait of the original call."""
    attempts: int = 1
    """Provider calls made (retries and structured re-asks)."""


class StepError(BaseModel):
    """An error recorded where it happened; the loop went on or stopped by its own rule."""

    model_config = ConfigDict(extra="forbid")

    iteration: int | None = None
    """Iteration it happened in (None for setup or final phases)."""
    phase: str
    """Phase it happened in."""
    role: str
    """Role (or tool) that failed."""
    kind: str
    """Exception class name (ParseError, ProviderError, ToolError, ...)."""
    message: str
    """What went wrong."""
    raw: str | None = None
    """The raw model output that could not be used, where there was one."""
    infrastructure: bool = False
    """True for an infrastructure failure (provider error after retries, missing key, connection refused):
    not research data. A run with one is incomplete, and a sweep re-runs its cell."""


class Step(BaseModel):
    """One action of a role (a model call or a tool run) and what it produced."""

    model_config = ConfigDict(extra="forbid")

    iteration: int | None = None
    """Iteration number (0: the starting prompt as candidate 0), or None for setup and final phases."""
    phase: str
    """Phase name (plan, generate, evaluate, reflect, decide, tool, synthesize, polish, ...)."""
    role: str
    """Role (or tool name) that acted."""
    model: str | None = None
    """Model that played the role, for model steps."""
    output: dict[str, Any] = Field(default_factory=dict)
    """The structured output (or tool result), JSON-safe."""
    call: ModelCall | None = None
    """Accounting of the model call, for model steps."""
    raw: str | None = None
    """The reply's raw text, where the loop keeps it (PES keeps its planning replies)."""
    error: StepError | None = None
    """The failure, if the step failed."""


class Score(BaseModel):
    """One judged score; `score` is None when it is missing (the judge's output was unusable)."""

    model_config = ConfigDict(extra="forbid")

    criterion: str
    """What was judged ('overall' where there is one score)."""
    score: float | None
    """The score (1-10 for graded loops, 1/0 for pass/fail verdicts), or None when missing."""
    justification: str = ""
    """The judge's reason."""
    judge: str | None = None
    """Which judge gave it (a model name, or 'critic[1]' for one of several)."""
    mode: str | None = None
    """How the score was produced: 'sampled' (the integer the judge wrote) or 'expected' (probability-weighted
    mean over 1-10 from the judge's token log-probabilities); None for records made before modes existed."""


class GroundedScore(BaseModel):
    """A prompt measured on labelled examples: the mean scorer value with its 95% CI."""

    model_config = ConfigDict(extra="forbid")

    split: str
    """Which examples: 'dev' (inside the loop) or 'test' (final measure)."""
    score: float | None
    """Mean scorer value in [0, 1] over the examples that got a score; None if none did."""
    n: int
    """Examples that got a score (errors excluded)."""
    ci_low: float | None = None
    """Lower end of the 95% CI (Wilson for 0/1 scores, bootstrap otherwise)."""
    ci_high: float | None = None
    """Upper end of the 95% CI."""
    errors: int = 0
    """Examples whose model call or scorer failed (their score is missing, never invented)."""
    scores: list[float | None] = Field(default_factory=list)
    """Per-example scores in split order (None where missing): what paired comparisons use."""
    prompt_hash: str | None = None
    """sha256 (16 hex) of the prompt text that was measured."""


class Delta(BaseModel):
    """Final minus baseline on the same test examples, with a paired bootstrap 95% CI."""

    model_config = ConfigDict(extra="forbid")

    value: float | None
    """Mean of per-example (final - baseline) over examples scored in both; None if none."""
    n: int
    """Examples scored in both measures."""
    ci_low: float | None = None
    """Lower end of the paired bootstrap 95% CI."""
    ci_high: float | None = None
    """Upper end of the paired bootstrap 95% CI."""


class Iteration(BaseModel):
    """One iteration of a loop: its candidate, scores, decision and reflection."""

    model_config = ConfigDict(extra="forbid")

    index: int
    """Iteration number: 1, 2, ... for a loop's steps; 0 for the starting prompt scored as candidate 0 (P³RO and
    Creator/Critic with `include_start`)."""
    candidate: str | None = None
    """The candidate this iteration produced (prompt text, plan, step output)."""
    scores: list[Score] = Field(default_factory=list)
    """Per-criterion (or per-critic) scores."""
    average: float | None = None
    """The iteration's comparable score (mean of present scores, or the aggregate); None if none."""
    decision: str | None = None
    """What the loop decided after this iteration."""
    reason: str | None = None
    """Why it decided that."""
    reflection: str | None = None
    """The lesson drawn for the next iteration."""
    grounded: GroundedScore | None = None
    """The candidate measured on the dev split (grounded tasks only)."""
    decision_score: float | None = None
    """The 1-10 score the router used (critic average, or 1 + 9 x grounded score; see score_source)."""
    metrics: dict[str, float | int | str | None] = Field(default_factory=dict)
    """Loop-specific per-iteration figures (tool_successes, tool_errors, retries, ...)."""
    spent: Tally | None = None
    """What the run had spent when this iteration was decided (setup included): every call the loop made,
    cache hits counted with the original call's tokens and cost, test-split measurement left out. What a
    budget (`budget_calls`, `budget_tokens`) counts, and what equal-budget analysis truncates by."""
    incumbent: int | None = None
    """The index of the iteration whose candidate the run would return if it stopped after this decision (the
    loop's own selection rule: e.g. the best dev score so far); None where the loop returns no prompt (PES,
    PCEE) or had none to return yet. What `analysis.equal_budget` reads off at each budget point."""
    test: GroundedScore | None = None
    """This iteration's candidate measured on the test split, after the loop and outside its budget: set for
    every candidate that was ever the incumbent when the config's `test_incumbents` is on (None otherwise)."""
    parents: list[int] = Field(default_factory=list)
    """The iterations whose candidates this one's was made from (GEPA: the candidate it mutated, or a merge's
    two); empty where the loop does not record a lineage. With `index`, the edges of the search tree."""
    steps: list[Step] = Field(default_factory=list)
    """Every step taken in this iteration, in order."""


class Totals(Tally):
    """Totals over a run (`Tally`: cache hits count as calls but add no tokens or cost), with its wall time."""

    wall_time_s: float = 0.0
    """Wall-clock seconds of the run (differs between replays)."""


class Run(BaseModel):
    """The full record of one loop run."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Record format version."""
    run_id: str
    """Unique id of this run (a uuid4 as 32 hex digits; a replay from the cache gets a new one)."""
    loop: str
    """Loop name (p3ro, creator_critic, pes, pcee, opro, ape, protegi, resample)."""
    task: Task
    """The task worked on."""
    config: dict[str, Any]
    """The loop config, as JSON."""
    models: dict[str, str] = Field(default_factory=dict)
    """The model that played each role."""
    sample: int = 0
    """Replicate index (the cache's sample index)."""
    setup: list[Step] = Field(default_factory=list)
    """Steps before the first iteration (criteria, initial strategy, ...)."""
    iterations: list[Iteration] = Field(default_factory=list)
    """The iterations, in order."""
    final: list[Step] = Field(default_factory=list)
    """Steps after the last iteration (polish, synthesis, judge)."""
    final_output: str | None = None
    """The loop's result: best prompt, final answer, last step output."""
    final_scores: list[Score] = Field(default_factory=list)
    """Scores of the final output where the loop judges it (e.g. a judge's grade)."""
    best_iteration: int | None = None
    """Iteration whose candidate ranked highest by the loop's own rule (ties: the earliest): the decision
    score for P³RO and Creator/Critic (so it is `info['final_iteration']` where the loop returns its best),
    the average otherwise; None when no candidate had a score."""
    best_score: float | None = None
    """That iteration's average (the critic average, comparable across score sources; its dev score is
    `Iteration.grounded`). None when the iteration was chosen by a grounded score and the critic failed."""
    stop_reason: str = ""
    """Why the loop stopped (threshold, max_iterations, no_tool_calls, plan_complete, budget, error, ...)."""
    summary: str | None = None
    """A readable account of the run (P³RO's journey summary, PES metadata, ...)."""
    baseline_test: GroundedScore | None = None
    """The task's original prompt measured on the test split (grounded tasks only)."""
    final_test: GroundedScore | None = None
    """The run's final output (prompt) measured on the test split (grounded tasks only)."""
    delta: Delta | None = None
    """final_test minus baseline_test, paired over the test examples."""
    provenance: dict[str, Any] = Field(default_factory=dict)
    """What makes two runs comparable: versions, reported model ids, endpoints, prompt/task hashes."""
    info: dict[str, Any] = Field(default_factory=dict)
    """Loop-specific results (criteria, sources, workspace path, ...)."""
    totals: Totals = Field(default_factory=Totals)
    """Calls, tokens, cost, cache hits and wall time."""
    spent: Tally | None = None
    """What the run spent towards its budget (`budget_calls`, `budget_tokens`): every call but test-split
    measurement, cache hits with the original call's tokens and cost, so a replay spends the same; None for
    records made before budgets existed."""
    errors: list[StepError] = Field(default_factory=list)
    """Every error recorded during the run."""
    started_at: float = 0.0
    """Unix time the run started (differs between replays)."""

    @property
    def incomplete(self) -> bool:
        """True when an infrastructure failure touched the run (its cell must be re-run, not reported)."""
        return any(e.infrastructure for e in self.errors)

    def comparable(self) -> dict[str, Any]:
        """The run as JSON without run ids and wall-clock fields: equal for a replay from the cache.

        Run ids (this run's and its delegated runs', also inside task ids and file names) read '<run_id>'."""
        data = json.loads(RUN_ID.sub("<run_id>", self.model_dump_json(exclude={"started_at", "run_id"})))
        data["info"].pop("workspace", None)  # each run (and replay) gets its own workspace directory
        data["totals"].pop("wall_time_s")
        for part in (data["setup"], data["final"], *[it["steps"] for it in data["iterations"]]):
            for step in part:
                if step.get("call"):
                    step["call"].pop("cache_hit")
        data["totals"].update(calls=None, cache_hits=None, input_tokens=None, output_tokens=None, cost_usd=None)
        return data


RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")
"""A run id (`new_run_id`) wherever it is written."""


def new_run_id() -> str:
    """A fresh run id, unique per run: a uuid4 as 32 hex digits (the design document's PromptForge gives each run a uuid).

    Two runs with the same loop, task, config and sample get different ids, so nothing a run writes under its
    id (workspaces, delegated-task records) is overwritten by another. No model call sees the id, so cache keys
    never depend on it and a replay from the cache is still a replay (`Run.comparable` leaves the id out)."""
    return uuid.uuid4().hex
