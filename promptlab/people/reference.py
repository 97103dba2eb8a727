"""A reference judge: one fixed model, named in the experiment file (`reference_judge:`), that judges every planned
pair blind with one prompt, so that pairings whose critics differ can be ranked on one yardstick, and that is
itself measured against the people like a critic (`promptlab.people.reference_findings`).

Each item is shown as the item's input and its two texts as "Text A" and "Text B", in an order drawn per item
(from the seed, the judge and the item) and recorded; nothing names the pairing, the critic, the loop or which
text is the returned one. The call is the ordinary cached structured call; a reply that never parses, or a call
that fails, is a missing judgment with its error recorded, never a guessed value.

Its judgments live in `<results>/judgments/reference/judge.jsonl` (one JSON line per judgment, append-only, each
naming its judge), apart from people's files: they are never read as a person's. A run skips the items its judge
has already judged, so a killed run loses at most the item in flight; a missing one is asked again (a failed call
is made again; an unparseable reply comes back the same from the call cache). More in docs/people.md.
"""

from __future__ import annotations

import os
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, ParseError, ProviderError
from ..errors import PromptlabWarning as Note
from ..llm.call.entry import CacheArg, complete
from ..llm.call.preflight import preflight
from ..llm.call.settings import Settings
from ..reading import bounded, load_yaml, read_text
from ..sanitize import clean_model
from .items import SIDES, Item
from .plan import read_plan
from .storage import append_records, excerpt, judgments_dir, now, parse_record, read_records

REFERENCE_DIR = "reference"
"""The folder of `<results>/judgments` that holds the reference judge's file (never read as a person's)."""
REFERENCE_FILE = "judge.jsonl"
MAX_TOKENS = 160
"""Room for the verdict and a one-sentence reason."""
MAX_ERROR_CHARS = 300
"""How much of a failed call's error a record keeps."""

REFERENCE_PROMPT = """You compare two texts written for the same request.

Request:
<<<
{input}
>>>

Text A:
<<<
{first}
>>>

Text B:
<<<
{second}
>>>

Which text serves the request better? Judge the content, not the length or the order in which they are shown.
Answer with JSON: {{"better": "A", "B" or "tie", "reason": "one sentence"}}."""
"""The one prompt every pairing's items are judged with (fields {input}, {first}, {second})."""


class ReferenceVerdict(BaseModel):
    """The reference judge's reply (extra keys ignored: a model adding a field is not an error)."""

    model_config = ConfigDict(extra="ignore")

    better: Literal["A", "B", "tie"]
    """The text that serves the request better, or 'tie'."""
    reason: str = ""
    """Why, in a sentence."""


class ReferenceJudgment(BaseModel):
    """One reference judgment of one planned pair, as stored (one JSON line)."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Record format version."""
    item: str
    """The plan item judged."""
    judge: str
    """The reference judge's model name."""
    value: Literal["A", "B", "tie"] | None = None
    """'A' (the text shown first), 'B' or 'tie'; None: missing (see `error`)."""
    shown: list[str]
    """The item's sides in the order shown ('start' / 'returned'): what A and B stood for."""
    reason: str = ""
    """The judge's one-sentence reason."""
    error: str | None = None
    """Why the judgment is missing: the failed call's or the unusable reply's error."""
    cache_hit: bool = False
    """The reply came from the call cache."""
    time: str = ""
    """UTC time it was stored (ISO 8601)."""


@dataclass
class ReferenceStored:
    """The reference judgments of a results directory, and the lines that could not be read."""

    judgments: list[ReferenceJudgment] = field(default_factory=list)
    """Every readable record, in the order stored."""
    damaged: list[str] = field(default_factory=list)
    """One note per damaged line: 'file:line: why (excerpt)'."""

    def latest(self, judge: str) -> dict[str, ReferenceJudgment]:
        """Item -> the judge's last record of it (a missing one asked again is replaced by the new one)."""
        return {j.item: j for j in self.judgments if j.judge == judge}

    def judges(self) -> list[str]:
        """The judges with records, in the order first stored."""
        return list(dict.fromkeys(j.judge for j in self.judgments))


@dataclass
class ReferenceRun:
    """What one `run_reference` did."""

    judge: str
    path: Path
    judged: int = 0
    """Items judged now."""
    missing: list[ReferenceJudgment] = field(default_factory=list)
    """Items left missing now (each with its error)."""
    already: int = 0
    """Items the judge had judged before (skipped)."""


def reference_path(results: str | os.PathLike[str]) -> Path:
    """`<results>/judgments/reference/judge.jsonl`."""
    return judgments_dir(results) / REFERENCE_DIR / REFERENCE_FILE


