"""One role's model call, as a loop asks it of its run context: `RoleCall` (who, in which phase, what prompt, the
schema, how to sample, how to record it). `RunContext.ask` makes it and records it as a step; `RunContext.call` is
its short form for a loop that wants the parsed reply (or the text) only."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ...llm.call.completion import Completion
from ...llm.call.settings import DEFAULT_SETTINGS, Settings
from ...record import Iteration
from ...sanitize import Cleaner
from .config import LoopConfig

LOGPROBS = {"logprobs": True, "top_logprobs": 20}
"""What a call that asks for token log-probabilities sends: 20 alternatives per token."""


@dataclass(frozen=True)
class RoleCall:
    """One role's model call: who makes it, in which phase of which iteration, with what prompt and schema, how
    it samples and how its step is recorded. The defaults are the run's: the role's model, the config's
    temperature and max_tokens, the run's sample."""

    role: str
    """The loop's role ('critic', 'creator' ...): its model and prompt override come from the config."""
    phase: str
    """The step's phase ('critique', 'create' ...)."""
    prompt: str
    """The user prompt, already filled in (`RunContext.prompt`)."""
    schema: type[BaseModel] | None = None
    """A pydantic model the reply is parsed into; None for text."""
    iteration: Iteration | None = None
    """The iteration the step belongs to (None: the run's setup or final steps)."""
    system: str | None = None
    """A system prompt put first."""
    model: str | None = None
    """A model other than the role's (a named critic's)."""
    judge: str | None = None
    """The name the step is recorded under in place of the role (a named critic)."""
    sample_offset: int = 0
    """Added to the run's sample (a retry's fresh draw)."""
    sample: int | None = None
    """The call's sample index, fixed (default: the run's sample plus `sample_offset`)."""
    temperature: float | None = None
    """Overrides the config's temperature."""
    max_tokens: int | None = None
    """Overrides the config's max_tokens."""
    logprobs: bool = False
    """Ask for token log-probabilities (`LOGPROBS`)."""
    parse_attempts: int | None = None
    """Overrides the settings' parse attempts (1: one reply, never re-asked)."""
    token_type: str | None = None
    """Stream the reply: each piece is emitted as a `token` event with this `token_type` (a cache hit sends its
    whole text as one piece)."""
    keep_raw: bool = False
    """Keep the reply's raw text on the step (`Step.raw`)."""
    place: bool = True
    """Append the step to its iteration; False leaves it to the caller (concurrent calls recorded in a fixed
    order)."""

    def model_of(self, config: LoopConfig) -> str:
        """The model this call goes to: its own, else the role's in `config`."""
        return self.model or config.model_for(self.role)

    def call_args(self, config: LoopConfig, run_sample: int, settings: Settings | None) -> dict[str, Any]:
        """`acomplete`'s keyword arguments for this call (besides the model, the prompt, the cache and the token
        handler), the run's defaults filled in."""
        if self.parse_attempts is not None:
            settings = dataclasses.replace(settings or DEFAULT_SETTINGS, parse_attempts=self.parse_attempts)
        return {
            "schema": self.schema,
            "system": self.system,
            "temperature": config.temperature if self.temperature is None else self.temperature,
            "max_tokens": config.max_tokens if self.max_tokens is None else self.max_tokens,
            "sample": run_sample + self.sample_offset if self.sample is None else self.sample,
            "settings": settings,
            **(LOGPROBS if self.logprobs else {}),
        }

    def answer(self, c: Completion | None) -> Any:
        """What `RunContext.call` returns of the Completion: the parsed object with a schema, else the text; None
        when the call failed."""
        if c is None:
            return None
        return c.parsed if self.schema is not None else c.text


def cleaned(c: Completion, clean: Cleaner) -> Completion:
    """The Completion with its text and parsed object cleaned (`promptlab.sanitize.Cleaner`); the same object
    when there was nothing to clean."""
    text = clean(c.text)
    parsed = c.parsed
    if isinstance(parsed, BaseModel):
        dumped = parsed.model_dump(mode="json")
        fixed = clean(dumped)
        if fixed != dumped:
            parsed = type(parsed).model_validate(fixed)
    return c if text == c.text and parsed is c.parsed else c.model_copy(update={"text": text, "parsed": parsed})


__all__ = ["LOGPROBS", "RoleCall", "cleaned"]
