"""The explorer behind notebooks/01_explore: pick a loop, a task and the models, press Run, watch the live
event log, then see the score trajectory (the critic's score beside the dev accuracy) and the final prompt
beside the original. What it shows is made by `promptlab.ui.explorer_view`.

The initial values are checked before anything is shown: a value outside a control's range, an unknown task id
or loop, a missing or empty task file is a ConfigError naming the field and what it allows (never a silent
clamp). A local critic scores with its expected (G-Eval) score unless `score_mode` says otherwise. **Stop**
asks the run to stop before its next step (`promptlab.loops.runtime.interrupt`): it ends with stop reason
`interrupted`, keeping what it recorded; no call is cut off, so the call cache stays consistent. Kernel ▸
Interrupt during a run does the same as Stop (`promptlab.ui.sigint`), also for a run started by a click.

Each run starts with an empty log. An error is shown once, in the error area under the Run button (full text,
wrapped); the status line beside the button stays short, and marks a run that ended in error (stop reason
`error` or `*_error`, or an infrastructure failure) in red, never as done.

Everything it shows is written to its `Output` widgets explicitly (`append_stdout`, and `outputs` set to the
rich display data of a figure and an HTML table): a `with output:` block inside a task started by a button
loses what it prints, because the task runs after the button's callback has returned. The same code therefore
works from a click, from `await explorer.run()` in a cell, and under papermill (`autorun`).
"""

from __future__ import annotations

import asyncio
import html
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..events import Event
from ..llm.resolved import resolve_model
from ..loops.runtime.interrupt import stop_scope
from ..record import Run, Task
from .explorer_view import (
    MODELS,
    PLUMBING_NOTE,
    LogLines,
    error_box,
    error_text,
    errors_html,
    log_html,
    result_outputs,
    status_html,
)
from .sigint import sigint_calls

RANGES: dict[str, tuple[float, float]] = {
    "finish_threshold": (1.0, 10.0),
    "max_iterations": (1, 10),
    "min_criteria": (0, 6),
    "max_tokens": (1, 8192),
    "eval_max_tokens": (1, 8192),
    "budget_calls": (0, 1_000_000),
}
"""What each numeric control allows (min_criteria 0 and budget_calls 0 mean "the loop's default" and "none")."""

SCORE_MODES = ("expected", "sampled")


def check_value(name: str, value: Any) -> None:
    """ConfigError naming the field and its allowed range when `value` is not a number within RANGES[name]."""
    lo, hi = RANGES[name]
    whole = isinstance(lo, int)
    kind = "a whole number" if whole else "a number"
    ok = isinstance(value, int if whole else (int, float)) and not isinstance(value, bool)
    if not ok or not lo <= value <= hi:
        raise ConfigError(f"{name}: {value!r} is not allowed; give {kind} from {lo} to {hi}")


def default_score_mode(critic: str) -> str:
    """A local critic's default score: its expected (G-Eval) score; any other critic's: the one it writes."""
    try:
        return "expected" if resolve_model(critic).embedded else "sampled"
    except Exception:  # noqa: BLE001 -- an unknown name: the run says so, with the model's error
        return "sampled"


