"""promptlab's exceptions: a small hierarchy that carries the context needed to act on an error."""

from __future__ import annotations

from typing import Any

from .sanitize import mask_userinfo


class PromptlabError(Exception):
    """Base class of every error promptlab raises on purpose. Its message never shows a URL's password
    (`sanitize.mask_userinfo`), wherever it is printed, logged or recorded."""

    def __str__(self) -> str:  # BaseException's: a KeyError mixed in would show the message quoted
        return mask_userinfo(BaseException.__str__(self))

    infrastructure: bool = False
    """True when the failure lies outside the model's reply (provider down, key missing, bad setup): the
    work should be retried later. False for a model failure (a bad reply), which is a research result."""


class ConfigError(PromptlabError, ValueError):
    """A setting, an experiment file or an argument has a bad value; the message names it."""

    infrastructure = True


class ScoreMissing(PromptlabError):
    """A score the run needed could not be read from a reply that parsed (a critic's expected score, a
    criterion the evaluator did not score): the run goes on with the score missing, and the error is recorded."""


class PromptlabWarning(RuntimeWarning):
    """A warning promptlab gives on purpose (a results file it skips, a value it reads as missing): in a
    notebook it is shown as a plain note (`promptlab.ui.notes`), elsewhere as any RuntimeWarning."""


class UnknownModelError(PromptlabError, ValueError):
    """A model name that no registered provider (nor litellm) knows."""

    def __init__(self, model: str, reason: str = "", known: list[str] | None = None) -> None:
        self.model = model
        self.reason = reason
        self.known = sorted(known or [])
        text = f"Unknown model {model!r}"
        if reason:
            text += f": {reason}"
        text += (
            ". Models are named as litellm names them ('gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest', "
            "'ollama/llama3.1', 'openrouter/<vendor>/<model>'), or 'local/smollm2' for the embedded model, "
            "'local/<path>.gguf' for a GGUF file, 'fake/<name>' for a scripted model."
        )
        if self.known:
            text += f" Registered promptlab models: {', '.join(self.known)}."
        super().__init__(text)


class MissingKeyError(PromptlabError):
    """A hosted model needs an API key that is not set; the message names the environment variable."""

    infrastructure = True

    def __init__(self, model: str, env_vars: list[str]) -> None:
        self.model = model
        self.env_vars = env_vars
        names = " or ".join(env_vars) if env_vars else "the provider's API key variable"
        super().__init__(f"Model {model!r} needs an API key: set {names} in the environment.")


class ProviderError(PromptlabError):
    """A model call failed for good (after retries where the error was transient): an infrastructure
    failure. The message names the model, the host the request went to and the cause."""

    infrastructure = True

    def __init__(self, model: str, message: str, *, attempts: int, retryable: bool, host: str | None = None) -> None:
        self.model = model
        self.attempts = attempts
        self.retryable = retryable
        self.host = host
        self.cause = message
        where = f" at {host}" if host else ""
        super().__init__(f"{model}{where}: {message} (after {attempts} attempt{'s' if attempts != 1 else ''})")


class SpendingCapExceeded(PromptlabError):
    """A provider request was not made: what was spent plus its estimated cost would pass the sweep's cap
    (`max_cost`). Not a model failure and not an outage: the work was cut, and a re-run with a higher cap
    resumes it (its earlier calls replay from the cache)."""

    infrastructure = True

    def __init__(self, model: str, *, spent: float, cap: float, estimate: float = 0.0) -> None:
        self.model = model
        self.spent = spent
        """USD paid so far (the ledger's total)."""
        self.cap = cap
        """The cap in USD."""
        self.estimate = estimate
        """The refused request's estimated cost in USD."""
        super().__init__(
            f"cut by max_cost={cap:g} USD after spending {spent:.6g} USD: a request to {model} "
            f"(about {estimate:.2g} USD) would pass the cap; re-run with a higher max_cost to resume"
        )


