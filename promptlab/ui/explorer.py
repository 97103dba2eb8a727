"""The explorer behind notebooks/01_explore: pick a loop, a task and the models, press Run, watch the live
event log, then see the score trajectory (the critic's score beside the dev accuracy) and the final prompt
beside the original. What it shows is made by `promptlab.ui.explorer_view`.

The initial values are checked before anything is shown: a value outside a control's range, an unknown task id
or loop, a missing or empty task file is a ConfigError naming the field and what it allows (never a silent
clamp). A local critic scores with its expected (G-Eval) score unless `score_mode` says otherwise. **Stop**
ends the run at once: it cancels the run's task, so the call in flight is abandoned, and the run closes with stop
reason `interrupted`, keeping what it recorded, its best iteration so far as its output, and none of the phases
after the loop (`promptlab.loops.runtime.define.until_stopped`: no polish, no test-split measurement). A stopped
run's best prompt is measured on the test examples by a click on **Measure best prompt on test**
(`promptlab.loops.runtime.grounding.measure_stopped`). Kernel ▸ Interrupt during a run does the same as Stop
(`promptlab.ui.sigint`), also for a run started by a click.

Each run starts with an empty log. An error is shown once, in the error area under the Run button (full text,
wrapped); the status line beside the button stays short, and marks a run that ended in error (stop reason
`error` or `*_error`, or an infrastructure failure) in red, never as done.

Everything it shows is set on its widgets explicitly (a `with output:` block inside a task a button started
loses what it prints), so the same code works from a click, from `await explorer.run()` and under papermill.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..events import Event
from ..loops.runtime.interrupt import stop_scope
from ..record import Run, Task
from .explorer_fields import check_initial, default_score_mode, loop_config, run_buttons, setting_controls
from .explorer_view import (
    MODELS,
    LogLines,
    errors_html,
    failed_html,
    log_html,
    measurable,
    notes_html,
    result_outputs,
    status_html,
)
from .sigint import sigint_calls

STYLE = {"description_width": "110px"}
"""The controls' label width."""


