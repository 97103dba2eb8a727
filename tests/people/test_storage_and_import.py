"""Judgments on disk and judgments made elsewhere: append-only JSON lines, a damaged line named and skipped, and a
CSV (or rows from code) refused by name, before anything is stored, when an item is unknown or a value is off the
scale. The results directory is a real open-ended sweep (tests/support/judging.py)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from judging import write_open_ended_sweep

from promptlab.errors import ConfigError, PromptlabWarning
from promptlab.people import (
    Judgment,
    Session,
    add_judgments,
    append_judgments,
    import_csv,
    make_plan,
    read_judgments,
    read_plan,
    write_plan,
)
from promptlab.people.plan import Scale


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_open_ended_sweep(tmp_path_factory.mktemp("people") / "results")


@pytest.fixture
def results(sweep_dir: Path, tmp_path: Path) -> Path:
    """A fresh copy of the sweep with a pairwise plan and no judgments."""
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(sweep_dir, copy, ignore=shutil.ignore_patterns("judgments"))
    write_plan(copy, make_plan(copy, seed=3))
    return copy


def test_a_judgment_is_one_line_appended_to_the_persons_file(results: Path) -> None:
    plan = read_plan(results)
    session = Session(results, "ann")
    first = session.next_slot()
    assert first is not None and first.position == 0
    session.show(first)
    stored = session.record(first, "A", comment="crisper")
    text = (results / "judgments" / "ann.jsonl").read_text()
    assert text.count("\n") == 1 and json.loads(text)["item"] == first.item == stored.item
    assert json.loads(text)["shown"] == first.shown and json.loads(text)["version"] == 1
    assert session.next_slot().position == 1  # type: ignore[union-attr]
    second = Session(results, "ann")  # a new session (a restarted kernel) resumes where the file says
    assert second.next_slot().position == 1  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="judged it already"):
        second.record(first, "B")
    with pytest.raises(ConfigError, match="not A, B, tie or skip"):
        second.record(plan.slots[1], "C")
    assert (results / "judgments" / "ann.jsonl").read_text() == text


def test_a_damaged_line_is_named_with_a_short_excerpt_and_skipped(results: Path) -> None:
    plan = read_plan(results)
    good = [
        Judgment(item=plan.slots[k].item, person="bob", value="B", shown=plan.slots[k].shown, position=k)
        for k in range(3)
    ]
    append_judgments(results, good[:2])
    path = results / "judgments" / "bob.jsonl"
    secret = "x" * 500
    with path.open("a") as f:
        f.write('{"item": "' + secret)  # a write cut short: no closing quote, no line break
    append_judgments(results, good[2:])  # the next append starts a new line, so only the cut line is lost
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stored = read_judgments(results)
    assert [j.position for j in stored.judgments] == [0, 1, 2]
    assert len(stored.damaged) == 1 and stored.damaged[0].startswith("bob.jsonl:3: not JSON")
    assert secret not in stored.damaged[0] and len(stored.damaged[0]) < 120
    assert any(issubclass(w.category, PromptlabWarning) and "bob.jsonl:3" in str(w.message) for w in caught)


def test_a_line_of_another_person_or_with_an_unknown_field_is_damaged(results: Path) -> None:
    folder = results / "judgments"
    (folder / "cy.jsonl").write_text(
        json.dumps({"item": "x", "person": "dee", "value": "A"})
        + "\n"
        + json.dumps({"item": "x", "person": "cy", "value": "A", "mood": 1})
        + "\n"
    )
    stored = read_judgments(results, warn=False)
    assert stored.judgments == []
    assert stored.damaged[0].startswith("cy.jsonl:1: person 'dee'") and stored.damaged[1].startswith(
        "cy.jsonl:2: not a judgment (mood"
    )


def test_a_csv_with_an_unknown_item_or_a_value_off_the_scale_is_refused_whole(results: Path, tmp_path: Path) -> None:
    plan = read_plan(results)
    add_judgments(results, [{"item": plan.items[0].id, "person": "ann", "value": "A"}])
    before = (results / "judgments" / "ann.jsonl").read_bytes()
    csv = tmp_path / "j.csv"
    csv.write_text(
        "item,person,value\n"
        f"{plan.items[1].id},ann,B\n"
        "no-such-item,ann,A\n"
        f"{plan.items[2].id},ann,maybe\n"
        f"{plan.items[3].id},bad name,A\n"
    )
    with pytest.raises(ConfigError) as e:
        import_csv(results, csv)
    message = str(e.value)
    assert "3 of 4 judgment(s) refused; nothing stored" in message
    assert f"{csv}:3: unknown item 'no-such-item'" in message
    assert f"{csv}:4: value 'maybe' is not A, B, tie or skip" in message
    assert f"{csv}:5: person 'bad name'" in message
    assert (results / "judgments" / "ann.jsonl").read_bytes() == before  # nothing stored, nothing lost
    assert sorted(p.name for p in (results / "judgments").iterdir()) == ["ann.jsonl", "plan.json"]


def test_a_good_csv_is_stored_with_the_items_order_and_not_twice(results: Path, tmp_path: Path) -> None:
    plan = read_plan(results)
    csv = tmp_path / "j.csv"
    csv.write_text(
        "item,person,value,seconds\n"
        + "".join(f"{i.id},dee,{v},4.5\n" for i, v in zip(plan.items[:3], ["a", "B", "tie"], strict=True))
    )
    assert import_csv(results, csv) == 3
    stored = read_judgments(results).judgments
    assert [(j.value, j.shown, j.source, j.seconds) for j in stored] == [
        (v, i.order, "csv", 4.5) for i, v in zip(plan.items[:3], ["A", "B", "tie"], strict=True)
    ]
    with pytest.raises(ConfigError, match="already imported"):
        import_csv(results, csv)
    assert len(read_judgments(results).judgments) == 3


def test_a_csv_header_must_name_item_person_and_value(results: Path, tmp_path: Path) -> None:
    csv = tmp_path / "j.csv"
    csv.write_text("item,person,vaule\nx,ann,A\n")
    with pytest.raises(ConfigError, match=r"missing \['value'\]; unknown \['vaule'\]"):
        import_csv(results, csv)


def test_ratings_off_the_scale_are_refused_by_name(results: Path) -> None:
    write_plan(results, make_plan(results, kind="rating", seed=1, scale=Scale(low=1, high=5)))
    item = read_plan(results).items[0].id
    with pytest.raises(ConfigError, match=r"row 1: value 6 is off the scale \(a whole number 1-5, or skip\)"):
        add_judgments(
            results, [{"item": item, "person": "ann", "value": 3}, {"item": item, "person": "bob", "value": 6}]
        )
    assert read_judgments(results).judgments == []
    assert add_judgments(results, [{"item": item, "person": "ann", "value": 3}]) == 1


def test_a_new_plan_that_drops_a_judged_item_is_refused(results: Path) -> None:
    plan = read_plan(results)
    add_judgments(results, [{"item": plan.items[-1].id, "person": "ann", "value": "A"}])
    with pytest.raises(ConfigError, match="leaves out 1 judged item"):
        write_plan(results, make_plan(results, seed=3, limit=2))
    assert read_plan(results) == plan
    write_plan(results, make_plan(results, seed=3))  # the same draw keeps every item
