"""Scorers: how a model's reply to one example is compared with the example's target.

More in docs/grounded.md, section "promptlab.eval.scorers".
"""

from __future__ import annotations

import importlib
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from ..errors import ConfigError
from ..llm.call.entry import CacheArg, acomplete
from ..llm.call.settings import Settings
from ..llm.call.structured import extract_json
from ..record import Example
from ..registry import Registry
from .matching import alternatives, as_number, normalise, numbers, same_value
from .scoring import Scored, Scorer


# kinds -----------------------------------------------------------------------------------------------------
class Exact(Scorer):
    """The reply equals the target (or one of a list of targets) after normalising."""

    kind: ClassVar[str] = "exact"

    def score(self, output: str, target: Any) -> float:
        return float(normalise(output) in {normalise(t) for t in alternatives(target)})


class Contains(Scorer):
    """The normalised target (or any of a list) occurs in the normalised reply."""

    kind: ClassVar[str] = "contains"

    def score(self, output: str, target: Any) -> float:
        reply = normalise(output)
        return float(any(normalise(t) in reply for t in alternatives(target)))


class Choice(Scorer):
    """Which allowed label the reply gives, compared with the target label."""

    kind: ClassVar[str] = "choice"
    labels: list[str] = Field(min_length=2)
    """The allowed labels; a label is found as a whole word (case-insensitive), the longest match first."""

    def given(self, output: str) -> list[str]:
        """The labels the reply gives, in the order of the `labels` option."""
        text = unicodedata.normalize("NFKC", output).casefold()
        spans: list[tuple[int, int, str]] = []
        for label in sorted(self.labels, key=len, reverse=True):
            pattern = r"(?<!\w)" + re.escape(normalise(label)) + r"(?!\w)"
            for m in re.finditer(pattern, text):
                if not any(a < m.end() and m.start() < b for a, b, _ in spans):
                    spans.append((m.start(), m.end(), label))
        found = {lab for _, _, lab in spans}
        return [lab for lab in self.labels if lab in found]

    def check_target(self, target: Any) -> None:
        if normalise(target) not in {normalise(lab) for lab in self.labels}:
            raise ValueError(f"target {target!r} is not one of the labels {self.labels}")

    def score(self, output: str, target: Any) -> tuple[float, str | None]:
        self.check_target(target)
        given = self.given(output)
        if not given:
            return 0.0, "no label given"
        if len(given) > 1:
            return 0.0, f"several labels given: {', '.join(given)}"
        return float(normalise(given[0]) == normalise(target)), f"label: {given[0]}"


MATCH_TIMEOUT_S = 1.0
"""Longest a regex scorer's match may take on one reply."""


class RegexTimeout(ValueError):
    """A regex scorer's match ran past MATCH_TIMEOUT_S."""


class Regex(Scorer):
    """A regular expression: a group of the first match against the target, or a match as a pass."""

    kind: ClassVar[str] = "regex"
    needs_target: ClassVar[bool] = False
    pattern: str | None = None
    """The pattern searched in the reply (None: the example's target is the pattern, a match passes)."""
    group: int | str | None = None
    """The group compared with the target (None: group 1 if the pattern has groups, else the whole match)."""
    flags: str = "i"
    """re flags as letters: i (ignore case), m (multiline), s (dot matches newline), x (verbose)."""

    def _compiled(self, pattern: str) -> Any:
        import regex  # the `regex` package: re's syntax, and a time limit on a match (a well-kept library)

        bits = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL, "x": regex.VERBOSE}
        unknown = set(self.flags) - set(bits)
        if unknown:
            raise ValueError(f"unknown regex flags {sorted(unknown)}; known: {''.join(bits)}")
        flags = 0
        for ch in self.flags:
            flags |= bits[ch]
        try:
            return regex.compile(pattern, flags | regex.VERSION0)
        except regex.error as e:
            raise ValueError(f"bad regex {pattern!r}: {e}") from e

    def _search(self, pattern: str, output: str) -> Any:
        """The first match, or RegexTimeout past MATCH_TIMEOUT_S (catastrophic backtracking never hangs a run)."""
        try:
            # concurrent: the match lets go of the GIL, so the event loop (scoring runs in a worker thread) goes on
            return self._compiled(pattern).search(output, timeout=MATCH_TIMEOUT_S, concurrent=True)
        except TimeoutError:
            raise RegexTimeout(
                f"the regex {pattern[:80]!r} took over {MATCH_TIMEOUT_S:g} s on a {len(output)}-character reply "
                "(catastrophic backtracking?); simplify it"
            ) from None

    def model_post_init(self, context: Any) -> None:
        if self.pattern is not None:
            self._compiled(self.pattern)  # a bad pattern is a config error, not a per-example one

    def check_target(self, target: Any) -> None:
        if self.pattern is None:
            if not isinstance(target, str):
                raise ValueError(f"without a `pattern` option the target is the pattern; got {target!r}")
            self._compiled(target)

    def score(self, output: str, target: Any) -> tuple[float, str | None]:
        if self.pattern is None:
            m = self._search(str(target), output)
            return float(m is not None), None if m else "no match"
        m = self._search(self.pattern, output)
        if m is None:
            return 0.0, "no match"
        if target is None:
            return 1.0, f"matched: {m.group(0)}"
        group = self.group if self.group is not None else (1 if m.re.groups else 0)
        found = m.group(group)
        return float(found is not None and same_value(found, target)), f"matched: {found}"


