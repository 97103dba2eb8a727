"""The explorer (01_explore's logic) and the run browser, driven through their own callbacks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from factories import make_run, write_sweep

from promptlab.record import GroundedScore, Task
from promptlab.ui.browser import RunBrowser, candidate_diff, iteration_html
from promptlab.ui.explorer import Explorer, side_by_side

TASKS = [Task(id="email", prompt="Write an email asking for an extension.", goal="polite and short"),
         Task(id="haiku", prompt="Write a poem about autumn.", goal="a haiku")]


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


def test_a_failing_run_says_why_in_the_log_and_the_status() -> None:
    ex = Explorer(TASKS, generator_model="fake/nobody-scripted-this", critic_model="fake/auto", max_iterations=1)
    run = asyncio.run(ex.run())
    log = "".join(o["text"] for o in ex.log.outputs)
    assert run is None and "ERROR ValidationError" in log and "Unknown model 'fake/nobody-scripted-this'" in log
    assert "failed: ValidationError" in ex.status.value
    assert not ex.run_w.disabled and ex.result.outputs == ()
    ex.loop_w.value = "pcee"
    assert ex.threshold_w.disabled and "finish_threshold" not in ex.config()
    with pytest.raises(ValueError, match="at least one task"):
        Explorer([])


def test_side_by_side_escapes_and_left_aligns() -> None:
    html = side_by_side("<b>x</b>", None)
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "(none)" in html and html.count("text-align:left") >= 3


def test_candidate_diff_marks_removed_and_added_words() -> None:
    html = candidate_diff("write a short poem", "write a long poem now")
    assert "<del class='pl-removed' style='background:#fdd'>short</del>" in html
    assert "<ins class='pl-added' style='background:#dfd'>long</ins>" in html and "now</ins>" in html
    assert candidate_diff(None, "all new").count("pl-added") == 1


def test_iteration_html_shows_what_the_loop_did() -> None:
    run = make_run([[6.0, 7.0], [8.0, None]])
    run.iterations[1].reason, run.iterations[1].reflection = "average rose", "be concrete"
    run.iterations[1].grounded = GroundedScore(split="dev", score=0.75, n=20, ci_low=0.53, ci_high=0.89)
    html = iteration_html(run, 2)
    assert "Iteration 2 of 2" in html and "average rose" in html and "be concrete" in html
    assert "0.75 on dev (n=20, 95% CI 0.53–0.89" in html
    assert "<del class='pl-removed' style='background:#fdd'>1</del>" in html  # "candidate 1" -> "candidate 2"
    assert "<td>clarity</td><td>8</td>" in html and "<td>tone</td><td>–</td>" in html
    assert "30 tokens, cost 0.002 USD" in html  # two calls of 10 + 5 tokens at 0.001
    with pytest.raises(ValueError, match="iteration 3 is not in 1..2"):
        iteration_html(run, 3)


def test_iteration_html_shows_candidate_0() -> None:
    """A run that scored its starting prompt as candidate 0: iteration 0 is the start (no change against it),
    the rewrites are numbered 1.. of theirs."""
    run = make_run([[4.0], [6.0]])
    run.iterations[0].index, run.iterations[1].index = 0, 1
    run.iterations[0].candidate = run.task.prompt
    zero = iteration_html(run, 0)
    assert "Iteration 0: the starting prompt (candidate 0)" in zero and "pl-added" not in zero
    assert "Iteration 1 of 1" in iteration_html(run, 1)
    with pytest.raises(ValueError, match="iteration 2 is not in 0..1"):
        iteration_html(run, 2)


def test_the_run_browser_steps_through_iterations(tmp_path: Path) -> None:
    b = RunBrowser(write_sweep(tmp_path / "results"))
    assert [v for _, v in b.cell_w.options] == ["a", "b"]  # the failed cell is not offered
    assert b.run is not None and b.position.value == "iteration 1 of 2" and b.prev_w.disabled
    b.next_w.click()
    assert b.position.value == "iteration 2 of 2" and b.next_w.disabled and "Iteration 2 of 2" in b.view.value
    b.prev_w.click()
    assert b.index == 1
    b.run_w.value = 1
    assert b.position.value == "iteration 1 of 3"
    b.cell_w.value = "b"
    assert len(b.runs) == 4 and "cached" in b.view.value and "<td>yes</td>" in b.view.value
