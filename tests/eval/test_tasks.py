"""Grounded tasks: the placeholder rule, splits, loading examples from a file next to the task file, and every
ConfigError naming the task, the file and line, and the field before any model call."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import promptlab as pl
from promptlab.eval.tasks import check_task, examples_of, format_prompt, read_tasks, split_examples
from promptlab.record import Example, Split, Task

# format_prompt --------------------------------------------------------------------------------------------


def test_string_input_fills_input() -> None:
    assert format_prompt("Classify: {input}\nLabel:", "great film") == "Classify: great film\nLabel:"


def test_dict_input_fills_each_field_and_input_as_lines() -> None:
    prompt = "Q: {question}\nContext:\n{input}"
    assert format_prompt(prompt, {"question": "Who?", "n": 3}) == "Q: Who?\nContext:\nquestion: Who?\nn: 3"


def test_substitution_is_literal_and_leaves_json_and_unknown_braces() -> None:
    prompt = 'Reply as {"label": "..."} for {input}; ignore {other} and {{input}}'
    out = format_prompt(prompt, "x {input} y")
    assert out == 'Reply as {"label": "..."} for x {input} y; ignore {other} and {x {input} y}'


def test_no_placeholder_appends_the_input_after_a_blank_line() -> None:
    assert format_prompt("Is this positive?", "great film") == "Is this positive?\n\ngreat film"
    assert format_prompt("Solve it.  \n", {"a": 1, "b": "two"}) == "Solve it.\n\na: 1\nb: two"
    # an unknown placeholder only: the input is appended and the braces stay
    assert format_prompt("Use {style}.", "text") == "Use {style}.\n\ntext"


def test_a_dict_key_named_input_wins_over_the_lines() -> None:
    assert format_prompt("{input}!", {"input": "hi", "x": 1}) == "hi!"


# splits ---------------------------------------------------------------------------------------------------


def _task(n: int, split: Split | None = None, **kw: object) -> Task:
    examples = [Example(input=f"q{i}", target=f"a{i}") for i in range(n)]
    return Task(id="t", prompt="Answer: {input}", examples=examples, split=split, **kw)  # type: ignore[arg-type]


def test_split_is_fixed_by_seed_and_covers_the_rest() -> None:
    task = _task(20, Split(seed=3, dev=0.3))
    dev, test = split_examples(task)
    assert (dev, test) == split_examples(_task(20, Split(seed=3, dev=0.3)))
    assert len(dev) == 6 and len(test) == 14
    assert sorted(dev + test) == list(range(20)) and dev == sorted(dev) and test == sorted(test)
    other, _ = split_examples(_task(20, Split(seed=4, dev=0.3)))
    assert other != dev


def test_split_sizes_as_counts_and_fractions() -> None:
    dev, test = split_examples(_task(10, Split(dev=2, test=3)))
    assert len(dev) == 2 and len(test) == 3 and not set(dev) & set(test)
    dev, test = split_examples(_task(10, Split(dev=0.25, test=0.5)))
    assert (len(dev), len(test)) == (3, 5)  # 2.5 rounds half up
    dev, test = split_examples(_task(3, Split(dev=0.01)))
    assert (len(dev), len(test)) == (1, 2)  # a fraction gives at least one


def test_split_that_does_not_fit_is_a_config_error() -> None:
    with pytest.raises(pl.ConfigError, match=r"dev 8 \+ test 5 examples do not fit in the 10"):
        split_examples(_task(10, Split(dev=8, test=5)))
    with pytest.raises(pl.ConfigError, match="test 0"):
        split_examples(_task(4, Split(dev=4)))


def test_examples_of_a_split() -> None:
    task = _task(10, Split(dev=3))
    dev, test = split_examples(task)
    assert [e.input for e in examples_of(task, "dev")] == [f"q{i}" for i in dev]
    assert [e.input for e in examples_of(task, "test")] == [f"q{i}" for i in test]
    assert len(examples_of(task, "all")) == 10


# loading and checking -------------------------------------------------------------------------------------


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


CHOICE = {"kind": "choice", "labels": ["positive", "negative"]}


def test_examples_file_is_read_relative_to_the_task_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _write(
        data / "reviews.jsonl",
        [
            {"input": "good", "target": "positive", "id": "r1"},
            "",
            {"input": "bad", "target": "negative"},
            {"input": "ok", "target": "positive"},
        ],
    )
    tasks = _write(
        data / "tasks.jsonl",
        [
            {"id": "plain", "prompt": "Write a haiku"},
            {
                "id": "s",
                "prompt": "Sentiment of {input}?",
                "examples": "reviews.jsonl",
                "scorer": CHOICE,
                "split": {"dev": 1},
            },
        ],
    )
    monkeypatch.chdir(tmp_path)  # not the task file's directory
    plain, grounded = read_tasks(tasks)
    assert not plain.grounded and grounded.grounded
    assert [e.input for e in grounded.examples or []] == ["good", "bad", "ok"]
    assert (grounded.examples or [])[0].id == "r1" and grounded.examples_source == "reviews.jsonl"


def test_inline_examples(tmp_path: Path) -> None:
    tasks = _write(
        tmp_path / "t.jsonl",
        [
            {
                "id": "n",
                "prompt": "Compute {input}",
                "scorer": "numeric",
                "examples": [{"input": "1+1", "target": 2}, {"input": "2+2", "target": 4}],
                "split": {"dev": 1},
            }
        ],
    )
    (task,) = read_tasks(tasks)
    assert [e.target for e in task.examples or []] == [2, 4]


def _error(tmp_path: Path, task: dict, examples: list[object] | None = None) -> str:
    if examples is not None:
        _write(tmp_path / "ex.jsonl", examples)
    path = _write(tmp_path / "tasks.jsonl", [{"id": "first", "prompt": "fine"}, task])
    with pytest.raises(pl.ConfigError) as e:
        read_tasks(path)
    return str(e.value)


def test_missing_examples_file_names_task_line_and_field(tmp_path: Path) -> None:
    msg = _error(tmp_path, {"id": "s", "prompt": "{input}", "examples": "missing.jsonl"})
    assert f"{tmp_path / 'tasks.jsonl'}:2" in msg and "task 's'" in msg
    assert "examples: no examples file 'missing.jsonl'" in msg


def test_example_without_target_in_a_file_names_both_lines(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {"id": "s", "prompt": "{input}", "examples": "ex.jsonl"},
        [{"input": "a", "target": "a"}, {"input": "b"}],
    )
    assert f"{tmp_path / 'tasks.jsonl'}:2: task 's'" in msg
    assert f"examples file {tmp_path / 'ex.jsonl'}:2" in msg and "target: Field required" in msg


def test_example_without_target_inline(tmp_path: Path) -> None:
    msg = _error(
        tmp_path, {"id": "s", "prompt": "{input}", "examples": [{"input": "a", "target": "a"}, {"input": "b"}]}
    )
    assert ":2: task 's': examples[1]: target: Field required" in msg


def test_null_target_is_refused_by_scorers_that_need_one(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {"id": "s", "prompt": "{input}", "examples": [{"input": "a", "target": "a"}, {"input": "b", "target": None}]},
    )
    assert "task 's': examples[1].target: missing (scorer exact needs a target)" in msg


def test_unknown_scorer(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {
            "id": "s",
            "prompt": "{input}",
            "scorer": {"kind": "fuzzy"},
            "examples": [{"input": "a", "target": "a"}, {"input": "b", "target": "b"}],
        },
    )
    assert ":2: task 's': scorer.kind: unknown scorer 'fuzzy'; known kinds: exact, choice" in msg


def test_target_outside_the_choice_labels(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {
            "id": "s",
            "prompt": "{input}",
            "scorer": CHOICE,
            "examples": [
                {"input": "a", "target": "positive"},
                {"input": "b", "target": "meh"},
                {"input": "c", "target": "negative"},
            ],
        },
    )
    assert "task 's': examples[1].target: target 'meh' is not one of the labels" in msg


def test_placeholder_the_examples_lack(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {"id": "s", "prompt": "Q: {question} ctx: {context}", "examples": "ex.jsonl"},
        [
            {"input": {"question": "a", "context": "c"}, "target": "x"},
            {"input": {"question": "b"}, "target": "y", "id": "e2"},
        ],
    )
    assert "task 's': prompt: placeholder(s) {context} not provided by examples[1] (id 'e2').input" in msg


def test_placeholder_typo_on_string_inputs(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {
            "id": "s",
            "prompt": "Classify {inptu}",
            "examples": [{"input": "a", "target": "a"}, {"input": "b", "target": "b"}],
        },
    )
    assert "placeholder(s) {inptu} not provided by examples[0].input (it provides input)" in msg


def test_scorer_out_of_range_on_the_self_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad_scorer_mod.py").write_text(
        textwrap.dedent("""
        def percent(output, target):
            return 100.0 if output == str(target) else 0.0
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        msg = _error(
            tmp_path,
            {
                "id": "s",
                "prompt": "{input}",
                "scorer": {"kind": "python", "function": "bad_scorer_mod:percent"},
                "examples": [{"input": "a", "target": "a"}, {"input": "b", "target": "b"}],
            },
        )
    finally:
        sys.modules.pop("bad_scorer_mod", None)
    assert ":2: task 's': scorer: on examples[0] with its target as the reply" in msg
    assert "returned 100.0, not a number in [0, 1]" in msg