class Numeric(Scorer):
    """The first (or last) number in the reply equals the target within a tolerance."""

    kind: ClassVar[str] = "numeric"
    tolerance: float = Field(0.0, ge=0)
    """Absolute tolerance."""
    relative: float = Field(0.0, ge=0)
    """Relative tolerance (a fraction of the target's magnitude); the larger of the two applies."""
    pick: Literal["first", "last"] = "first"
    """Which number of the reply is its answer."""

    def check_target(self, target: Any) -> None:
        as_number(target)

    def score(self, output: str, target: Any) -> tuple[float, str | None]:
        want = as_number(target)
        found = numbers(output)
        if not found:
            return 0.0, "no number in the reply"
        got = found[0] if self.pick == "first" else found[-1]
        ok = abs(got - want) <= max(self.tolerance, self.relative * abs(want)) or got == want
        return float(ok), f"read {got:g}"


class JsonField(Scorer):
    """A field of the JSON object in the reply (bare, fenced or inside prose) compared with the target."""

    kind: ClassVar[str] = "json_field"
    path: str = Field(min_length=1)
    """Dotted path with list indices: "answer", "result.items[0].name"."""

    def score(self, output: str, target: Any) -> tuple[float, str | None]:
        try:
            value: Any = extract_json(output)
        except ValueError:
            return 0.0, "no JSON in the reply"
        for part in re.findall(r"[^.\[\]]+|\[\d+\]", self.path):
            if part.startswith("["):
                i = int(part[1:-1])
                if not isinstance(value, list) or i >= len(value):
                    return 0.0, f"no {self.path} in the reply's JSON"
                value = value[i]
            elif isinstance(value, dict) and part in value:
                value = value[part]
            else:
                return 0.0, f"no {self.path} in the reply's JSON"
        return float(same_value(value, target)), f"{self.path} = {json.dumps(value, ensure_ascii=False)[:200]}"


