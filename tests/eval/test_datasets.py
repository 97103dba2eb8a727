"""The grounded data sets under data/: reproducible from their generator, big enough, targets correct."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from promptlab.eval.scorers import get_scorer
from promptlab.eval.tasks import examples_of, read_tasks, split_examples

DATA = Path(__file__).resolve().parents[2] / "data"
TASK_FILE = DATA / "grounded_tasks.jsonl"
TASK_IDS = ["sentiment", "arithmetic", "dates"]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _examples(task_id: str) -> list[dict]:
    return _rows(DATA / "grounded" / f"{task_id}.jsonl")


@pytest.mark.slow
def test_generator_reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(DATA / "make_datasets.py"), "--out", str(tmp_path)], check=True, capture_output=True
    )
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    assert [str(p) for p in made] == [
        "grounded/arithmetic.jsonl",
        "grounded/dates.jsonl",
        "grounded/sentiment.jsonl",
        "grounded_tasks.jsonl",
    ]
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (DATA / rel).read_bytes(), f"{rel} differs from its generator"


def test_task_file_loads_with_examples_scorer_and_split() -> None:
    tasks = {t.id: t for t in read_tasks(TASK_FILE)}
    assert list(tasks) == TASK_IDS
    for task in tasks.values():
        assert task.grounded and task.scorer is not None and task.split is not None
        assert len(task.examples or []) >= 100
        dev, test = split_examples(task)
        assert (len(dev), len(test)) == (task.split.dev, task.split.test)
        assert 15 <= len(dev) <= 30 and 50 <= len(test) <= 80
        assert not set(dev) & set(test)
        assert "{input}" in task.prompt  # the starting prompt places the input explicitly


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_example_has_an_input_a_target_and_a_unique_id(task_id: str) -> None:
    rows = _examples(task_id)
    assert len(rows) >= 100
    assert all(set(r) == {"id", "input", "target"} and r["input"].strip() and r["target"] is not None for r in rows)
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["input"] for r in rows}) >= 0.9 * len(rows)  # varied, not one template repeated


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_each_target_scores_1_as_a_reply_and_a_wrong_reply_scores_0(task_id: str) -> None:
    task = next(t for t in read_tasks(TASK_FILE) if t.id == task_id)
    scorer = get_scorer(task.scorer or {})
    wrong = {
        "sentiment": lambda t: "negative" if t == "positive" else "positive",
        "arithmetic": lambda t: str(t + 1),
        "dates": lambda t: "1900-01-01",
    }[task_id]
    for ex in examples_of(task, "dev"):
        assert scorer.score_example(str(ex.target), ex).value == 1.0
        assert scorer.score_example(wrong(ex.target), ex).value == 0.0


def test_sentiment_labels_are_balanced_in_each_split() -> None:
    task = next(t for t in read_tasks(TASK_FILE) if t.id == "sentiment")
    assert {r["target"] for r in _examples("sentiment")} == {"positive", "negative"}
    for split in ("dev", "test"):
        labels = [ex.target for ex in examples_of(task, split)]
        assert 0.3 <= labels.count("positive") / len(labels) <= 0.7
    # the label words themselves never appear in a review (no trivial keyword match)
    assert not any(re.search(r"positive|negative", r["input"], re.I) for r in _examples("sentiment"))


def _solve(text: str) -> int:
    """Recompute a word problem's answer from its numbers and wording (independently of the generator)."""
    a, b, *rest = (int(n) for n in re.findall(r"\d+", text))
    if "packs of" in text:
        return a * b - rest[0]
    if "more" in text and "than" in text:
        return a + a + b
    if "equally among" in text:
        assert a % b == 0
        return a // b
    if "bags with" in text:
        return a * b
    if "gave away" in text:
        return a - b
    if "gives" in text:
        return a + b
    raise AssertionError(f"unrecognised problem: {text}")


def test_arithmetic_targets_recomputed() -> None:
    rows = _examples("arithmetic")
    for r in rows:
        assert r["target"] == _solve(r["input"]) and r["target"] >= 0, r
    kinds = {
        k
        for k in ("packs of", "than", "equally", "bags with", "gave away", "gives")
        if any(k in r["input"] for r in rows)
    }
    assert len(kinds) == 6


_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]


def _parse_date(text: str) -> dt.date:
    """The one date in `text`, read with datetime/regexes written here (independently of the generator)."""
    m = re.search(r"(\d{4})[/.](\d{2})[/.](\d{2})", text)
    if m:
        return dt.date(*map(int, m.groups()))
    low = text.lower()
    month = next(i + 1 for i, name in enumerate(_MONTHS) if re.search(rf"\b{name[:3]}", low))
    year = int(re.findall(r"\b(\d{4})\b", text)[0])
    day = int(re.findall(r"\b(\d{1,2})(?:st|nd|rd|th)?\b(?!\d)", text.replace(str(year), ""))[0])
    date = dt.date(year, month, day)
    weekday = re.search(r"(Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day", text)
    if weekday:  # a weekday written in the sentence must be the date's own
        assert ["Mon", "Tues", "Wednes", "Thurs", "Fri", "Satur", "Sun"].index(weekday.group(1)) == date.weekday()
    return date


def test_date_targets_parsed_back() -> None:
    rows = _examples("dates")
    for r in rows:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["target"])
        assert _parse_date(r["input"]).isoformat() == r["target"], r
    assert any(re.search(r"\d{4}/\d{2}/\d{2}", r["input"]) for r in rows)
    assert any(re.search(r"\d(st|nd|rd|th) of", r["input"]) for r in rows)


def test_demo_experiment_crosses_three_critics_with_the_grounded_tasks() -> None:
    from promptlab.sweeps.experiment import load_experiment

    exp = load_experiment(DATA.parent / "experiments" / "demo.yaml")
    assert [t.id for t in exp.load_tasks()] == TASK_IDS and all(t.grounded for t in exp.load_tasks())
    cells = exp.cells()
    assert {c.params["loop"] for c in cells} == {"creator_critic"}
    assert [c.params["critic_model"] for c in cells] == ["local/smollm2", "sim/oracle", "sim/noisy?sd=2&seed=0"]
    assert all(c.config["score_mode"] == "expected" and c.config["score_source"] == "critic" for c in cells)
    # 21 runs per critic (3 tasks x 7 replicates): the power docs/data.md states, in the demo's time budget
    assert exp.replicates == 7 and len(cells) == 3