@pytest.mark.parametrize(
    ("body", "where"),
    [
        # 1 on a match, 7 otherwise: the bad value shows only on a reply that does not match
        ("return 1.0 if output == str(target) else 7.0", "examples[0] with an empty reply"),
        # in range on the empty reply too, out of range on a wrong label
        (
            "return 1.0 if output == str(target) else (0.0 if not output else -1.0)",
            "examples[0] with examples[1]'s target as the reply",
        ),
    ],
)
def test_scorer_out_of_range_on_a_reply_that_does_not_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, where: str
) -> None:
    (tmp_path / "wrong_reply_mod.py").write_text(f"def grade(output, target):\n    {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        msg = _error(
            tmp_path,
            {
                "id": "s",
                "prompt": "{input}",
                "scorer": {"kind": "python", "function": "wrong_reply_mod:grade"},
                "examples": [{"input": "a", "target": "yes"}, {"input": "b", "target": "no"}],
            },
        )
    finally:
        sys.modules.pop("wrong_reply_mod", None)
    assert f":2: task 's': scorer: on {where}, scorer python returned" in msg
    assert "not a number in [0, 1]" in msg


def test_judge_scorer_is_not_self_checked(tmp_path: Path) -> None:
    judge = pl.scripted("never-self-checked", [])
    path = _write(
        tmp_path / "t.jsonl",
        [
            {
                "id": "j",
                "prompt": "{input}",
                "scorer": {"kind": "judge", "model": judge.name},
                "examples": [{"input": "a", "target": "x"}, {"input": "b", "target": "y"}],
            }
        ],
    )
    (task,) = read_tasks(path)
    assert task.grounded and judge.requests == []