class ParseError(PromptlabError):
    """The model's reply never validated against the schema; carries every raw reply and its error."""

    def __init__(
        self,
        model: str,
        schema_name: str,
        attempts: list[dict[str, Any]],
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = 0.0,
        requests: int | None = None,
        original: tuple[int, int, float | None] | None = None,
    ) -> None:
        self.model = model
        self.schema_name = schema_name
        self.requests = requests if requests is not None else len(attempts)
        """Provider requests made (transient-error retries included), as `Completion.attempts` counts them."""
        self.attempts = attempts
        self.input_tokens = input_tokens
        """Input tokens the failed attempts spent now (replayed replies add none)."""
        self.output_tokens = output_tokens
        """Output tokens the failed attempts spent now."""
        self.cost_usd = cost_usd
        """Cost the failed attempts spent now; None where the price is unknown."""
        self.original = original if original is not None else (input_tokens, output_tokens, cost_usd)
        """(input tokens, output tokens, cost) of every attempt as first made, replayed ones included: what a run's
        budget counts, so that a replay from the cache spends what the first call did."""
        last = attempts[-1] if attempts else {"error": "no reply"}
        super().__init__(
            f"{model} gave no valid {schema_name} in {len(attempts)} attempt(s); last error: {last['error']}"
        )

    @property
    def raw(self) -> str:
        """The last raw reply."""
        return str(self.attempts[-1]["raw"]) if self.attempts else ""


class SweepCellError(PromptlabError):
    """A sweep cell failed; for a papermill cell it names the notebook cell and the exception."""

    def __init__(
        self,
        cell_id: str,
        parameters: dict[str, Any],
        message: str,
        *,
        notebook: str | None = None,
        cell_index: int | None = None,
        ename: str | None = None,
        evalue: str | None = None,
    ) -> None:
        self.cell_id = cell_id
        self.parameters = parameters
        self.notebook = notebook
        self.cell_index = cell_index
        self.ename = ename
        self.evalue = evalue
        where = f" in {notebook} cell {cell_index}" if notebook is not None else ""
        super().__init__(f"sweep cell {cell_id}{where}: {message}")


class MissingDependencyError(PromptlabError, ImportError):
    """An optional dependency is not installed; the message says which pip install fixes it."""

    def __init__(self, module: str, pip_name: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs the '{module}' module: pip install {pip_name}")


class CacheUnavailableError(PromptlabError):
    """The call cache's server could not be reached or answered with an error: an infrastructure failure.
    A read that fails this way is never taken for a miss (that would pay for the call again)."""

    infrastructure = True

    def __init__(self, location: str, cause: str, *, origin: str = "the cache argument") -> None:
        self.location = location
        self.cause = cause
        self.origin = origin
        super().__init__(f"call cache {location} (set by {origin}) is unavailable: {cause}")


class ResultsDiskFull(PromptlabError):
    """The disk holding the results directory is full: the write named stopped, nothing half-written is left
    (writes go to a temporary file replaced whole), and the same sweep resumes once there is room. The CLI exits
    4 for it, apart from 2 (refused before it started)."""

    infrastructure = True
    _SAID = " no space left on the device holding the results ("
    _AFTER = "); free space there and run the same sweep again: finished cells are kept and skipped"

    def __init__(self, path: str, cause: BaseException | str) -> None:
        self.path = path
        self.why = (
            cause
            if isinstance(cause, str)
            else f"{cause.__class__.__name__}: {getattr(cause, 'strerror', None) or cause}"
        )
        super().__init__(f"{path}:{self._SAID}{self.why}{self._AFTER}")

    def __reduce__(self) -> tuple[Any, ...]:  # another process's error arrives whole (a Dask task's)
        return (type(self), (self.path, self.why))

    @classmethod
    def reported(cls, message: str) -> ResultsDiskFull | None:
        """The error another process reported by its message alone (a papermill kernel's `evalue`), or None
        when the message is not one."""
        path, said, rest = message.partition(":" + cls._SAID)
        why, after, _ = rest.rpartition(cls._AFTER)
        return cls(path, why) if said and after and path else None


def is_disk_full(e: BaseException) -> bool:
    """ENOSPC or EDQUOT (a full disk or a full quota)."""
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
