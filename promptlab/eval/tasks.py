"""Grounded tasks: labelled examples, their dev/test split, and how a prompt is applied to an example.

More in docs/grounded.md, section "promptlab.eval.tasks".
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from ..reading import jsonl_lines, read_text
from ..record import Example, Split, Task
from .scorers import RegexTimeout, get_scorer
from .scoring import Scorer, bounded

DEFAULT_SCORER = "exact"
"""The scorer of a task with examples and no `scorer`."""
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


# formatting ------------------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def input_text(input: str | dict[str, Any]) -> str:
    """An input as text: a string as it is, a dict as `key: value` lines."""
    if isinstance(input, str):
        return input
    return "\n".join(f"{k}: {_text(v)}" for k, v in input.items())


def placeholders(input: str | dict[str, Any]) -> dict[str, str]:
    """The placeholder names an input provides, with the text each one is replaced by."""
    if isinstance(input, str):
        return {"input": input}
    fields = {str(k): _text(v) for k, v in input.items()}
    fields.setdefault("input", input_text(input))
    return fields


def format_prompt(prompt: str, input: str | dict[str, Any]) -> str:
    """The prompt applied to one example's input, by the placeholder rule in this module's docstring."""
    fields = placeholders(input)
    if not any(name in fields for name in _PLACEHOLDER.findall(prompt)):
        return f"{prompt.rstrip()}\n\n{input_text(input)}"
    return _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), m.group(0)), prompt)


# splits ----------------------------------------------------------------------------------------------------
def _size(value: int | float, n: int, name: str) -> int:
    if isinstance(value, float) and value < 1:
        return max(1, math.floor(value * n + 0.5))
    if isinstance(value, float) and not value.is_integer():
        raise ConfigError(f"split.{name}: {value!r} is neither a count nor a fraction below 1")
    return int(value)


def split_examples(task: Task) -> tuple[list[int], list[int]]:
    """(dev indices, test indices) of the task's examples, fixed by the split's seed, each in example order.

    Raises:
        ConfigError: the task has no examples, or the sizes ask for more examples than it has.
    """
    n = len(task.examples or [])
    if n == 0:
        raise ConfigError(f"task {task.id!r}: examples: the task has no examples to split")
    split = task.split or Split()
    dev = _size(split.dev, n, "dev")
    test = n - dev if split.test is None else _size(split.test, n, "test")
    if dev + test > n or test < 1:
        raise ConfigError(
            f"task {task.id!r}: split: dev {dev} + test {test} examples do not fit in the "
            f"{n} examples (each split needs at least 1)"
        )
    order = list(range(n))
    random.Random(split.seed).shuffle(order)
    return sorted(order[:dev]), sorted(order[dev : dev + test])


def examples_of(task: Task, split: str) -> list[Example]:
    """The task's examples of one split: 'dev', 'test' or 'all'."""
    if split == "all":
        return list(task.examples or [])
    dev, test = split_examples(task)
    if split not in ("dev", "test"):
        raise ConfigError(f"split: {split!r} is not one of dev, test, all")
    return [(task.examples or [])[i] for i in (dev if split == "dev" else test)]


# loading ---------------------------------------------------------------------------------------------------
def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (a number must be finite)")


