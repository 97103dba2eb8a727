"""The explorer (01_explore's logic), driven through its own callbacks."""

from __future__ import annotations

import asyncio
import html

import pytest
from factories import make_run

import promptlab as pl
from promptlab.record import Task
from promptlab.ui.explorer import Explorer, ended_in_error, side_by_side, trajectory_figure

TASKS = [
    Task(id="email", prompt="Write an email asking for an extension.", goal="polite and short"),
    Task(id="haiku", prompt="Write a poem about autumn.", goal="a haiku"),
]


def test_a_click_fills_the_log_and_the_result_area() -> None:
    ex = Explorer(TASKS, model="fake/auto", max_iterations=2, task_id="haiku")

    async def click_and_wait() -> None:
        ex.clicked()  # what the Run button's handler does: a task on the running loop
        assert ex.task is not None and ex.run_w.disabled
        await ex.task

    asyncio.run(click_and_wait())
    log = "".join(o["text"] for o in ex.log.outputs)
    assert "[it1] model_call generator" in log and "run_finished" in log
    kinds = [next(iter(o.get("data", {"text": 1}))) for o in ex.result.outputs]
    assert kinds == ["image/png", "text", "text/html"]
    html = ex.result.outputs[2]["data"]["text/html"]
    assert "<b>original</b>" in html and "Write a poem about autumn." in html and "<b>final</b>" in html
    assert "text-align:left" in html
    assert "stop reason" in ex.status.value and not ex.run_w.disabled
    assert ex.last_run is not None and ex.last_run.task.id == "haiku" and len(ex.last_run.iterations) == 2


def test_a_failing_run_shows_its_error_once_under_the_button() -> None:
    ex = Explorer(TASKS, generator_model="fake/nobody-scripted-this", critic_model="fake/auto", max_iterations=1)
    run = asyncio.run(ex.run())
    log = "".join(o["text"] for o in ex.log.outputs)
    assert run is None and "Unknown model" not in log  # not in the log: once, in the error area
    assert "generator_model: 'fake/nobody-scripted-this': Value error, Unknown model" in html.unescape(ex.error.value)
    assert ex.error.value.count("Unknown model") == 1 and "promptlab-error" in ex.error.value
    assert "failed" in ex.status.value and "Unknown model" not in ex.status.value  # the status line stays short
    assert not ex.run_w.disabled and ex.result.outputs == ()
    assert ex.run_w.layout.flex == "0 0 auto"  # the button never shrinks beside a long status
    ex.loop_w.value = "pcee"
    assert ex.threshold_w.disabled and "finish_threshold" not in ex.config()
    with pytest.raises(ValueError, match="at least one task"):
        Explorer([])


def test_each_run_starts_with_an_empty_log_and_no_old_error() -> None:
    ex = Explorer(TASKS, generator_model="fake/nobody-scripted-this", critic_model="fake/auto", max_iterations=1)
    asyncio.run(ex.run())
    assert ex.error.value
    ex.gen_w.value = "fake/auto"
    for _ in range(2):
        asyncio.run(ex.run())
    log = "".join(o["text"] for o in ex.log.outputs)
    assert log.count("run_started") == 1 and log.count("run_finished") == 1
    assert ex.error.value == "" and "done: stop reason" in ex.status.value


def test_a_run_that_ends_in_error_is_marked_as_one() -> None:
    pl.scripted("explore-broken", ["not json"] * 50)
    ex = Explorer(TASKS, model="fake/explore-broken", max_iterations=1)
    run = asyncio.run(ex.run())
    assert run is not None and run.stop_reason == "error" and ended_in_error(run)
    assert "ended in error" in ex.status.value and "done" not in ex.status.value and "#b00" in ex.status.value
    assert "decomposer (plan): ParseError: fake/explore-broken gave no valid DecomposedGoal" in html.unescape(
        ex.error.value
    )
    assert ex.result.outputs[0]["text"] == "(no plot: no iteration has a score)\n"


def test_the_one_iteration_plot_has_whole_number_ticks() -> None:
    import matplotlib.pyplot as plt

    run = make_run([[6.0, 7.0]])
    fig = trajectory_figure(run, {"loop": "p3ro"})
    try:
        ticks = [t for t in fig.axes[0].get_xticks() if fig.axes[0].get_xlim()[0] <= t <= fig.axes[0].get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(fig)


def test_min_criteria_is_a_p3ro_control() -> None:
    ex = Explorer(TASKS, model="fake/auto", max_iterations=1, min_criteria=2)
    assert not ex.min_criteria_w.disabled and ex.config()["min_criteria"] == 2
    run = asyncio.run(ex.run())
    assert run is not None and run.config["min_criteria"] == 2
    ex.loop_w.value = "creator_critic"
    assert ex.min_criteria_w.disabled and "min_criteria" not in ex.config()
    assert Explorer(TASKS, loop="pes").min_criteria_w.value == 3  # P³RO's default when not given


def test_side_by_side_escapes_and_left_aligns() -> None:
    html = side_by_side("<b>x</b>", None)
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "(none)" in html and html.count("text-align:left") >= 3


@pytest.mark.parametrize("loop", ["opro", "ape", "protegi", "resample"])
def test_a_search_loop_runs_on_a_grounded_task_and_plots_its_dev_accuracy(loop: str) -> None:
    from wording import TASK

    ex = Explorer([TASK], loop=loop, model="fake/auto", max_iterations=1, budget_calls=150)
    assert ex.threshold_w.disabled and ex.min_criteria_w.disabled  # fields these loops do not have
    run = asyncio.run(ex.run())
    assert run is not None and run.loop == loop and run.iterations[0].grounded is not None
    assert run.config["budget_calls"] == 150 and run.spent.calls <= 150
    kinds = [next(iter(o.get("data", {"text": 1}))) for o in ex.result.outputs]
    assert kinds == ["image/png", "text", "text/html"]  # the dev accuracy by iteration: there is no critic score
    assert "done: stop reason" in ex.status.value and ex.error.value == ""


def test_a_search_loop_on_a_task_without_examples_says_why_under_the_button() -> None:
    ex = Explorer(TASKS, loop="opro", model="fake/auto", max_iterations=1)
    assert asyncio.run(ex.run()) is None
    assert "has no examples: opro scores every candidate on the dev split" in html.unescape(ex.error.value)
