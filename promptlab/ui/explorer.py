"""The explorer behind notebooks/01_explore: pick a loop, a task and the models, press Run, watch the live
event log, then see the score trajectory and the final prompt beside the original.

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
import base64
import html
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..events import Event
from ..record import Run, Task

MODELS = ["local/smollm2", "fake/auto"]
"""Model choices offered in the comboboxes (any litellm name can be typed)."""


def event_line(event: Event) -> str | None:
    """One log line per event; token events are too many to show (None)."""
    if event.kind == "token":
        return None
    where = f"it{event.iteration}" if event.iteration is not None else "--"
    return f"[{where}] {event.kind} {event.role or ''}: {event.message}\n"


def figure_png(fig: Any) -> dict[str, str]:
    """A matplotlib figure as display data (PNG, base64) plus a text fallback."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": "<trajectory plot>"}


def side_by_side(original: str, final: str | None) -> str:
    """The original and the final prompt as a two-column HTML table, text left-aligned."""
    cols = [("original", original), ("final", final if final is not None else "(none)")]
    cells = "".join(
        f"<td style='vertical-align:top;text-align:left;width:50%'><b>{name}</b>"
        f"<pre class='promptlab-{name}' style='white-space:pre-wrap;text-align:left'>{html.escape(text)}</pre></td>"
        for name, text in cols
    )
    return f"<table style='width:100%;text-align:left'><tr>{cells}</tr></table>"


def ended_in_error(run: Run) -> bool:
    """Whether a run ended in error: stop reason `error` (or `*_error`), or an infrastructure failure."""
    return run.stop_reason == "error" or run.stop_reason.endswith("_error") or run.incomplete


def errors_html(run: Run, limit: int = 5) -> str:
    """The errors a run recorded (the first `limit`), as wrapped HTML lines; empty when there are none."""
    if not run.errors:
        return ""
    lines = [
        f"{e.role} ({e.phase}{'' if e.iteration is None else f', iteration {e.iteration}'}): {e.kind}: {e.message}"
        for e in run.errors[:limit]
    ]
    if len(run.errors) > limit:
        lines.append(f"... and {len(run.errors) - limit} more (run.errors)")
    return error_box("\n".join(lines), f"{len(run.errors)} error(s) recorded")


def error_box(text: str, title: str) -> str:
    """An error's full text under a title, wrapped to the output's width."""
    return (
        f"<div class='promptlab-error' style='color:#b00;white-space:pre-wrap;overflow-wrap:anywhere;"
        f"line-height:1.4'>"
        f"<b>{html.escape(title)}</b>\n{html.escape(text)}</div>"
    )


def error_text(e: BaseException) -> str:
    """An exception's message; a config's ValidationError as one line per bad field, naming it and the value."""
    from pydantic import ValidationError

    from ..sweeps.experiment import describe_error

    if isinstance(e, ValidationError):
        return "\n".join(describe_error(err) for err in e.errors())
    return str(e)


def status_html(run: Run) -> str:
    """The short status line after a run: done and its stop reason, or, in red, that it ended in error."""
    reason = html.escape(run.stop_reason or "none")
    if ended_in_error(run):
        return f"<span class='promptlab-failed' style='color:#b00'><b>ended in error</b> (stop reason {reason})</span>"
    note = f" · {len(run.errors)} error(s) recorded" if run.errors else ""
    return f"done: stop reason <b>{reason}</b>{note}"


def trajectory_figure(run: Run, params: dict[str, Any]) -> Any:
    """The run's score per iteration as a matplotlib Figure (whole-number iteration ticks): the critic's score,
    or, for a loop without a critic (the prompt-search baselines), the dev accuracy; None when no iteration has
    either."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from ..reports.plots import plot_trajectories
    from ..results.frames import tidy

    traj, _ = tidy([run], params, "explore")
    value = next(
        (
            v
            for c, v in (("score", "average"), ("grounded_score", "grounded_score"))
            if len(traj) and traj[c].notna().any()
        ),
        None,
    )
    if value is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    plot_trajectories(traj, by=["loop"], ax=ax, value=value)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole iterations, even just one
    ax.set_title(f"{run.loop} on {run.task.id}: stopped ({run.stop_reason})")
    return fig


def result_outputs(run: Run, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The result area's outputs: the trajectory plot (a line saying why when no iteration has a score), the
    stop line and the prompts side by side."""
    import matplotlib.pyplot as plt

    fig = trajectory_figure(run, params)
    plot: dict[str, Any]
    if fig is None:
        plot = {"output_type": "stream", "name": "stdout", "text": "(no plot: no iteration has a score)\n"}
    else:
        try:
            plot = {"output_type": "display_data", "data": figure_png(fig), "metadata": {}}
        finally:
            plt.close(fig)
    summary = (
        f"{run.loop} on {run.task.id}: {len(run.iterations)} iteration(s), stop reason {run.stop_reason}, "
        f"best score {run.best_score}"
    )
    return [
        plot,
        {"output_type": "stream", "name": "stdout", "text": summary + "\n"},
        {
            "output_type": "display_data",
            "data": {
                "text/html": side_by_side(run.task.prompt, run.final_output),
                "text/plain": f"final: {run.final_output}",
            },
            "metadata": {},
        },
    ]


