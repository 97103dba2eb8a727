"""Scorers: each kind on edge cases (empty reply, several labels, numbers with units or commas, unicode,
regex groups, JSON in fences), the registry's errors, and failures recorded per example."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

import promptlab as pl
from promptlab.eval.matching import normalise, numbers
from promptlab.eval.scorers import SCORERS, get_scorer
from promptlab.eval.scoring import Scored, score_safely
from promptlab.record import Example


def score(spec: str | dict, output: str, target: object) -> Scored:
    return asyncio.run(score_safely(get_scorer(spec), output, Example(input="q", target=target)))


LABELS = {"kind": "choice", "labels": ["positive", "negative", "neutral"]}


@pytest.mark.parametrize(
    ("output", "target", "value"),
    [
        ("Paris", "paris", 1.0),
        ("  **Paris.**  ", "Paris", 1.0),
        ('"Paris"', "Paris", 1.0),
        ("Paris, France", "Paris", 0.0),
        ("", "Paris", 0.0),
        ("Zürich", "ZÜRICH", 1.0),
        ("ｐａｒｉｓ", "paris", 1.0),  # full-width letters normalise (NFKC)
        ("new   york", "New York", 1.0),
        ("-5", "5", 0.0),  # a sign is not punctuation to strip
        ("Lyon", ["Paris", "Lyon"], 1.0),
    ],
)
def test_exact(output: str, target: object, value: float) -> None:
    assert score("exact", output, target).value == value


@pytest.mark.parametrize(
    ("output", "target", "value", "detail"),
    [
        ("Positive", "positive", 1.0, "label: positive"),
        ("The review is NEGATIVE.", "negative", 1.0, "label: negative"),
        ("negative", "positive", 0.0, "label: negative"),
        ("", "positive", 0.0, "no label given"),
        ("I cannot tell.", "positive", 0.0, "no label given"),
        ("positive or negative", "positive", 0.0, "several labels given: positive, negative"),
        ("positively", "positive", 0.0, "no label given"),  # whole words only
    ],
)
def test_choice(output: str, target: str, value: float, detail: str) -> None:
    s = score(LABELS, output, target)
    assert (s.value, s.detail, s.error) == (value, detail, None)


def test_choice_prefers_the_longest_label() -> None:
    spec = {"kind": "choice", "labels": ["positive", "very positive"]}
    assert score(spec, "Very positive!", "very positive").value == 1.0
    assert score(spec, "Very positive!", "positive").value == 0.0


def test_choice_target_outside_the_labels_is_an_error_on_that_example() -> None:
    s = score(LABELS, "positive", "mixed")
    assert s.value is None and "not one of the labels" in (s.error or "")


def test_contains() -> None:
    assert score("contains", "The capital is Paris, of course.", "paris").value == 1.0
    assert score("contains", "", "paris").value == 0.0
    assert score("contains", "It is Lyon", ["Paris", "Lyon"]).value == 1.0


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("1,234 apples", [1234.0]),
        ("-3.5°C then +2", [-3.5, 2.0]),
        ("−7 (unicode minus)", [-7.0]),
        ("12kg, 1_000 g, 1\u202f000 mm", [12.0, 1000.0, 1000.0]),
        ("$4.99 each", [4.99]),
        ("1.5e3 m", [1500.0]),
        ("no digits here", []),
        ("v2 and 3-4", [3.0, 4.0]),  # a digit inside a word is not a number
    ],
)
def test_numbers(text: str, found: list[float]) -> None:
    assert numbers(text) == found


@pytest.mark.parametrize(
    ("spec", "output", "target", "value"),
    [
        ("numeric", "The answer is 1,234 apples.", 1234, 1.0),
        ("numeric", "1234.0", "1,234", 1.0),
        ("numeric", "It costs 12 dollars", 13, 0.0),
        ({"kind": "numeric", "tolerance": 1}, "It costs 12 dollars", 13, 1.0),
        ({"kind": "numeric", "relative": 0.1}, "95", 100, 1.0),
        ({"kind": "numeric", "pick": "last"}, "3 + 4 = 7", 7, 1.0),
        ("numeric", "3 + 4 = 7", 7, 0.0),
        ("numeric", "-12.5 °C", -12.5, 1.0),
    ],
)
def test_numeric(spec: str | dict, output: str, target: object, value: float) -> None:
    assert score(spec, output, target).value == value


def test_numeric_without_a_number_records_why() -> None:
    s = score("numeric", "", 3)
    assert (s.value, s.detail) == (0.0, "no number in the reply")


def test_regex_groups_and_modes() -> None:
    spec = {"kind": "regex", "pattern": r"answer:\s*(\w+)"}
    assert score(spec, "Answer: Paris", "paris").value == 1.0
    assert score(spec, "Answer: Lyon", "paris").value == 0.0
    assert score(spec, "no answer here", "paris").detail == "no match"
    named = {"kind": "regex", "pattern": r"(?P<d>\d{4})-(?P<m>\d\d)", "group": "m"}
    assert score(named, "on 2024-07-01", "07").value == 1.0
    assert score({"kind": "regex", "pattern": r"^\d{4}-\d\d-\d\d$"}, "2024-07-01", None).value == 1.0
    assert score("regex", "ID: AB-123", r"[A-Z]{2}-\d+").value == 1.0  # the target is the pattern


def test_regex_bad_pattern_is_a_config_error() -> None:
    with pytest.raises(pl.ConfigError, match="scorer"):
        get_scorer({"kind": "regex", "pattern": "(unclosed"})


@pytest.mark.parametrize(
    ("output", "value"),
    [
        ('{"answer": "Paris"}', 1.0),
        ('Sure!\n```json\n{"answer": "paris", "x": 1}\n```', 1.0),
        ('Here it is: {"answer": "Lyon"} done', 0.0),
        ("Paris", 0.0),
        ('{"other": "Paris"}', 0.0),
    ],
)
def test_json_field(output: str, value: float) -> None:
    assert score({"kind": "json_field", "path": "answer"}, output, "Paris").value == value


def test_json_field_nested_path_and_numbers() -> None:
    spec = {"kind": "json_field", "path": "result.items[1]"}
    s = score(spec, '{"result": {"items": [1, 2.0]}}', 2)
    assert (s.value, s.detail) == (1.0, "result.items[1] = 2.0")
    assert score(spec, '{"result": {"items": [1]}}', 2).detail == "no result.items[1] in the reply's JSON"


@pytest.fixture
def scorer_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_scorers.py").write_text(
        textwrap.dedent("""
        def length_ok(output, target):
            return len(output) <= target

        def half(output, target):
            return 0.5, "always half"

        def too_big(output, target):
            return 3

        def broken(output, target):
            raise RuntimeError("boom")
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_scorers"
    sys.modules.pop("my_scorers", None)