def read_reference(results: str | os.PathLike[str], *, warn: bool = True) -> ReferenceStored:
    """Every reference judgment stored beside a results directory; a damaged line is named and skipped."""
    path = reference_path(results)
    if not os.path.lexists(path):
        return ReferenceStored()
    shown = f"{REFERENCE_DIR}/{path.name}"
    found, damaged = read_records(
        path,
        lambda line: parse_record(line, ReferenceJudgment, "reference judgment"),
        "reference judgments file",
        shown,
    )
    if warn:
        for note in damaged:
            warnings.warn(f"reference judgments: skipped a damaged line: {note}", Note, stacklevel=2)
    return ReferenceStored(found, damaged)


def reference_judge_of(results: str | os.PathLike[str]) -> str | None:
    """The `reference_judge` of the experiment file the sweep recorded in `results` (None without one, unchecked:
    `check_judge_model`); the file's model aliases are registered, so that a judge named by alias resolves."""
    from ..sweeps.experiment import Experiment

    path = Path(results) / "experiment.yaml"
    if not path.is_file():
        return None
    data = load_yaml(read_text(path, "experiment file"), str(path))
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{path}: not an experiment file: {e.errors()[0]['msg']}") from None
    exp.register_models(str(path))
    return exp.reference_judge


def shown_order(item: Item, judge: str, seed: int = 0) -> list[str]:
    """The item's sides in the order the judge sees them, drawn from the seed, the judge and the item."""
    return random.Random(f"{seed}|{judge}|{item.id}").sample(list(SIDES), len(SIDES))


def judge_item(
    model: str, item: Item, shown: list[str], *, cache: CacheArg = None, settings: Settings | None = None
) -> ReferenceJudgment:
    """Ask `model` which of the item's two texts, shown in the order `shown`, serves its input better (blind: the
    prompt holds the input and the two texts, nothing else). A failed call or an unusable reply is missing."""
    first, second = (item.texts[side] for side in shown)
    text = REFERENCE_PROMPT.format(input=item.input, first=first, second=second)
    record = ReferenceJudgment(item=item.id, judge=model, shown=list(shown), time=now())
    try:
        done = complete(
            model, text, schema=ReferenceVerdict, max_tokens=MAX_TOKENS, temperature=0.0, cache=cache, settings=settings
        )
    except (ParseError, ProviderError) as e:
        record.error = bounded(f"{type(e).__name__}: {e}", MAX_ERROR_CHARS)
        return clean_model(record)
    record.cache_hit = done.cache_hit
    if isinstance(done.parsed, ReferenceVerdict):
        record.value, record.reason = done.parsed.better, bounded(done.parsed.reason, MAX_ERROR_CHARS)
    else:
        record.error = f"unusable reply: {excerpt(done.text)}"
    return clean_model(record)


def run_reference(
    results: str | os.PathLike[str],
    model: str | None = None,
    *,
    seed: int = 0,
    cache: CacheArg = None,
    settings: Settings | None = None,
    on_item: Callable[[ReferenceJudgment], None] | None = None,
) -> ReferenceRun:
    """Have the reference judge judge every planned pair of `results` it has not judged yet, storing each judgment
    as soon as it is made.

    Args:
        results: The results directory (with `judgments/plan.json`, a pairwise plan).
        model: The judge; None: the experiment file's `reference_judge` (recorded in `results`).
        seed: Seed of the order each pair is shown in.
        cache: The call cache (see `promptlab.llm.complete`).
        settings: Call settings.
        on_item: Called with each judgment once it is stored.

    Raises:
        ConfigError: no plan, a rating plan, no judge named, or a judge that cannot be called (an unknown model, a
            missing API key), before any call.
    """
    plan = read_plan(results)
    if plan.kind != "pair":
        raise ConfigError(
            f"{results}: the judging plan is of ratings; the reference judge compares pairs: draw a pairwise "
            f"plan in another results directory (`promptlab judgments plan RESULTS --kind pair`)"
        )
    from ..sweeps.experiment import check_judge_model

    named = reference_judge_of(results)  # its model aliases registered, whichever judge is used
    judge = model or named
    if not judge:
        raise ConfigError(
            f"{results}: no reference judge: name one with `reference_judge: <model>` in the experiment file, or "
            "pass it (`promptlab judgments reference RESULTS --model M`)"
        )
    check_judge_model(judge, "reference judge" if model else f"{Path(results) / 'experiment.yaml'}: reference_judge")
    preflight([judge])
    path = reference_path(results)
    done = {k for k, j in read_reference(results).latest(judge).items() if j.value is not None}
    out = ReferenceRun(judge, path, already=sum(item.id in done for item in plan.items))
    for item in plan.items:
        if item.id in done:
            continue
        record = judge_item(judge, item, shown_order(item, judge, seed), cache=cache, settings=settings)
        append_records(path, [record], "reference judgments file")
        if record.value is None:
            out.missing.append(record)
        else:
            out.judged += 1
        if on_item is not None:
            on_item(record)
    return out


__all__ = [
    "REFERENCE_PROMPT",
    "ReferenceJudgment",
    "ReferenceRun",
    "ReferenceStored",
    "ReferenceVerdict",
    "judge_item",
    "read_reference",
    "reference_judge_of",
    "reference_path",
    "run_reference",
    "shown_order",
]
