"""The explorer (01_explore's logic), driven through its own callbacks."""

from __future__ import annotations

import asyncio
import html

import pytest
from factories import make_run

import promptlab as pl
from promptlab.errors import ConfigError
from promptlab.record import Task
from promptlab.ui.explorer import Explorer, load_explorer
from promptlab.ui.explorer_view import ended_in_error, side_by_side, trajectory_figure

TASKS = [
    Task(id="email", prompt="Write an email asking for an extension.", goal="polite and short"),
    Task(id="haiku", prompt="Write a poem about autumn.", goal="a haiku"),
]


def log_of(ex: Explorer) -> str:
    """The explorer's log as text (what its log box shows)."""
    text = "".join(ex.log_lines.lines)
    assert html.escape("".join(ex.log_lines.lines[-12:])) in ex.log.value  # the newest lines are in view
    return text


def test_the_log_box_follows_the_run() -> None:
    from promptlab.ui.explorer_view import log_html

    lines = [f"line {k}\n" for k in range(30)]
    box = log_html(lines)
    tail = box[box.index("promptlab-log-tail") :]
    assert "line 29" in tail and "line 18" in tail and "line 17" not in tail  # the newest 12 in view
    assert "the whole log (30 lines)" in box and "line 0\n" in box  # the rest one click away
    assert "whole log" not in log_html(lines[:5])


def test_a_click_fills_the_log_and_the_result_area() -> None:
    ex = Explorer(TASKS, model="fake/auto", max_iterations=2, task_id="haiku")

    async def click_and_wait() -> None:
        ex.clicked()  # what the Run button's handler does: a task on the running loop
        assert ex.task is not None and ex.run_w.disabled
        await ex.task

    asyncio.run(click_and_wait())
    log = log_of(ex)
    assert "[it1] phase generator" in log and "run_finished" in log and "model_call" not in log
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
    log = log_of(ex)
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
    log = log_of(ex)
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
    assert ex.result.outputs[0]["text"] == "(no chart: no iteration has a score)\n"


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


@pytest.mark.parametrize("loop", ["opro", "ape", "protegi", "resample", "gepa"])
def test_a_search_loop_runs_on_a_grounded_task_and_plots_its_dev_accuracy(loop: str) -> None:
    from wording import TASK

    ex = Explorer([TASK], loop=loop, model="fake/auto", max_iterations=1, budget_calls=150)
    assert ex.threshold_w.disabled and ex.min_criteria_w.disabled  # fields these loops do not have
    run = asyncio.run(ex.run())
    assert run is not None and run.loop == loop and run.iterations[0].grounded is not None
    assert run.config["budget_calls"] == 150 and run.spent is not None and run.spent.calls <= 150
    kinds = [next(iter(o.get("data", {"text": 1}))) for o in ex.result.outputs]
    assert kinds == ["image/png", "text", "text/html"]  # the dev accuracy by iteration: there is no critic score
    assert "done: stop reason" in ex.status.value and ex.error.value == ""