class Explorer:
    """The explorer's widgets and its run logic.

    Args:
        tasks: the tasks to choose from (see `promptlab.eval.tasks.read_tasks`).
        loop, task_id, generator_model, critic_model, finish_threshold, max_iterations, max_tokens: initial
            values of the controls (checked: see RANGES).
        eval_max_tokens: the cap on each reply when a candidate runs on a dev or test example; 64 holds a
            label, a number or a date (the loops' default, 256, takes about twice as long on the embedded model).
        min_criteria: P³RO's fewest criteria (0: P³RO's default); greyed out for the other loops.
        budget_calls: the run's `budget_calls` (0: none), e.g. to bound a search loop (APE's 250 proposals).
        model: if set, it plays every role (e.g. "fake/auto" for a dry run).
        score_mode: how a critic scores, "expected" or "sampled" ("": expected for a local critic, else sampled);
            greyed out for loops without critics.

    Raises:
        ConfigError: no task, an unknown loop or task id, or a value outside its control's range.
    """

    def __init__(
        self,
        tasks: list[Task],
        *,
        loop: str = "p3ro",
        task_id: str = "",
        model: str = "",
        generator_model: str = "local/smollm2",
        critic_model: str = "local/smollm2",
        finish_threshold: float = 8.5,
        max_iterations: int = 3,
        max_tokens: int = 256,
        eval_max_tokens: int = 64,
        min_criteria: int = 0,
        budget_calls: int = 0,
        score_mode: str = "",
    ) -> None:
        from ..loops.registry import get_loop

        get_loop(loop)  # imports the built-in loops (and fails early on an unknown name)
        check_initial(
            tasks,
            task_id,
            score_mode,
            finish_threshold=finish_threshold,
            max_iterations=max_iterations,
            min_criteria=min_criteria,
            max_tokens=max_tokens,
            eval_max_tokens=eval_max_tokens,
            budget_calls=budget_calls,
        )
        self.tasks = {t.id: t for t in tasks}
        self.model, self.max_tokens, self.eval_max_tokens = model, max_tokens, eval_max_tokens
        self._controls(loop, task_id or tasks[0].id, model or generator_model, model or critic_model)
        self._settings(finish_threshold, max_iterations, min_criteria, budget_calls, score_mode)
        self._run_state()
        self._wire()
        self.widget = self._layout()

    def _controls(self, loop: str, task_id: str, generator: str, critic: str) -> None:
        """The loop, task and model controls."""
        import ipywidgets as w

        from ..loops.runtime.define import LOOPS

        self.loop_w = w.Dropdown(options=sorted(LOOPS), value=loop, description="loop", style=STYLE)
        self.task_w = w.Dropdown(options=list(self.tasks), value=task_id, description="task", style=STYLE)
        self.gen_w = w.Combobox(
            options=MODELS, value=generator, description="generator", style=STYLE, ensure_option=False
        )
        self.critic_w = w.Combobox(options=MODELS, value=critic, description="critic", style=STYLE, ensure_option=False)

    def _settings(
        self, finish_threshold: float, max_iterations: int, min_criteria: int, budget_calls: int, score_mode: str
    ) -> None:
        """The controls of the loop's settings (`explorer_fields.setting_controls`) and the buttons and areas."""
        import ipywidgets as w

        mode = score_mode or default_score_mode(self.critic_w.value)
        made = setting_controls(finish_threshold, max_iterations, min_criteria, budget_calls, mode, STYLE)
        self.threshold_w, self.cap_w, self.min_criteria_w, self.budget_w, self.score_mode_w = made
        self.loop_fields = {
            "finish_threshold": self.threshold_w,
            "min_criteria": self.min_criteria_w,
            "score_mode": self.score_mode_w,
        }
        """Controls of config fields that only some loops have (greyed out for the others)."""
        self.run_w, self.stop_w, self.measure_w = run_buttons()
        # the status beside the buttons takes the rest of the row and wraps
        self.status = w.HTML("", layout={"flex": "1 1 0%", "min_width": "0", "margin": "0 0 0 12px"})
        self.note = w.HTML("", layout={"width": "auto"})
        self.error = w.HTML("", layout={"width": "auto"})
        self.log_lines = LogLines()
        self.log = w.HTML(log_html([]), layout={"width": "auto"})
        self.result = w.Output()

    def _run_state(self) -> None:
        """What a run keeps between clicks: the last run, its params, its tasks and the stop flag."""
        self.last_run: Run | None = None
        self.params: dict[str, Any] = {}
        self.task: asyncio.Task[Run | None] | None = None
        self.work: asyncio.Task[Any] | None = None
        """The run's (or the test measurement's) own task, which Stop cancels."""
        self.stop_flag = threading.Event()

    def _wire(self) -> None:
        """The controls' observers and the buttons' handlers."""
        self.loop_w.observe(lambda _change: self.sync_controls(), names="value")
        self.task_w.observe(lambda _change: self.sync_controls(), names="value")
        for model_w in (self.gen_w, self.critic_w):
            model_w.observe(lambda _change: self.sync_controls(), names="value")
        self.critic_w.observe(self.critic_changed, names="value")
        self.sync_controls()
        self.run_w.on_click(self.clicked)
        self.stop_w.on_click(self.stop)
        self.measure_w.on_click(self.measure_clicked)

    def _layout(self) -> Any:
        """The explorer's widget: the controls in rows, the buttons, the error, the log and the result."""
        import ipywidgets as w

        return w.VBox(
            [
                w.HBox([self.loop_w, self.task_w]),
                w.HBox([self.gen_w, self.critic_w]),
                w.HBox([self.threshold_w, self.cap_w]),
                w.HBox([self.min_criteria_w, self.budget_w]),
                w.HBox([self.score_mode_w]),
                self.note,
                w.HBox(
                    [self.run_w, self.stop_w, self.measure_w, self.status],
                    layout={"width": "100%", "align_items": "center"},
                ),
                self.error,
                self.log,
                self.result,
            ]
        )

    def sync_controls(self) -> None:
        """Grey out the controls of fields the chosen loop lacks (no finish threshold in pes and pcee, min
        criteria only in p3ro, a critic score only where critics score), and say what needs saying before a
        run: that the embedded model checks plumbing, that a search loop needs a task with examples."""
        from ..loops.registry import get_loop

        spec = get_loop(self.loop_w.value)
        fields = spec.config_cls.model_fields
        for name, widget in self.loop_fields.items():
            widget.disabled = name not in fields
        task = self.tasks[self.task_w.value]
        self.note.value = notes_html(spec, task, [self.gen_w.value, self.critic_w.value])

    def critic_changed(self, change: dict[str, Any]) -> None:
        """A new critic model takes its default score mode (expected for a local critic)."""
        self.score_mode_w.value = default_score_mode(str(change["new"]))

    def config(self) -> dict[str, Any]:
        """The loop config the controls describe (`loop_config`)."""
        values = {"generator_model": self.gen_w.value, "critic_model": self.critic_w.value}
        values |= {"max_iterations": self.cap_w.value, "max_tokens": self.max_tokens, "model": self.model}
        values |= {"budget_calls": self.budget_w.value, "eval_max_tokens": self.eval_max_tokens}
        return loop_config(self.loop_w.value, values | {n: w.value for n, w in self.loop_fields.items()})

    def write(self, text: str) -> None:
        """Append a line to the event log."""
        self.log_lines.lines.append(text)
        self.log.value = log_html(self.log_lines.lines)

    def on_event(self, event: Event) -> str | None:
        """The run's event handler: one log line per step (see `LogLines`); returns the line."""
        line = self.log_lines.add(event)
        if line:
            self.log.value = log_html(self.log_lines.lines)
        return line

    def stop(self, _button: Any = None) -> None:
        """The Stop button (and Kernel ▸ Interrupt): end the run now, cancelling the call in flight."""
        self.stop_flag.set()
        self.stop_w.disabled = True
        if self.work is not None and not self.work.done():
            # thread-safe: a widget callback may run outside the loop's thread (ipykernel 7), and a bare
            # cancel() there would wait for the loop to wake up, i.e. for the call in flight to end
            self.work.get_loop().call_soon_threadsafe(self.work.cancel)
        self.status.value = "<i>stopping: the call in flight is cancelled...</i>"

    async def run(self, *, echo: Callable[[str], None] | None = None) -> Run | None:
        """Run the loop with the controls' values; show the log, the result and any error in the widgets.
        `echo` also receives every log line (papermill: a saved notebook keeps no widget state). Stop, or Kernel ▸
        Interrupt, ends the run at once, with stop reason `interrupted` (`until_stopped`)."""
        from ..loops.registry import arun_loop

        # set, not cleared through `clear_output()`: that message is lost when sent from a task a click started
        self.log_lines = LogLines()
        self.log.value = log_html([])
        self.result.outputs = ()
        self.error.value = ""
        self.last_run = None
        self.start_work()
        self.status.value = "<i>running...</i>"

        def handler(event: Event) -> None:
            line = self.on_event(event)
            if echo is not None and line:
                echo(line)

        try:
            config = self.config()
            with stop_scope(self.stop_flag), sigint_calls(self.stop):  # Kernel > Interrupt: as Stop
                run = await self.until_done(
                    arun_loop(self.loop_w.value, self.tasks[self.task_w.value], config, on_event=handler)
                )
            if run is None:  # a loop that keeps no record of an unfinished step (PES opens one per turn)
                self.status.value = (
                    "<span class='promptlab-stopped'><b>stopped</b> before the run recorded anything</span>"
                )
                return None
            self.params = {"loop": run.loop, **{k: v for k, v in config.items() if not k.endswith("max_tokens")}}
            self.last_run = run
            self.show(run)
            return run
        except Exception as e:  # shown where the user looks, not swallowed by the task
            self.failed(e, echo)
            return None
        finally:
            self.end_work()

    def start_work(self) -> None:
        """Grey out Run (and Measure), arm Stop."""
        self.run_w.disabled = True
        self.measure_w.layout.display = "none"
        self.stop_flag.clear()
        self.stop_w.disabled = False

    def end_work(self) -> None:
        """Run back, Stop greyed out; Measure offered for a stopped run whose test measurement was skipped."""
        self.work = None
        self.run_w.disabled = False
        self.stop_w.disabled = True
        self.measure_w.disabled = False
        self.measure_w.layout.display = "" if measurable(self.last_run) else "none"

    async def until_done(self, work: Coroutine[Any, Any, Run]) -> Run | None:
        """`work` as its own task (which Stop cancels); None when a Stop cancelled it before it kept a record."""
        self.work = asyncio.ensure_future(work)
        try:
            return await self.work
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self.stop_flag.is_set() or (current is not None and current.cancelling()):
                raise  # not our Stop: the explorer's own task is being cancelled
            return None

    def show(self, run: Run) -> None:
        """The result area, status and recorded errors of a finished (or stopped) run."""
        self.result.outputs = tuple(result_outputs(run, self.params))
        self.status.value = status_html(run)
        self.error.value = errors_html(run)

    def failed(self, e: Exception, echo: Callable[[str], None] | None = None) -> None:
        """Show an error that stopped a run (or a measurement) under the buttons."""
        self.status.value, self.error.value = failed_html(e)
        if echo is not None:
            echo(f"ERROR {type(e).__name__}: {e}\n")

    async def measure(self) -> Run | None:
        """Measure the stopped run's best prompt (and its starting prompt) on the test examples; Stop cancels."""
        from ..loops.registry import get_loop
        from ..loops.runtime.grounding import GroundedConfig, measure_stopped

        run = self.last_run
        if run is None or not measurable(run):
            return None
        self.start_work()
        self.status.value = "<i>measuring the best prompt on the test examples...</i>"
        try:
            cfg = get_loop(run.loop).config_cls.model_validate(run.config)
            assert isinstance(cfg, GroundedConfig)  # can_measure checked the class
            with sigint_calls(self.stop):
                measured = await self.until_done(measure_stopped(run, cfg))
            if measured is None:  # stopped: a half-done measurement is no measurement
                run.baseline_test = run.final_test = run.delta = None
            self.show(run)
            return measured
        except Exception as e:  # shown where the user looks, not swallowed by the task
            self.failed(e)
            return None
        finally:
            self.end_work()

    def measure_clicked(self, _button: Any = None) -> None:
        """The Measure button: measure the stopped run's best prompt on test, not blocking the kernel."""
        self.measure_w.disabled = True
        self.task = asyncio.ensure_future(self.measure())

    def clicked(self, _button: Any = None) -> None:
        """The Run button: start a run on the kernel's event loop, not blocking it (greyed out at once: a
        second click must not start a second run)."""
        self.run_w.disabled = True
        self.task = asyncio.ensure_future(self.run())

    def display(self) -> None:
        """Show the controls, the log and the result area."""
        from IPython.display import display

        display(self.widget)


def load_explorer(tasks_path: str | Path, **kwargs: Any) -> Explorer:
    """An Explorer over the tasks of a JSONL task file; a missing or empty file is a ConfigError naming it."""
    from ..eval.tasks import read_tasks

    path = Path(tasks_path)
    if not path.is_file():
        raise ConfigError(f"tasks_path: no task file {path} (data/grounded_tasks.jsonl holds tasks with examples)")
    tasks = read_tasks(path)
    if not tasks:
        raise ConfigError(f"tasks_path: {path} holds no task (one JSON object per line)")
    return Explorer(tasks, **kwargs)


__all__ = ["Explorer", "load_explorer"]