def test_bad_split_names_the_task(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {
            "id": "s",
            "prompt": "{input}",
            "split": {"dev": 5},
            "examples": [{"input": "a", "target": "a"}, {"input": "b", "target": "b"}],
        },
    )
    assert ":2: task 's': split: dev 5" in msg


def test_no_model_call_is_made_while_checking(tmp_path: Path) -> None:
    judge = pl.scripted("never-called", [])
    path = _write(
        tmp_path / "t.jsonl",
        [
            {
                "id": "j",
                "prompt": "{input}",
                "scorer": {"kind": "judge", "model": judge.name},
                "examples": [{"input": "a", "target": None}, {"input": "b", "target": None}],
            }
        ],
    )
    (task,) = read_tasks(path)
    assert task.grounded and judge.requests == []


def test_check_task_on_a_task_built_in_python() -> None:
    task = _task(4, Split(dev=1))
    check_task(task)
    bad = task.model_copy(update={"prompt": "Answer {question}"})
    with pytest.raises(pl.ConfigError, match=r"^notebook: task 't': prompt: placeholder\(s\) \{question\}"):
        check_task(bad, where="notebook")


def test_bad_task_field_names_line_field_and_task(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        {
            "id": "s",
            "prompt": "{input}",
            "split": {"dev": 0},
            "examples": [{"input": "a", "target": "a"}, {"input": "b", "target": "b"}],
        },
    )
    assert f"{tmp_path / 'tasks.jsonl'}:2: split.dev: Input should be greater than 0" in msg and "(task 's')" in msg


def test_empty_examples_and_a_scorer_without_examples(tmp_path: Path) -> None:
    msg = _error(tmp_path, {"id": "s", "prompt": "{input}", "examples": []})
    assert ":2: task 's': examples: the list is empty" in msg
    msg = _error(tmp_path, {"id": "s", "prompt": "p", "scorer": "exact"})
    assert ":2: task 's': examples: a scorer or split needs examples" in msg