def test_a_search_loop_on_a_task_without_examples_says_why_under_the_button() -> None:
    ex = Explorer(TASKS, loop="opro", model="fake/auto", max_iterations=1)
    assert asyncio.run(ex.run()) is None
    assert "has no examples: opro scores every candidate on the dev split" in html.unescape(ex.error.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"finish_threshold": -1}, "finish_threshold: -1 is not allowed; give a number from 1.0 to 10.0"),
        ({"max_iterations": 0}, "max_iterations: 0 is not allowed; give a whole number from 1 to 10"),
        ({"min_criteria": 99}, "min_criteria: 99 is not allowed; give a whole number from 0 to 6"),
        ({"max_iterations": 2.5}, "max_iterations: 2.5 is not allowed; give a whole number from 1 to 10"),
        ({"task_id": "nope"}, "task_id: 'nope' is not one of the tasks: email, haiku"),
        ({"score_mode": "mean"}, "score_mode: 'mean' is not allowed; give one of expected, sampled"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_the_field_and_range(values: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Explorer(TASKS, model="fake/auto", **values)
    assert str(caught.value) == message  # never clamped into the slider's range


def test_a_missing_or_empty_task_file_names_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"^tasks_path: no task file .*nowhere.jsonl \(data/grounded_tasks"):
        load_explorer(tmp_path / "nowhere.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ConfigError, match=r"^tasks_path: .*empty.jsonl holds no task"):
        load_explorer(tmp_path / "empty.jsonl")


def test_stop_ends_the_run_as_interrupted_and_keeps_what_it_recorded() -> None:
    from wording import TASK

    ex = Explorer([TASK], loop="p3ro", model="fake/auto", max_iterations=5, finish_threshold=10.0)
    decisions: list[int] = []

    original = ex.on_event

    def stop_after_the_first_rewrite(event) -> str | None:  # type: ignore[no-untyped-def]
        if event.kind == "decision" and event.iteration == 1:
            decisions.append(event.iteration)
            ex.stop()  # what the Stop button does, while the loop runs
        return original(event)

    ex.on_event = stop_after_the_first_rewrite  # type: ignore[method-assign]
    run = asyncio.run(ex.run())
    assert decisions == [1]
    assert run is not None and run.stop_reason == "interrupted"
    assert [it.index for it in run.iterations] == [0, 1]  # what it recorded before the stop, nothing after
    assert run.iterations[1].candidate and run.iterations[1].grounded is not None
    assert "stopped" in ex.status.value and "interrupted" in ex.status.value and ex.stop_w.disabled
    # the cache is consistent: a run that is not stopped replays the stopped run's calls, then goes on
    again = asyncio.run(Explorer([TASK], loop="p3ro", model="fake/auto", max_iterations=2).run())
    assert again is not None and again.stop_reason != "interrupted"
    assert again.iterations[1].candidate == run.iterations[1].candidate
    hits = [s.call.cache_hit for it in again.iterations[:2] for s in it.steps if s.call]
    assert hits and all(hits)


def test_the_log_has_one_line_per_step_not_per_example() -> None:
    from wording import TASK

    ex = Explorer([TASK], loop="p3ro", model="fake/auto", max_iterations=1)
    run = asyncio.run(ex.run())
    assert run is not None
    log = log_of(ex)
    assert "model_call" not in log
    assert log.count("measuring the candidate on the dev examples") == len(run.iterations)  # not one per example
    assert log.count("measuring the candidate on the test examples") <= 2  # the starting and the final prompt


def test_a_local_critic_defaults_to_its_expected_score_and_a_note_says_what_it_is_for() -> None:
    ex = Explorer(TASKS, generator_model="local/smollm2", critic_model="local/smollm2")  # no call is made
    assert ex.score_mode_w.value == "expected" and ex.config()["score_mode"] == "expected"
    assert "check the plumbing" in ex.note.value
    ex.critic_w.value = "fake/auto"
    assert ex.score_mode_w.value == "sampled"
    ex.gen_w.value = "fake/auto"
    assert "plumbing" not in ex.note.value
    ex.critic_w.value = "local/smollm2"
    assert ex.score_mode_w.value == "expected"
    ex.loop_w.value = "pes"
    assert ex.score_mode_w.disabled and "score_mode" not in ex.config()


def test_a_search_loop_on_a_task_without_examples_is_pointed_to_the_grounded_tasks_before_a_run() -> None:
    ex = Explorer(TASKS, loop="opro", model="fake/auto")
    assert "data/grounded_tasks.jsonl" in ex.note.value and "has none" in ex.note.value
    ex.loop_w.value = "p3ro"
    assert "data/grounded_tasks.jsonl" not in ex.note.value


def test_the_chart_shows_the_critic_score_beside_the_dev_accuracy() -> None:
    import matplotlib.pyplot as plt
    from wording import TASK

    run = asyncio.run(Explorer([TASK], loop="p3ro", model="fake/auto", max_iterations=1).run())
    assert run is not None
    fig = trajectory_figure(run, {"loop": "p3ro"})
    try:
        assert [ax.get_title() for ax in fig.axes] == ["critic's score (1-10)", "dev accuracy (0-1)"]
        low, high = fig.axes[1].get_ylim()
        assert 0 <= low < high <= 1
    finally:
        plt.close(fig)


def test_labels_agree_for_opro_and_pes() -> None:
    from wording import TASK

    ex = Explorer([TASK], loop="opro", model="fake/auto", max_iterations=1)
    run = asyncio.run(ex.run())
    assert run is not None and len(run.iterations) > 2  # one step of several candidates
    summary = ex.result.outputs[1]["text"]
    assert "max iterations 1 counts opro's steps" in summary and "None" not in summary
    assert "best dev accuracy" in summary
    ex = Explorer([TASK], loop="pes", model="fake/auto", max_iterations=1)
    run = asyncio.run(ex.run())
    assert run is not None and run.best_score is not None
    assert ex.result.outputs[0].get("data", {}).get("image/png")  # a chart: the score the log and summary give
    assert f"best critic score {run.best_score:.3g}" in ex.result.outputs[1]["text"]


def test_kernel_interrupt_stops_a_clicked_run_like_the_stop_button() -> None:
    """Between cells ipykernel ignores SIGINT; during a run started by a click, Kernel > Interrupt (a SIGINT to
    the kernel) asks the run to stop before its next step, as Stop does, and the ignoring is back after it."""
    import os
    import signal

    from wording import TASK

    ex = Explorer([TASK], loop="p3ro", model="fake/auto", max_iterations=5, finish_threshold=10.0)
    original = ex.on_event

    def interrupt_after_the_first_rewrite(event) -> str | None:  # type: ignore[no-untyped-def]
        if event.kind == "decision" and event.iteration == 1:
            os.kill(os.getpid(), signal.SIGINT)  # what Kernel > Interrupt sends
        return original(event)

    ex.on_event = interrupt_after_the_first_rewrite  # type: ignore[method-assign]

    async def click_and_wait() -> None:
        ex.clicked()
        assert ex.task is not None
        await ex.task

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # an idle kernel's SIGINT handler
    try:
        asyncio.run(click_and_wait())
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    run = ex.last_run
    assert run is not None and run.stop_reason == "interrupted", run and run.stop_reason
    assert 2 <= len(run.iterations) <= 3  # stopped at the next turn of the event loop, long before the cap of 5
    assert "interrupted" in ex.status.value and ex.stop_w.disabled and not ex.run_w.disabled


def test_a_critic_score_that_moves_in_the_third_decimal_is_drawn_flat() -> None:
    """SmolLM2's expected score on the default run: 2.361, then 2.357 three times. An axis fitted to the values
    drew a steep fall; the axis spans at least one point of the 1-10 scale, inside it."""
    import matplotlib.pyplot as plt

    for scores in ([[2.361], [2.357], [2.357], [2.357]], [[1.0], [1.02]]):
        fig = trajectory_figure(make_run(scores), {"loop": "p3ro"})
        try:
            low, high = fig.axes[0].get_ylim()
            assert high - low >= 1.0 and 1.0 <= low and high <= 10.0, (low, high)
            assert low <= min(min(s) for s in scores) and max(max(s) for s in scores) <= high
        finally:
            plt.close(fig)
    fig = trajectory_figure(make_run([[2.0], [9.0]]), {"loop": "p3ro"})
    try:
        low, high = fig.axes[0].get_ylim()
        assert low <= 2.0 and 9.0 <= high and high - low < 9.5  # a wide move still fills the axis
    finally:
        plt.close(fig)


def test_the_default_run_caps_each_example_reply_and_says_what_the_embedded_model_shows() -> None:
    """The default run on local/smollm2 spent most of its time on 100 dev/test replies of up to 256 tokens;
    the explorer caps them at 64 (a label, a number, a date) for the loops that measure candidates, and the
    note says what the embedded model can and cannot show."""
    ex = Explorer(TASKS)  # the notebook's defaults; no call is made
    assert ex.config()["eval_max_tokens"] == 64
    assert "rewrites are usually worse" in ex.note.value and "stronger model" in ex.note.value
    assert Explorer(TASKS, eval_max_tokens=200).config()["eval_max_tokens"] == 200
    ex.loop_w.value = "pes"  # measures no candidate on examples: no such field
    assert "eval_max_tokens" not in ex.config()
    with pytest.raises(ConfigError, match="eval_max_tokens: 0 is not allowed"):
        Explorer(TASKS, eval_max_tokens=0)


def test_the_summary_says_when_the_loop_kept_the_starting_prompt() -> None:
    from promptlab.ui.explorer_view import run_summary

    run = make_run([[2.4], [2.3]])
    kept = run.model_copy(update={"final_output": run.task.prompt})
    assert "the final prompt is the starting prompt (the loop kept no rewrite)" in run_summary(kept, {})
    assert "starting prompt" not in run_summary(run.model_copy(update={"final_output": "a rewrite"}), {})


def test_the_summary_says_when_the_final_prompt_measures_below_the_start() -> None:
    """On the batched engine the default run's critic scored a rewrite that dropped {input} higher (2.34
    against 1.57) while its dev accuracy fell from 0.30 to 0.05; P³RO returned it. The summary says so."""
    from promptlab.record import GroundedScore
    from promptlab.ui.explorer_view import run_summary

    run = make_run([[1.57], [2.34]])
    grounded = [GroundedScore(split="dev", score=s, n=20) for s in (0.30, 0.05)]
    its = [it.model_copy(update={"grounded": g}) for it, g in zip(run.iterations, grounded, strict=True)]
    its[0] = its[0].model_copy(update={"index": 0, "candidate": run.task.prompt})  # the starting prompt
    worse = run.model_copy(update={"iterations": its, "final_output": its[1].candidate})
    assert "the final prompt's dev accuracy 0.05 is below the starting prompt's 0.3" in run_summary(worse, {})
    kept = worse.model_copy(update={"final_output": its[0].candidate})
    assert "below the starting prompt" not in run_summary(kept, {})


def test_stop_cancels_the_call_in_flight_keeps_the_record_and_offers_the_test_measurement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call that would take a minute: Stop ends the run without waiting for it (the run's task is cancelled),
    the iterations recorded before it are kept, the test measurement is skipped and offered by a button."""
    import threading
    import time

    from wording import TASK

    import promptlab.llm.providers.scripted as fake

    auto_reply, started, release = fake.reply, threading.Event(), threading.Event()
    hang = {"on": False}

    def hanging_reply(id, messages, params):  # type: ignore[no-untyped-def]
        if id == "hang" and hang["on"]:
            started.set()
            release.wait(60)  # a call that takes a minute, unless released
        return auto_reply("auto" if id == "hang" else id, messages, params)

    pl.scripted("hang", respond=lambda messages: "")
    monkeypatch.setattr(fake, "reply", hanging_reply)
    ex = Explorer([TASK], loop="p3ro", model="fake/hang", max_iterations=5, finish_threshold=10.0)
    original = ex.on_event

    def hang_after_the_first_rewrite(event) -> str | None:  # type: ignore[no-untyped-def]
        if event.kind == "decision" and event.iteration == 1:
            hang["on"] = True  # every later call hangs
        return original(event)

    ex.on_event = hang_after_the_first_rewrite  # type: ignore[method-assign]

    async def click_stop_and_measure() -> tuple[float, str]:
        ex.clicked()
        while not started.is_set():
            await asyncio.sleep(0.01)
        assert ex.measure_w.layout.display == "none"  # hidden while the run runs
        ex.stop()
        assert ex.task is not None
        await ex.task
        stopped = time.monotonic()
        assert not ex.run_w.disabled  # a second run can start at once
        status = ex.status.value
        assert ex.measure_w.layout.display == ""  # offered once the run stopped
        hang["on"] = False
        release.set()
        await ex.measure()
        return stopped, status

    try:
        t0 = time.monotonic()
        stopped, status = asyncio.run(click_stop_and_measure())
    finally:
        release.set()
    assert stopped - t0 < 60  # the hanging call was not waited for (it would have taken 60 s)
    run = ex.last_run
    assert run is not None and run.stop_reason == "interrupted" and run.info["stopped_at_once"]
    assert [it.index for it in run.iterations][:2] == [0, 1] and run.iterations[1].grounded is not None
    assert run.final_output is not None
    assert "not measured on test" in status
    # the button measured the stopped run's best prompt and its starting prompt on the test examples
    assert run.final_test is not None and run.baseline_test is not None and run.delta is not None
    assert "test accuracy" in ex.result.outputs[1]["text"] and "not measured on test" not in ex.status.value
    assert ex.measure_w.layout.display == "none"  # measured: nothing more to offer


def test_the_log_prints_rounded_averages() -> None:
    """01's log says "average 5.67", not "average 5.666666666666667"."""
    import re

    from wording import TASK

    ex = Explorer([TASK], loop="p3ro", model="fake/auto", max_iterations=2, finish_threshold=10.0)
    asyncio.run(ex.run())
    averages = re.findall(r"score: average (\S+)", log_of(ex))
    assert averages and all(len(a.replace(".", "").lstrip("0")) <= 3 for a in averages), averages


def test_the_summary_reads_the_critic_by_the_rule_of_notebook_04_and_the_report() -> None:
    """01's summary line says whether the critic's score tracked the dev accuracy in the words of 04's
    calibration table (the same function: `calibration_verdict`), for the same candidates."""
    from wording import TASK

    from promptlab.analysis.critic import ALL, calibration
    from promptlab.reports.findings import with_findings
    from promptlab.results.frames import tidy

    ex = Explorer([TASK], loop="p3ro", generator_model="fake/auto", critic_model="sim/oracle", max_iterations=4)
    run = asyncio.run(ex.run())
    assert run is not None
    table = with_findings(calibration(tidy([run], ex.params, "explore")[0]))
    finding = str(table[table["criterion"] == ALL]["finding"].iloc[0])
    assert f"critic score against dev accuracy: {finding}" in ex.result.outputs[1]["text"]
