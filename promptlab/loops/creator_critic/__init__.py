"""Creator / Critic (PromptForge): a creator rewrites, critics score (see `promptlab.loops.creator_critic.loop`)."""

from __future__ import annotations

from .config import (
    AGGREGATES,
    Aggregate,
    CreatorCriticConfig,
    Critique,
    Decision,
    Final,
    aggregate,
    decide,
    decide_with_reason,
)
from .loop import (
    CREATOR_PROMPT,
    CRITIC_PROMPT,
    arun_creator_critic,
    clean_prompt_text,
    critique_all,
    rescore_creator_critic,
    run_creator_critic,
)

__all__ = ["AGGREGATES", "Aggregate", "CREATOR_PROMPT", "CRITIC_PROMPT", "CreatorCriticConfig", "Critique",
           "Decision", "Final", "aggregate", "arun_creator_critic", "clean_prompt_text", "critique_all", "decide",
           "decide_with_reason", "rescore_creator_critic", "run_creator_critic"]