class Python(Scorer):
    """A Python function `module:function(output, target)` returning a value in [0, 1] (or value, detail)."""

    kind: ClassVar[str] = "python"
    function: str = Field(pattern=r"^[\w.]+:[\w.]+$")
    """"package.module:function", importable from the working directory or the installed packages."""

    def model_post_init(self, context: Any) -> None:
        self.load()  # an unknown module or function is a config error

    def load(self) -> Callable[[str, Any], Any]:
        """The function named by `function`."""
        module, _, name = self.function.partition(":")
        try:
            obj: Any = importlib.import_module(module)
        except ImportError as e:
            raise ValueError(f"cannot import module {module!r}: {e}") from e
        for part in name.split("."):
            if not hasattr(obj, part):
                raise ValueError(f"module {module!r} has no {name!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise ValueError(f"{self.function} is not callable")
        return obj  # type: ignore[no-any-return]

    def score(self, output: str, target: Any) -> float | tuple[float, str | None]:
        result = self.load()(output, target)
        if isinstance(result, tuple) and len(result) == 2:
            return result[0], None if result[1] is None else str(result[1])
        return result  # type: ignore[no-any-return]


class Verdict(BaseModel):
    """A judge's structured reply."""

    reason: str = Field(max_length=600)
    """Why the reply earns the score (one or two sentences)."""
    score: int = Field(ge=0, le=10)
    """0 (fails the rubric) to 10 (fully meets it)."""


class Judge(Scorer):
    """An LLM grades the reply against a rubric (0-10, reported as score / 10), through the one call path."""

    kind: ClassVar[str] = "judge"
    needs_target: ClassVar[bool] = False
    needs_model: ClassVar[bool] = True
    model: str = Field(min_length=1)
    """The judge's model (its own, independent of the model under test)."""
    rubric: str = "The reply answers the input correctly; when a reference answer is given, it agrees with it."
    """What a good reply does."""
    prompt: str = ""
    """Override of JUDGE_PROMPT (str.format fields: rubric, input, target, output)."""
    temperature: float = Field(0.0, ge=0, le=2)
    """The judge's sampling temperature."""
    max_tokens: int = Field(300, ge=16)
    """Cap on the judge's reply."""

    def models(self) -> list[str]:
        return [self.model]

    async def ascore(
        self, output: str, example: Example, *, cache: CacheArg = None, settings: Settings | None = None
    ) -> Scored:
        text = (self.prompt or JUDGE_PROMPT).format(
            rubric=self.rubric,
            output=output,
            input=example.input if isinstance(example.input, str) else json.dumps(example.input, ensure_ascii=False),
            target="(none given)" if example.target is None else json.dumps(example.target, ensure_ascii=False),
        )
        try:
            c = await acomplete(
                self.model,
                text,
                schema=Verdict,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                cache=cache,
                settings=settings,
            )
        except Exception as e:
            return Scored(None, error=f"{type(e).__name__}: {e}", failed_calls=[self.model])
        verdict: Verdict = c.parsed
        return Scored(verdict.score / 10, verdict.reason, calls=[c])


def scorer_class(obj: Any) -> type[Scorer]:
    """`obj` when it is a Scorer class (what a `promptlab.scorers` entry point must name)."""
    if not (isinstance(obj, type) and issubclass(obj, Scorer)):
        raise TypeError(f"{obj!r} is not a subclass of promptlab.eval.scoring.Scorer")
    return obj


SCORERS: Registry[type[Scorer]] = Registry("scorer", "promptlab.scorers", adopt=scorer_class)
"""Scorer kinds by name: promptlab's own, those installed packages declare under the `promptlab.scorers` entry-point
group (a Scorer class, or a module that registers some), and any registered with `register_scorer`."""

ScorerClass = TypeVar("ScorerClass", bound=type[Scorer])


def register_scorer(cls: ScorerClass, name: str | None = None) -> ScorerClass:
    """Register a Scorer class under `name` (default: its `kind`); usable as a class decorator (`@register_scorer`).
    A later registration of the name replaces it."""
    SCORERS.register(name or scorer_class(cls).kind, cls)
    return cls


for _builtin in (Exact, Choice, Contains, Regex, Numeric, JsonField, Python, Judge):
    register_scorer(_builtin)


def get_scorer(spec: str | dict[str, Any] | Scorer) -> Scorer:
    """Build a scorer from a kind name or a {"kind": ..., **options} mapping.

    Raises:
        ConfigError: an unknown kind (the message lists the known ones) or a bad option.
    """
    if isinstance(spec, Scorer):
        return spec
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        raise ConfigError(
            f"scorer: a kind name or a mapping with a 'kind', got {spec!r}; known kinds: {', '.join(SCORERS)}"
        )
    options = {k: v for k, v in spec.items() if k != "kind"}
    cls = SCORERS.find(spec["kind"])
    if cls is None:
        raise ConfigError(f"scorer.kind: unknown scorer {spec['kind']!r}; known kinds: {', '.join(SCORERS)}")
    try:
        return cls(**options)
    except ValidationError as e:
        problems = [f"scorer{''.join('.' + str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise ConfigError(
            f"{'; '.join(problems)} (scorer kind {cls.kind}; its options: {', '.join(cls.model_fields) or 'none'})"
        ) from None
    except ValueError as e:
        raise ConfigError(f"scorer ({cls.kind}): {e}") from None


JUDGE_PROMPT = """You are grading one reply against a rubric.

Rubric: {rubric}

Input the reply was written for:
{input}

Reference answer: {target}

Reply to grade:
{output}

Give a short reason, then a score from 0 (fails the rubric) to 10 (fully meets it)."""


__all__ = [
    "JUDGE_PROMPT",
    "MATCH_TIMEOUT_S",
    "SCORERS",
    "Choice",
    "Contains",
    "Exact",
    "JsonField",
    "Judge",
    "Numeric",
    "Python",
    "Regex",
    "RegexTimeout",
    "Verdict",
    "get_scorer",
    "register_scorer",
    "scorer_class",
]