class Explorer:
    """The explorer's widgets and its run logic.

    Args:
        tasks: the tasks to choose from (see `promptlab.eval.tasks.read_tasks`).
        loop, task_id, generator_model, critic_model, finish_threshold, max_iterations, max_tokens: initial
            values of the controls (checked: see RANGES).
        eval_max_tokens: the cap on each reply when a candidate runs on a dev or test example (loops that
            measure candidates); 64 holds a label, a number or a date, and keeps the default run on the embedded
            model to about 2 CPU-minutes (256, the loops' default, takes about twice as long).
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
        import ipywidgets as w

        from ..loops.registry import get_loop
        from ..loops.runtime.define import LOOPS

        get_loop(loop)  # imports the built-in loops (and fails early on an unknown name)
        if not tasks:
            raise ConfigError("tasks: the explorer needs at least one task")
        self.tasks = {t.id: t for t in tasks}
        if task_id and task_id not in self.tasks:
            raise ConfigError(f"task_id: {task_id!r} is not one of the tasks: {', '.join(self.tasks)}")
        values = {
            "finish_threshold": finish_threshold,
            "max_iterations": max_iterations,
            "min_criteria": min_criteria,
            "max_tokens": max_tokens,
            "eval_max_tokens": eval_max_tokens,
            "budget_calls": budget_calls,
        }
        for name, value in values.items():
            check_value(name, value)
        if score_mode and score_mode not in SCORE_MODES:
            raise ConfigError(f"score_mode: {score_mode!r} is not allowed; give one of {', '.join(SCORE_MODES)}")
        self.model, self.max_tokens, self.eval_max_tokens = model, max_tokens, eval_max_tokens
        style = {"description_width": "110px"}
        self.loop_w = w.Dropdown(options=sorted(LOOPS), value=loop, description="loop", style=style)
        self.task_w = w.Dropdown(
            options=list(self.tasks), value=task_id or tasks[0].id, description="task", style=style
        )
        self.gen_w = w.Combobox(
            options=MODELS, value=model or generator_model, description="generator", style=style, ensure_option=False
        )
        self.critic_w = w.Combobox(
            options=MODELS, value=model or critic_model, description="critic", style=style, ensure_option=False
        )
        lo, hi = RANGES["finish_threshold"]
        self.threshold_w = w.FloatSlider(
            value=finish_threshold, min=lo, max=hi, step=0.5, description="finish at", style=style
        )
        lo, hi = RANGES["max_iterations"]
        self.cap_w = w.IntSlider(value=max_iterations, min=lo, max=hi, description="max iterations", style=style)
        p3ro_min = get_loop("p3ro").config_cls.model_fields["min_criteria"]
        self.min_criteria_w = w.IntSlider(
            value=min_criteria or p3ro_min.default,
            min=1,
            max=RANGES["min_criteria"][1],
            description="min criteria",
            style=style,
            description_tooltip=p3ro_min.description or "",
        )
        self.budget_w = w.BoundedIntText(
            value=budget_calls,
            min=0,
            max=RANGES["budget_calls"][1],
            description="budget (calls)",
            style=style,
            description_tooltip="budget_calls: stop before a step that would pass this many model calls (0: no budget)",
        )
        self.score_mode_w = w.Dropdown(
            options=SCORE_MODES,
            value=score_mode or default_score_mode(self.critic_w.value),
            description="critic score",
            style=style,
            description_tooltip="expected: the probability-weighted mean over 1-10 (G-Eval); sampled: the integer "
            "the critic wrote",
        )
        self.loop_fields = {
            "finish_threshold": self.threshold_w,
            "min_criteria": self.min_criteria_w,
            "score_mode": self.score_mode_w,
        }
        """Controls of config fields that only some loops have (greyed out for the others)."""
        # the buttons never shrink; the status beside them takes the rest of the row and wraps
        self.run_w = w.Button(
            description="Run", button_style="primary", icon="play", layout={"flex": "0 0 auto", "width": "120px"}
        )
        self.stop_w = w.Button(
            description="Stop",
            icon="stop",
            disabled=True,
            layout={"flex": "0 0 auto", "width": "100px", "margin": "0 0 0 6px"},
            tooltip="stop the run before its next step (stop reason interrupted; what it recorded is kept)",
        )
        self.status = w.HTML("", layout={"flex": "1 1 0%", "min_width": "0", "margin": "0 0 0 12px"})
        self.note = w.HTML("", layout={"width": "auto"})
        self.error = w.HTML("", layout={"width": "auto"})
        self.log_lines = LogLines()
        self.log = w.HTML(log_html([]), layout={"width": "auto"})
        self.result = w.Output()
        self.last_run: Run | None = None
        self.task: asyncio.Task[Run | None] | None = None
        self.stop_flag = threading.Event()
        self.loop_w.observe(lambda _change: self.sync_controls(), names="value")
        self.task_w.observe(lambda _change: self.sync_controls(), names="value")
        for model_w in (self.gen_w, self.critic_w):
            model_w.observe(lambda _change: self.sync_controls(), names="value")
        self.critic_w.observe(self.critic_changed, names="value")
        self.sync_controls()
        self.run_w.on_click(self.clicked)
        self.stop_w.on_click(self.stop)
        self.widget = w.VBox(
            [
                w.HBox([self.loop_w, self.task_w]),
                w.HBox([self.gen_w, self.critic_w]),
                w.HBox([self.threshold_w, self.cap_w]),
                w.HBox([self.min_criteria_w, self.budget_w]),
                w.HBox([self.score_mode_w]),
                self.note,
                w.HBox([self.run_w, self.stop_w, self.status], layout={"width": "100%", "align_items": "center"}),
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
        from ..loops.runtime.search import SearchConfig

        spec = get_loop(self.loop_w.value)
        fields = spec.config_cls.model_fields
        for name, widget in self.loop_fields.items():
            widget.disabled = name not in fields
        notes = []
        task = self.tasks[self.task_w.value]
        if issubclass(spec.config_cls, SearchConfig) and not task.grounded:
            notes.append(
                f"<b>{html.escape(spec.name)}</b> scores every candidate on the task's examples, and task "
                f"<b>{html.escape(task.id)}</b> has none: pick a task of data/grounded_tasks.jsonl "
                '(tasks_path = "data/grounded_tasks.jsonl").'
            )
        if any(self.uses_local(m) for m in (self.gen_w.value, self.critic_w.value)):
            notes.append(html.escape(PLUMBING_NOTE))
        self.note.value = "".join(
            f"<div class='promptlab-note' style='color:#555;line-height:1.4;margin:2px 0'>{n}</div>" for n in notes
        )

    @staticmethod
    def uses_local(model: str) -> bool:
        """Whether a model name is the embedded model (False for a name no provider knows)."""
        try:
            return resolve_model(model).embedded
        except Exception:  # noqa: BLE001 -- an unknown name: the run says so, with the model's error
            return False

    def critic_changed(self, change: dict[str, Any]) -> None:
        """A new critic model takes its default score mode (expected for a local critic)."""
        self.score_mode_w.value = default_score_mode(str(change["new"]))

    def config(self) -> dict[str, Any]:
        """The loop config the controls describe."""
        from ..loops.registry import get_loop

        config: dict[str, Any] = {
            "generator_model": self.gen_w.value,
            "critic_model": self.critic_w.value,
            "max_iterations": self.cap_w.value,
            "max_tokens": self.max_tokens,
        }
        if self.model:
            config["model"] = self.model
        if self.budget_w.value:
            config["budget_calls"] = self.budget_w.value
        fields = get_loop(self.loop_w.value).config_cls.model_fields
        if "eval_max_tokens" in fields:
            config["eval_max_tokens"] = self.eval_max_tokens
        config.update({name: widget.value for name, widget in self.loop_fields.items() if name in fields})
        if "max_criteria" in fields and "min_criteria" in config:  # asking for 6 criteria raises the cap with it
            config["max_criteria"] = max(config["min_criteria"], fields["max_criteria"].default)
        return config

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
        """The Stop button: ask the running loop to stop before its next step."""
        self.stop_flag.set()
        self.stop_w.disabled = True
        self.status.value = "<i>stopping after the current step...</i>"

    async def run(self, *, echo: Callable[[str], None] | None = None) -> Run | None:
        """Run the loop with the controls' values; show the log and the result in the widgets.

        Errors are shown in the log and the status line, never lost. `echo` also receives every log line (for
        papermill runs, whose widget state a saved notebook does not keep). The Stop button, or Kernel ▸
        Interrupt, ends the run before its next step, with stop reason `interrupted`.
        """
        from ..loops.registry import arun_loop

        # set, not cleared through `clear_output()`: that message is lost when sent from a task a click started
        self.log_lines = LogLines()
        self.log.value = log_html([])
        self.result.outputs = ()
        self.error.value = ""
        self.run_w.disabled = True
        self.stop_flag.clear()
        self.stop_w.disabled = False
        self.status.value = "<i>running...</i>"

        def handler(event: Event) -> None:
            line = self.on_event(event)
            if echo is not None and line:
                echo(line)

        try:
            config = self.config()
            with stop_scope(self.stop_flag), sigint_calls(self.stop):  # Kernel > Interrupt: as Stop
                run = await arun_loop(self.loop_w.value, self.tasks[self.task_w.value], config, on_event=handler)
            params = {"loop": run.loop, **{k: v for k, v in config.items() if not k.endswith("max_tokens")}}
            self.result.outputs = tuple(result_outputs(run, params))
            self.status.value = status_html(run)
            self.error.value = errors_html(run)
            self.last_run = run
            return run
        except Exception as e:  # shown where the user looks, not swallowed by the task
            self.status.value = (
                f"<span class='promptlab-failed' style='color:#b00'><b>failed</b> "
                f"({html.escape(type(e).__name__)}, see below)</span>"
            )
            self.error.value = error_box(error_text(e), type(e).__name__)
            if echo is not None:
                echo(f"ERROR {type(e).__name__}: {e}\n")
            return None
        finally:
            self.run_w.disabled = False
            self.stop_w.disabled = True

    def clicked(self, _button: Any = None) -> None:
        """The Run button: start a run on the kernel's event loop without blocking it."""
        self.run_w.disabled = True  # at once: a second click must not start a second run
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


__all__ = ["RANGES", "SCORE_MODES", "Explorer", "check_value", "default_score_mode", "load_explorer"]
