"""ProTeGi's settings and reply schemas (the paper's values, from its code's defaults, are the config defaults)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

from ..runtime.search import SearchConfig

Selection = Literal["ucb", "successive_rejects"]


class ProTeGiConfig(SearchConfig):
    """ProTeGi settings: `generator_model` writes the gradients, the edits and the paraphrases; `target_model`
    runs the candidates on the dev split."""

    ROLES = ("gradient", "editor", "paraphraser")

    temperature: float = Field(0.7, ge=0.0, le=2.0)
    """Sampling temperature of the gradient, edit and paraphrase calls (the paper's code's 0.7); candidates run
    at 0."""
    max_iterations: int = Field(6, ge=1, le=100)
    """Beam-search rounds (the paper's 6): expand every prompt of the beam, then select the next beam."""
    beam_size: int = Field(4, ge=1, le=50)
    """Prompts kept in the beam (the paper's 4)."""
    minibatch_size: int = Field(64, ge=1, le=10_000)
    """Dev examples a round draws to find each beam prompt's errors (the paper's 64; at most the dev split)."""
    n_gradients: int = Field(4, ge=0, le=50)
    """Gradient calls per beam prompt and round, each on its own draw of errors (the paper's 4)."""
    errors_per_gradient: int = Field(4, ge=1, le=50)
    """Wrong answers shown in each gradient call (the paper's 4)."""
    gradients_per_error: int = Field(1, ge=1, le=20)
    """Reasons ("gradients") asked for in each gradient call (the paper's 1)."""
    steps_per_gradient: int = Field(1, ge=1, le=20)
    """Edited prompts asked for per reason (the paper's 1)."""
    mc_samples_per_step: int = Field(2, ge=0, le=20)
    """Paraphrases of each edited prompt and of the beam prompt itself (the paper's 2: Monte Carlo samples)."""
    max_expansion_factor: int = Field(8, ge=1, le=100)
    """Successors kept per beam prompt, drawn at random when it has more (the paper's 8); the rest are not
    measured."""
    selection: Selection = "ucb"
    """How the next beam is chosen on dev: 'ucb' (UCB bandits) or 'successive_rejects' (the paper's two)."""
    eval_rounds: int = Field(8, ge=1, le=1000)
    """UCB: rounds of pulls per selection (the paper's 8); both: part of the evaluation budget."""
    eval_prompts_per_round: int = Field(8, ge=1, le=100)
    """UCB: arms pulled per round (the paper's 8); both: part of the evaluation budget."""
    samples_per_eval: int = Field(32, ge=1, le=10_000)
    """Dev examples a pull runs (the paper's 32; an arm never runs an example twice, so at most the dev split).
    The evaluation budget of successive rejects is samples_per_eval x eval_rounds x eval_prompts_per_round."""
    ucb_c: float = Field(1.0, ge=0.0, le=100.0)
    """UCB's exploration weight c in mean + c sqrt(ln t / n) (the paper's 1.0)."""


Item = Annotated[str, Field(json_schema_extra={"maxLength": 400})]
_HINT: JsonDict = {"maxItems": 4}  # guides generation (grammars, fake/auto); a longer valid reply is still accepted


class Reasons(BaseModel):
    """A gradient call's reply: why the prompt may have led to the wrong answers."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})
    reasons: list[Item] = Field(min_length=1, json_schema_extra=_HINT)
    """One reason per item."""


class Prompts(BaseModel):
    """An edit call's reply: improved versions of the prompt."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})
    prompts: list[Item] = Field(min_length=1, json_schema_extra=_HINT)
    """One prompt per item."""


__all__ = ["ProTeGiConfig", "Prompts", "Reasons", "Selection"]
