"""Creator / Critic (PromptForge): a creator rewrites, critics score (see `promptlab.loops.creator_critic.loop`)."""

from __future__ import annotations

from .config import AGGREGATES, Aggregate, CreatorCriticConfig, Critique, Final, RoleInputs, aggregate
from .creator import CREATOR_PROMPT, CREATOR_SEED_PROMPT, FALLBACK_WEAKNESS, clean_prompt_text
from .loop import (
    CRITIC_PROMPT,
    CRITIC_SEED_PROMPT,
    arun_creator_critic,
    critique_all,
    rescore_creator_critic,
    run_creator_critic,
)
from .router import Action, route, threshold_streak

__all__ = [
    "AGGREGATES",
    "Aggregate",
    "CREATOR_PROMPT",
    "CREATOR_SEED_PROMPT",
    "CRITIC_PROMPT",
    "CRITIC_SEED_PROMPT",
    "CreatorCriticConfig",
    "Critique",
    "Action",
    "FALLBACK_WEAKNESS",
    "Final",
    "RoleInputs",
    "aggregate",
    "arun_creator_critic",
    "clean_prompt_text",
    "critique_all",
    "rescore_creator_critic",
    "route",
    "run_creator_critic",
    "threshold_streak",
]