class Explorer:
    """The explorer's widgets and its run logic.

    Args:
        tasks: the tasks to choose from (see `promptlab.sweeps.experiment.read_tasks`).
        loop, task_id, generator_model, critic_model, finish_threshold, max_iterations, max_tokens: initial
            values of the controls.
        min_criteria: P³RO's fewest criteria (0: P³RO's default); greyed out for the other loops.
        budget_calls: the run's `budget_calls` (0: none), e.g. to bound a search loop (APE's 250 proposals).
        model: if set, it plays every role (e.g. "fake/auto" for a dry run).
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
        min_criteria: int = 0,
        budget_calls: int = 0,
    ) -> None:
        import ipywidgets as w

        from ..loops.registry import get_loop
        from ..loops.runtime.define import LOOPS

        get_loop(loop)  # imports the built-in loops (and fails early on an unknown name)
        if not tasks:
            raise ValueError("the explorer needs at least one task")
        self.tasks = {t.id: t for t in tasks}
        self.model, self.max_tokens = model, max_tokens
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
        self.threshold_w = w.FloatSlider(
            value=finish_threshold, min=1.0, max=10.0, step=0.5, description="finish at", style=style
        )
        self.cap_w = w.IntSlider(value=max_iterations, min=1, max=10, description="max iterations", style=style)
        p3ro_min = get_loop("p3ro").config_cls.model_fields["min_criteria"]
        self.min_criteria_w = w.IntSlider(
            value=min_criteria or p3ro_min.default,
            min=1,
            max=6,
            description="min criteria",
            style=style,
            description_tooltip=p3ro_min.description or "",
        )
        self.budget_w = w.BoundedIntText(
            value=budget_calls,
            min=0,
            max=1_000_000,
            description="budget (calls)",
            style=style,
            description_tooltip="budget_calls: stop before a step that would pass this many model calls (0: no budget)",
        )
        self.loop_fields = {"finish_threshold": self.threshold_w, "min_criteria": self.min_criteria_w}
        """Controls of config fields that only some loops have (greyed out for the others)."""
        # the button never shrinks; the status beside it takes the rest of the row and wraps
        self.run_w = w.Button(
            description="Run", button_style="primary", icon="play", layout={"flex": "0 0 auto", "width": "120px"}
        )
        self.status = w.HTML("", layout={"flex": "1 1 0%", "min_width": "0", "margin": "0 0 0 12px"})
        self.error = w.HTML("", layout={"width": "auto"})
        self.log = w.Output(layout={"border": "1px solid #ccc", "height": "220px", "overflow": "auto"})
        self.result = w.Output()
        self.last_run: Run | None = None
        self.task: asyncio.Task[Run | None] | None = None
        self.loop_w.observe(lambda _change: self.sync_threshold(), names="value")
        self.sync_threshold()
        self.run_w.on_click(self.clicked)
        self.widget = w.VBox(
            [
                w.HBox([self.loop_w, self.task_w]),
                w.HBox([self.gen_w, self.critic_w]),
                w.HBox([self.threshold_w, self.cap_w]),
                w.HBox([self.min_criteria_w, self.budget_w]),
                w.HBox([self.run_w, self.status], layout={"width": "100%", "align_items": "center"}),
                self.error,
                self.log,
                self.result,
            ]
        )

    def sync_threshold(self) -> None:
        """Grey out the controls of fields the chosen loop lacks (no finish threshold in pes and pcee, min
        criteria only in p3ro)."""
        from ..loops.registry import get_loop

        fields = get_loop(self.loop_w.value).config_cls.model_fields
        for name, widget in self.loop_fields.items():
            widget.disabled = name not in fields

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
        config.update({name: widget.value for name, widget in self.loop_fields.items() if name in fields})
        if "max_criteria" in fields and "min_criteria" in config:  # asking for 6 criteria raises the cap with it
            config["max_criteria"] = max(config["min_criteria"], fields["max_criteria"].default)
        return config

    def write(self, text: str) -> None:
        """Append a line to the event log."""
        self.log.append_stdout(text)

    def on_event(self, event: Event) -> None:
        """The run's event handler: one log line per event."""
        line = event_line(event)
        if line:
            self.write(line)

    async def run(self, *, echo: Callable[[str], None] | None = None) -> Run | None:
        """Run the loop with the controls' values; show the log and the result in the widgets.

        Errors are shown in the log and the status line, never lost. `echo` also receives every log line (for
        papermill runs, whose widget state a saved notebook does not keep).
        """
        from ..loops.registry import arun_loop

        # set, not cleared through `clear_output()`: that message is lost when sent from a task a click started
        self.log.outputs = ()
        self.result.outputs = ()
        self.error.value = ""
        self.run_w.disabled = True
        self.status.value = "<i>running...</i>"

        def handler(event: Event) -> None:
            self.on_event(event)
            line = event_line(event)
            if echo is not None and line:
                echo(line)

        try:
            config = self.config()
            run = await arun_loop(self.loop_w.value, self.tasks[self.task_w.value], config, on_event=handler)
            params = {"loop": run.loop, **{k: v for k, v in config.items() if k != "max_tokens"}}
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

    def clicked(self, _button: Any = None) -> None:
        """The Run button: start a run on the kernel's event loop without blocking it."""
        self.run_w.disabled = True  # at once: a second click must not start a second run
        self.task = asyncio.ensure_future(self.run())

    def display(self) -> None:
        """Show the controls, the log and the result area."""
        from IPython.display import display

        display(self.widget)


def load_explorer(tasks_path: str | Path, **kwargs: Any) -> Explorer:
    """An Explorer over the tasks of a JSONL task file."""
    from ..eval.tasks import read_tasks

    return Explorer(read_tasks(tasks_path), **kwargs)


__all__ = [
    "Explorer",
    "MODELS",
    "ended_in_error",
    "error_box",
    "error_text",
    "errors_html",
    "event_line",
    "figure_png",
    "load_explorer",
    "result_outputs",
    "side_by_side",
    "status_html",
    "trajectory_figure",
]