def test_python_scorer(scorer_module: str) -> None:
    assert score({"kind": "python", "function": f"{scorer_module}:length_ok"}, "abc", 5).value == 1.0
    s = score({"kind": "python", "function": f"{scorer_module}:half"}, "abc", 5)
    assert (s.value, s.detail) == (0.5, "always half")


def test_python_scorer_failures_are_recorded_not_raised(scorer_module: str) -> None:
    s = score({"kind": "python", "function": f"{scorer_module}:broken"}, "abc", 1)
    assert s.value is None and s.error == "RuntimeError: boom"
    s = score({"kind": "python", "function": f"{scorer_module}:too_big"}, "abc", 1)
    assert s.value is None and s.out_of_range and "returned 3" in (s.error or "")


def test_python_scorer_unknown_function_is_a_config_error(scorer_module: str) -> None:
    with pytest.raises(pl.ConfigError, match="has no 'nope'"):
        get_scorer({"kind": "python", "function": f"{scorer_module}:nope"})
    with pytest.raises(pl.ConfigError, match="cannot import module 'no_such_module_xyz'"):
        get_scorer({"kind": "python", "function": "no_such_module_xyz:f"})


def test_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(pl.ConfigError) as e:
        get_scorer("fuzzy")
    assert "unknown scorer 'fuzzy'" in str(e.value)
    assert all(kind in str(e.value) for kind in SCORERS)


def test_unknown_option_names_the_field_and_the_options() -> None:
    with pytest.raises(pl.ConfigError, match=r"scorer\.labelz: Extra inputs.*its options: labels"):
        get_scorer({"kind": "choice", "labels": ["a", "b"], "labelz": []})


def test_judge_calls_its_own_model_with_a_structured_reply() -> None:
    judge = pl.scripted("judge-s", ['{"reason": "matches the reference", "score": 8}'])
    s = asyncio.run(
        score_safely(
            get_scorer({"kind": "judge", "model": judge.name, "rubric": "Names the city."}),
            "It is Paris.",
            Example(input="Capital of France?", target="Paris"),
            cache=False,
        )
    )
    assert (s.value, s.detail, s.error) == (0.8, "matches the reference", None)
    assert len(s.calls) == 1 and s.calls[0].model == judge.name
    sent = judge.requests[0]["messages"][-1]["content"]
    assert "Names the city." in sent and "It is Paris." in sent and '"Paris"' in sent
    assert "Capital of France?" in sent


def test_judge_unusable_reply_is_an_error_on_the_example() -> None:
    judge = pl.scripted("judge-bad", ["not json", "still not", "nope"])
    s = asyncio.run(
        score_safely(
            get_scorer({"kind": "judge", "model": judge.name}), "x", Example(input="q", target="t"), cache=False
        )
    )
    assert s.value is None and (s.error or "").startswith("ParseError") and s.failed_calls == [judge.name]


def test_normalise_is_idempotent_on_unicode() -> None:
    for text in ["  «Ça va?»  ", "ÅNGSTRÖM", "naïve…"]:
        assert normalise(normalise(text)) == normalise(text)
    assert normalise("  «Ça va?»  ") == "ça va"
