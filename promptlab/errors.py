"""promptlab's exceptions: a small hierarchy that carries the context needed to act on an error."""

from __future__ import annotations

from typing import Any


class PromptlabError(Exception):
    """Base class of every error promptlab raises on purpose."""


class ConfigError(PromptlabError, ValueError):
    """A setting, an experiment file or an argument has a bad value; the message names it."""


class UnknownModelError(PromptlabError, ValueError):
    """A model name that no registered provider (nor litellm) knows."""

    def __init__(self, model: str, reason: str = "", known: list[str] | None = None) -> None:
        self.model = model
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

    def __init__(self, model: str, env_vars: list[str]) -> None:
        self.model = model
        self.env_vars = env_vars
        names = " or ".join(env_vars) if env_vars else "the provider's API key variable"
        super().__init__(f"Model {model!r} needs an API key: set {names} in the environment.")


class ProviderError(PromptlabError):
    """A model call failed for good (after retries where the error was transient)."""

    def __init__(self, model: str, message: str, *, attempts: int, retryable: bool) -> None:
        self.model = model
        self.attempts = attempts
        self.retryable = retryable
        super().__init__(f"{model}: {message} (after {attempts} attempt{'s' if attempts != 1 else ''})")


class ParseError(PromptlabError):
    """The model's reply never validated against the schema; carries every raw reply and its error."""

    def __init__(self, model: str, schema_name: str, attempts: list[dict[str, Any]]) -> None:
        self.model = model
        self.schema_name = schema_name
        self.attempts = attempts
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