def jsonl_objects(p: Path, where: Callable[[int], str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line of a JSONL file; a line that is not JSON is a
    ConfigError prefixed with `where(line number)`."""
    for n, line in enumerate(jsonl_lines(read_text(p, "JSONL file")), start=1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line, parse_constant=_not_json)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where(n)}: not valid JSON: {e}") from None
        except RecursionError:
            raise ConfigError(f"{where(n)}: JSON nested too deep to read (past Python's recursion limit)") from None
        except ValueError as e:  # NaN / Infinity, which Python's json would take
            raise ConfigError(f"{where(n)}: {e}") from None


def read_examples(path: str | Path, where: str, written: str | None = None) -> list[Example]:
    """Read a JSONL examples file; errors name `where` (the task), the file and line, and the field.

    `written` is the path as the task file gives it (named in the error for a missing file)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{where}: examples: no examples file {written or str(path)!r} (looked for {p})")
    out = [
        _example(data, f"{where}: examples file {p}:{n}")
        for n, data in jsonl_objects(p, lambda n: f"{where}: examples file {p}:{n}")
    ]
    if not out:
        raise ConfigError(f"{where}: examples: the examples file {p} holds no examples")
    return out


def _example(data: Any, where: str) -> Example:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: an example is an object with 'input' and 'target', got {_text(data)[:80]}")
    try:
        return Example.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{where}: {_problems(e)}") from None


def _problems(e: ValidationError) -> str:
    """A pydantic error as "field.path[i]: message; ..."."""
    out = []
    for err in e.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        out.append(f"{loc or 'task'}: {err['msg']}")
    return "; ".join(out)


def parse_task(data: Any, base_dir: str | Path | None, where: str) -> Task:
    """A task from one task-file object: an examples path is read relative to `base_dir`; then `check_task`.

    Raises:
        ConfigError: naming `where` (file:line), the task and the field.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a task is a JSON object, got {_text(data)[:80]}")
    data = dict(data)
    label = f"{where}: task {data.get('id')!r}"
    if isinstance(data.get("scorer"), str):
        data["scorer"] = {"kind": data["scorer"]}
    examples = data.get("examples")
    if isinstance(examples, str):
        path = Path(examples).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        data["examples"] = read_examples(path, label, examples)
        data.setdefault("examples_source", examples)
    elif isinstance(examples, list):
        data["examples"] = [_example(x, f"{label}: examples[{i}]") for i, x in enumerate(examples)]
    try:
        task = Task.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{where}: {_problems(e)} (task {data.get('id')!r})") from None
    check_task(task, where)
    return task


def read_tasks(path: str | Path) -> list[Task]:
    """Read a JSONL task file: one task object per line (blank lines skipped).

    A grounded task's examples given as a path are read relative to the task file's directory, and the task
    is checked (`promptlab.eval.tasks.check_task`); errors name the file:line, the task and the field.
    """
    p = Path(path)
    tasks: list[Task] = []
    seen: set[str] = set()
    for n, data in jsonl_objects(p, lambda n: f"{p}:{n}"):
        task = parse_task(data, p.resolve().parent, f"{p}:{n}")
        if task.id in seen:
            raise ConfigError(f"{p}:{n}: task id {task.id!r} appears twice")
        seen.add(task.id)
        tasks.append(task)
    return tasks


# checking --------------------------------------------------------------------------------------------------
def task_scorer(task: Task) -> Scorer:
    """The task's scorer (`DEFAULT_SCORER` when it has examples and names none)."""
    return get_scorer(task.scorer if task.scorer is not None else DEFAULT_SCORER)


def check_task(task: Task, where: str = "task") -> None:
    """Check a grounded task before any model call (a task without examples passes unchanged).

    Checks: the scorer is known and its options valid; every example has a target the scorer accepts; every
    placeholder of the task's prompt is provided by every example; the split fits; and scoring replies that
    match and that do not (each example's target, an empty reply, another example's target) gives a value in
    [0, 1]. The scoring self-check is skipped for scorers that call a model (`judge`): it would make model
    calls before the run.

    Raises:
        ConfigError: naming `where`, the task, the example and the field.
    """
    label = f"{where}: task {task.id!r}"
    if task.examples is not None and not task.examples:
        raise ConfigError(f"{label}: examples: the list is empty (leave the field out for a task without examples)")
    if not task.examples:
        if task.scorer is not None or task.split is not None:
            raise ConfigError(f"{label}: examples: a scorer or split needs examples")
        return
    try:
        scorer = task_scorer(task)
    except ConfigError as e:
        raise ConfigError(f"{label}: {e}") from None
    used = sorted(set(_PLACEHOLDER.findall(task.prompt)))
    for i, ex in enumerate(task.examples):
        field = f"examples[{i}]" + (f" (id {ex.id!r})" if ex.id else "")
        if ex.target is None and scorer.needs_target:
            raise ConfigError(f"{label}: {field}.target: missing (scorer {scorer.kind} needs a target)")
        if ex.target is not None:
            try:
                scorer.check_target(ex.target)
            except ValueError as e:
                raise ConfigError(f"{label}: {field}.target: {e}") from None
        missing = [name for name in used if name not in placeholders(ex.input)]
        if missing:
            raise ConfigError(
                f"{label}: prompt: placeholder(s) {', '.join('{' + m + '}' for m in missing)} not "
                f"provided by {field}.input (it provides {', '.join(placeholders(ex.input))})"
            )
    try:
        split_examples(task)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    if not scorer.needs_model:
        _self_check(task, scorer, label)


def _self_check(task: Task, scorer: Scorer, label: str) -> None:
    """Score replies that match and that do not: each example's target, an empty reply and another example's
    target as the reply; a value outside [0, 1] is a config error (a scorer that raises here may still work
    on real replies, so an exception is left to be recorded per example)."""
    examples = task.examples or []
    for i, ex in enumerate(examples):
        own = _text(ex.target)
        replies = [(own, "with its target as the reply"), ("", "with an empty reply")]
        others = ((i + k) % len(examples) for k in range(1, len(examples)))
        j = next((j for j in others if examples[j].target is not None and _text(examples[j].target) != own), None)
        if j is not None:
            replies.append((_text(examples[j].target), f"with examples[{j}]'s target as the reply"))
        for reply, how in replies:
            try:
                scored = scorer.score_example(reply, ex)
            except RegexTimeout as e:  # it would hang every run on such a reply: refused at load
                raise ConfigError(f"{label}: scorer: on examples[{i}] {how}, {e}") from None
            except Exception:
                continue
            checked = bounded(scorer, scored)
            if checked.out_of_range:
                raise ConfigError(f"{label}: scorer: on examples[{i}] {how}, {checked.error}")


__all__ = [
    "DEFAULT_SCORER",
    "check_task",
    "examples_of",
    "format_prompt",
    "input_text",
    "parse_task",
    "placeholders",
    "read_examples",
    "read_tasks",
    "split_examples",
    "task_scorer",
]
