"""Model output and tool output are hostile input: what they may carry is made harmless here, in one place.

`clean(value)` is what every loop record, event and prompt built from model or tool output goes through
(`RunContext` in `promptlab.loops.runtime.context`, `ToolRegistry.run`, `PrintLog`):

- terminal control sequences are removed (`strip_controls`): ANSI CSI (colours, cursor moves, clear screen),
  OSC (window title, OSC 8 links, OSC 52 clipboard writes), DCS/PM/APC/SOS strings, other escapes, the
  8-bit C1 controls and every C0 control character except tab, newline and carriage return. A terminal
  that prints a record, an event or a log line then shows text, and nothing it would obey;
- the values of secret environment variables are replaced by `[REDACTED:<NAME>]` (`redact`): variables
  named `*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*` and known provider
  variables, whose values are at least `MIN_SECRET_LEN` characters long.

- the user name and password of a URL (`http://user:pass@host/v1`) are replaced by `***` (`mask_userinfo`).

Redaction catches values verbatim only (not encoded, split or transformed).

`clean` reads the environment on each call (about 10 us). A `Cleaner` reads it once, when it is made, and cleans
many values against that reading: a loop run makes one as it starts (`RunContext`), so its events and records
redact the secrets of the environment the run started in without reading it again for every value.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

SECRET_NAME_PATTERNS = ("*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*")
"""Environment variable names (case-insensitive globs) whose values are secrets."""
KNOWN_SECRET_NAMES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "TOGETHER_API_KEY",
    "COHERE_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "HF_TOKEN",
    "HUGGINGFACE_API_KEY",
    "AZURE_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN",
    "DATABASE_URL",
)
"""Provider and service variables redacted whatever their names match."""
MIN_SECRET_LEN = 6
"""Shorter values are not redacted (a value like '1' or 'true' would blank unrelated text)."""
REDACTED = "[REDACTED:{name}]"
"""What a secret value is replaced with."""

CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI ... final byte (an unterminated one is cut to the end of its parameters)
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC ... BEL or ST (or the end)
    r"|\x1b[ -/]*[0-~]?"  # any other escape sequence (charset selection, keypad mode, RIS, ...)
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit DCS, SOS, OSC, PM, APC strings
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # remaining C0 (tab, newline, carriage return kept), DEL, C1
)
"""Terminal control sequences and control characters (ECMA-48)."""


def strip_controls(text: str) -> str:
    """`text` without terminal control sequences or control characters (tab, newline and CR are kept)."""
    return CONTROLS.sub("", text) if _ANY_CONTROL.search(text) else text


_ANY_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)(?![:*]*@)[^\s/?#@]*@")
"""The user name and password of a URL (`scheme://user:pass@`), unless already masked (only `*` and `:`)."""
MASK = "***"
"""What a URL's user name and password are replaced with."""


def mask_userinfo(text: str) -> str:
    """`text` with the user name and password of every URL in it replaced by `***`."""
    return USERINFO.sub(rf"\1{MASK}@", text) if "@" in text and "://" in text else text


def printable(name: str) -> str:
    """A file name as text a record can hold: bytes that are not UTF-8 (which Python keeps as lone surrogates)
    are shown as \\xNN escapes."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


M = TypeVar("M", bound=BaseModel)


@functools.lru_cache(maxsize=4096)  # a pure function of the name, asked for every variable of every reading
def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    upper = name.upper()
    return upper in KNOWN_SECRET_NAMES or any(fnmatch.fnmatchcase(upper, p) for p in SECRET_NAME_PATTERNS)


def secret_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret values of the environment by value -> variable name (longest values first)."""
    env = os.environ if environ is None else environ
    found = {v: k for k, v in env.items() if is_secret_name(k) and len(v.strip()) >= MIN_SECRET_LEN}
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


def redact(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`value` (a string, or JSON-like lists and dicts of them) with every secret value replaced."""
    return _walk(value, _redactor(environ))


class Cleaner:
    """`clean` and `clean_model` against one reading of the environment's secrets, taken when it is made (for many
    values in a row: a run's events and records)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        redactor = _redactor(environ)
        self._fix: Callable[[str], str] = lambda s: mask_userinfo(redactor(strip_controls(s)))

    def __call__(self, value: Any) -> Any:
        """`value` cleaned as `clean` does."""
        return _walk(value, self._fix)

    def model(self, model: M, *, skip: frozenset[str] = frozenset()) -> M:
        """`model` cleaned in place as `clean_model` does; returns it."""
        _clean_fields(model, self._fix, skip)
        return model


def clean(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`value` (a string, or lists, tuples and dicts of them; other values pass through) with terminal
    controls stripped, secret values redacted and URLs' passwords masked; dict keys are cleaned too, pydantic records in place."""
    return Cleaner(environ)(value)


def clean_model(model: M, environ: Mapping[str, str] | None = None, *, skip: frozenset[str] = frozenset()) -> M:
    """Clean every string field of a pydantic record in place, nested records, lists and dicts included
    (fields are replaced only where cleaning changed them, without re-validation), except the top-level
    fields named in `skip`; returns the record."""
    return Cleaner(environ).model(model, skip=skip)


def _clean_fields(model: BaseModel, fix: Any, skip: frozenset[str] = frozenset()) -> None:
    for name in type(model).model_fields.keys() - skip:
        value = model.__dict__.get(name)
        new = _walk(value, fix)
        if new is not value and new != value:
            model.__dict__[name] = new


def _redactor(environ: Mapping[str, str] | None) -> Any:
    secrets = secret_values(environ)
    if not secrets:
        return lambda s: s
    pattern = re.compile("|".join(re.escape(s) for s in secrets))
    return lambda s: pattern.sub(lambda m: REDACTED.format(name=secrets[m.group(0)]), s)


def _walk(value: Any, fix: Any) -> Any:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, list):
        return [_walk(v, fix) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, fix) for v in value)
    if isinstance(value, dict):
        return {(fix(k) if isinstance(k, str) else k): _walk(v, fix) for k, v in value.items()}
    if isinstance(value, BaseModel):
        _clean_fields(value, fix)
    return value


__all__ = [
    "CONTROLS",
    "Cleaner",
    "KNOWN_SECRET_NAMES",
    "MIN_SECRET_LEN",
    "REDACTED",
    "SECRET_NAME_PATTERNS",
    "clean",
    "clean_model",
    "is_secret_name",
    "mask_userinfo",
    "printable",
    "redact",
    "secret_values",
    "strip_controls",
]
