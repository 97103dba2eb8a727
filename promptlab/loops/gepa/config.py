"""GEPA's settings (GEPA's own defaults, as `gepa.optimize` has them) and the rule that turns promptlab's budget
into GEPA's metric-call budget."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..runtime.search import SearchConfig

CandidateSelection = Literal["pareto", "current_best", "epsilon_greedy", "top_k_pareto"]
FrontierType = Literal["instance", "objective", "hybrid", "cartesian"]

COMPONENT = "prompt"
"""The name of the one text component GEPA evolves: the task's prompt."""


class GEPAConfig(SearchConfig):
    """GEPA settings: `generator_model` (or `role_models["reflector"]`) plays GEPA's reflection model,
    `target_model` runs the candidates on the dev split. Every field below is passed to `gepa.optimize` under
    the same name, with GEPA's default."""

    ROLES = ("reflector",)

    temperature: float = Field(1.0, ge=0.0, le=2.0)
    """The reflection model's sampling temperature. GEPA's own reflection LM sends none (the provider's
    default, 1.0 for OpenAI's models) and its examples set 1.0; candidates run at 0."""
    max_iterations: int = Field(10_000, ge=1, le=1_000_000)
    """GEPA iterations at most (`gepa.utils.MaxCandidateProposalsStopper`); GEPA has no such cap by default,
    so this one lies far beyond any budget: the budget ends the run."""
    reflection_minibatch_size: int = Field(3, ge=1, le=1000)
    """Dev examples per reflective step (GEPA's 3): the parent runs on them with traces, the reflection model
    sees its replies and the scorer's verdicts, and the child must beat the parent's sum on them."""
    candidate_selection_strategy: CandidateSelection = "pareto"
    """Which candidate is mutated next (GEPA's 'pareto': drawn from the per-example Pareto front, weighted by
    how many examples it leads on; 'current_best', 'epsilon_greedy' (0.1), 'top_k_pareto' (5))."""
    frontier_type: FrontierType = "instance"
    """What GEPA's Pareto front is kept over (GEPA's 'instance': each dev example)."""
    skip_perfect_score: bool = True
    """Skip a reflective step whose minibatch the parent already answers perfectly (GEPA's default)."""
    use_merge: bool = False
    """Also propose merges of two candidates of the Pareto front (GEPA's system-aware merge; off by default
    in `gepa.optimize`)."""
    max_merge_invocations: int = Field(5, ge=0, le=1000)
    """Merges at most, with `use_merge` (GEPA's 5)."""
    seed: int | None = Field(None, ge=0)
    """GEPA's random seed (candidate selection, minibatches, merges). None: the run's sample (GEPA's default 0
    for sample 0), so replicates differ and a replay from the cache draws the same."""
    max_metric_calls: int | None = Field(None, ge=1)
    """GEPA's own budget, in metric calls (one candidate on one example). None: derived from `budget_calls`
    by `metric_calls` (with only `budget_tokens`, GEPA gets no cap of its own and promptlab's budget ends
    it)."""
    max_reflection_cost: float | None = Field(None, gt=0)
    """Stop once the reflection model's calls cost this many USD (GEPA's `max_reflection_cost`; a call of
    unknown price counts as over it)."""


def metric_calls(cfg: GEPAConfig, calls_per_example: int = 1) -> int | None:
    """GEPA's `max_metric_calls` for a run of `cfg`: `cfg.max_metric_calls` when given; else, with a
    `budget_calls` B, the metric calls that B buys when every reflective step makes 2b metric calls (the
    parent and the child on a minibatch of b) and one reflection call: `B * 2b // (k * 2b + 1)`, where k is
    the model calls per metric call (1; 2 with a judge scorer). An accepted child's dev evaluation adds metric
    calls and no reflection, so the run spends at most B; promptlab's budget check ends it at B in any case.
    None without `budget_calls` (then promptlab's token budget, if any, ends the run)."""
    if cfg.max_metric_calls is not None:
        return cfg.max_metric_calls
    if cfg.budget_calls is None:
        return None
    step = 2 * cfg.reflection_minibatch_size
    return max(1, cfg.budget_calls * step // (calls_per_example * step + 1))


__all__ = ["COMPONENT", "CandidateSelection", "FrontierType", "GEPAConfig", "metric_calls"]
