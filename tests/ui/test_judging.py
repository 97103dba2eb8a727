"""The judging widget's logic without a browser (the browser test is tests/ui/test_browser.py's 08_judge): what it
shows is only the input and the texts in the slot's order, a judgment goes to the person's file, a bad name is one
line, and a rating plan gets a button per value of its scale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from judging import write_open_ended_sweep

from promptlab.people import make_plan, read_judgments, read_plan, write_plan
from promptlab.ui.judging import JudgingWidget


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_open_ended_sweep(tmp_path_factory.mktemp("widget") / "results")


@pytest.fixture
def results(sweep_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(sweep_dir, copy)
    return copy


def test_a_pair_is_shown_blind_and_a_judgment_is_stored_with_its_order(results: Path) -> None:
    widget = JudgingWidget(results, person="ann")  # no plan yet: one is drawn (pairs, seed 0) and stored
    plan = read_plan(results)
    assert plan == make_plan(results, seed=0)
    slot = plan.slots[0]
    item = plan.item(slot.item)
    assert widget.progress.value == f"Item 1 of {len(plan.slots)}"
    for text in item.texts.values():
        assert text.replace("'", "&#x27;") in widget.view.value
    for secret in (item.critic, item.run_id, item.loop, "start", "returned"):
        assert secret not in widget.view.value
    assert widget.view.value.index(item.texts[slot.shown[0]]) < widget.view.value.index(item.texts[slot.shown[1]])
    widget.comment.value = "B rambles"
    widget.judge("A")
    stored = read_judgments(results).judgments
    assert [(j.position, j.value, j.shown, j.comment, j.source) for j in stored] == [
        (0, "A", slot.shown, "B rambles", "widget")
    ]
    assert widget.progress.value.startswith(f"Item 2 of {len(plan.slots)}; ") and widget.comment.value == ""
    assert JudgingWidget(results, person="ann").progress.value.startswith("Item 2 of")  # resumes from the file


def test_a_bad_name_is_one_line_and_nothing_starts(results: Path) -> None:
    widget = JudgingWidget(results)
    widget.begin("not a name")
    assert "person &#x27;not a name&#x27;: a name is" in widget.message.value and widget.session is None
    assert widget.panel.layout.display == "none"


def test_a_rating_plan_has_a_button_per_value_with_its_anchors(results: Path) -> None:
    write_plan(results, make_plan(results, kind="rating", seed=1))
    widget = JudgingWidget(results, person="bob")
    labels = [b.description for b in widget.buttons.children]
    assert len(labels) == 11 and labels[0].startswith("1 misses") and labels[-1] == "Skip [s]"
    widget.judge(7)
    assert [j.value for j in read_judgments(results).judgments] == [7]
