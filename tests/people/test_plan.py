"""The judging plan: drawn with a seed from what runs record, stratified over critics and pairings, about one slot
in ten an unannounced repeat; and the loops' `record_outputs`, which records what open-ended runs are judged on."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from judging import CRITICS, write_open_ended_sweep

import promptlab as pl
from promptlab.people import make_plan
from promptlab.people.items import Item
from promptlab.people.plan import REPEAT_GAP, slots_with_repeats, stratified
from promptlab.results.store import read_runs


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_open_ended_sweep(tmp_path_factory.mktemp("plan") / "results")


def test_record_outputs_keeps_both_prompts_replies_outside_the_budget() -> None:
    task = {"id": "t", "prompt": "Write a poem.", "goal": "a haiku"}
    run = pl.run_creator_critic(task, {"max_iterations": 1, "model": "fake/auto", "record_outputs": True})
    outputs = [s for s in run.final if s.phase == "output"]
    assert [s.output["prompt"] for s in outputs] == ["start", "returned"]
    assert outputs[0].output["text"].endswith("Write a poem.") and all(s.role == "target" for s in outputs)
    assert run.spent is not None and run.spent.calls == run.totals.calls - 2  # not counted against the budget
    plain = pl.run_creator_critic(task, {"max_iterations": 1, "model": "fake/auto"})
    assert [s for s in plain.final if s.phase == "output"] == []  # off by default


def test_pairs_are_the_recorded_replies_with_the_critics_scores(results: Path) -> None:
    plan = make_plan(results, seed=0)
    runs = {r.run_id: r for cell in {i.cell_id for i in plan.items} for r in read_runs(results, cell)}
    assert len(plan.items) == 24 and plan.left_out == {}
    for item in plan.items:
        run = runs[item.run_id]
        replies = {s.output["prompt"]: s.output["text"] for s in run.final if s.phase == "output"}
        assert item.texts == replies and item.what == "outputs" and item.input == run.task.goal
        assert item.critic_scores["start"] == run.iterations[0].average
        assert sorted(item.order) == ["returned", "start"]
    assert make_plan(results, seed=0) == plan and make_plan(results, seed=1) != plan


def test_the_first_slots_cover_every_critic_and_pairing_and_one_in_ten_is_a_repeat(results: Path) -> None:
    plan = make_plan(results, seed=5)
    items = plan.by_id()
    first = {items[s.item].critic for s in plan.slots[:2]}
    assert first == set(CRITICS)
    repeats = [s for s in plan.slots if s.repeat]
    assert len(repeats) == len(plan.slots) // 10 == 2
    for r in repeats:
        earlier = next(s for s in plan.slots if s.item == r.item and not s.repeat)
        assert r.position - earlier.position >= REPEAT_GAP


def _items(strata: int, per: int) -> list[Item]:
    return [
        Item(
            id=f"{s}-{k}",
            kind="pair",
            what="prompts",
            cell_id="c",
            run_id=f"{s}-{k}",
            task_id="t",
            loop="l",
            critic=f"critic{s % 3}",
            pairing=f"g{s} / critic{s % 3}",
            input="",
            texts={"start": "a", "returned": "b"},
            order=["start", "returned"],
        )
        for s in range(strata)
        for k in range(per)
    ]


def test_forty_slots_cover_thirty_six_strata() -> None:
    ordered = stratified(_items(36, 5), random.Random(0))
    slots = slots_with_repeats(ordered, random.Random(0), 10)
    by_id = {i.id: i for i in ordered}
    first40 = [by_id[s.item] for s in slots[:40]]
    assert len({(i.critic, i.pairing) for i in first40}) == 36
    assert Counter(s.repeat for s in slots)[True] == len(slots) // 10
    assert len(slots_with_repeats(ordered, random.Random(0), 0)) == len(ordered)  # no repeats asked
