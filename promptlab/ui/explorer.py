"""The explorer behind notebooks/01_explore: pick a loop, a task and the models, press Run, watch the live
event log, then see the score trajectory and the final prompt beside the original.

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
        for name, text in cols)
    return f"<table style='width:100%;text-align:left'><tr>{cells}</tr></table>"


def result_outputs(run: Run, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The result area's outputs: the trajectory plot, the stop line and the prompts side by side."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..reports.plots import plot_trajectories
    from ..results.frames import tidy

    traj, _ = tidy([run], params, "explore")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    try:
        plot_trajectories(traj, by=["loop"], ax=ax)
        ax.set_title(f"{run.loop} on {run.task.id}: stopped ({run.stop_reason})")
        png = figure_png(fig)
    finally:
        plt.close(fig)
    summary = (f"{run.loop} on {run.task.id}: {len(run.iterations)} iteration(s), stop reason {run.stop_reason}, "
               f"best score {run.best_score}")
    return [
        {"output_type": "display_data", "data": png, "metadata": {}},
        {"output_type": "stream", "name": "stdout", "text": summary + "\n"},
        {"output_type": "display_data", "data": {"text/html": side_by_side(run.task.prompt, run.final_output),
                                                 "text/plain": f"final: {run.final_output}"}, "metadata": {}},
    ]


class Explorer:
    """The explorer's widgets and its run logic.

    Args:
        tasks: the tasks to choose from (see `promptlab.sweeps.experiment.read_tasks`).
        loop, task_id, generator_model, critic_model, finish_threshold, max_iterations, max_tokens: initial
            values of the controls.
        model: if set, it plays every role (e.g. "fake/auto" for a dry run).
    """

    def __init__(self, tasks: list[Task], *, loop: str = "p3ro", task_id: str = "", model: str = "",
                 generator_model: str = "local/smollm2", critic_model: str = "local/smollm2",
                 finish_threshold: float = 8.5, max_iterations: int = 3, max_tokens: int = 256) -> None:
        import ipywidgets as w

        from ..loops.registry import get_loop
        from ..loops.runtime.base import LOOPS

        get_loop(loop)  # imports the built-in loops (and fails early on an unknown name)
        if not tasks:
            raise ValueError("the explorer needs at least one task")
        self.tasks = {t.id: t for t in tasks}
        self.model, self.max_tokens = model, max_tokens
        style = {"description_width": "110px"}
        self.loop_w = w.Dropdown(options=sorted(LOOPS), value=loop, description="loop", style=style)
        self.task_w = w.Dropdown(options=list(self.tasks), value=task_id or tasks[0].id, description="task",
                                 style=style)
        self.gen_w = w.Combobox(options=MODELS, value=model or generator_model, description="generator",
                                style=style, ensure_option=False)
        self.critic_w = w.Combobox(options=MODELS, value=model or critic_model, description="critic", style=style,
                                   ensure_option=False)
        self.threshold_w = w.FloatSlider(value=finish_threshold, min=1.0, max=10.0, step=0.5,
                                         description="finish at", style=style)
        self.cap_w = w.IntSlider(value=max_iterations, min=1, max=10, description="max iterations", style=style)
        self.run_w = w.Button(description="Run", button_style="primary", icon="play")
        self.log = w.Output(layout={"border": "1px solid #ccc", "height": "220px", "overflow": "auto"})
        self.result = w.Output()
        self.status = w.HTML("")
        self.last_run: Run | None = None
        self.task: asyncio.Task[Run | None] | None = None
        self.loop_w.observe(lambda _change: self.sync_threshold(), names="value")
        self.sync_threshold()
        self.run_w.on_click(self.clicked)
        self.widget = w.VBox([w.HBox([self.loop_w, self.task_w]), w.HBox([self.gen_w, self.critic_w]),
                              w.HBox([self.threshold_w, self.cap_w]), w.HBox([self.run_w, self.status]),
                              self.log, self.result])

    def sync_threshold(self) -> None:
        """Loops without a finish threshold (pes, pcee) grey the slider out."""
        from ..loops.registry import get_loop

        self.threshold_w.disabled = "finish_threshold" not in get_loop(self.loop_w.value).config_cls.model_fields

    def config(self) -> dict[str, Any]:
        """The loop config the controls describe."""
        from ..loops.registry import get_loop

        config: dict[str, Any] = {"generator_model": self.gen_w.value, "critic_model": self.critic_w.value,
                                  "max_iterations": self.cap_w.value, "max_tokens": self.max_tokens}
        if self.model:
            config["model"] = self.model
        if "finish_threshold" in get_loop(self.loop_w.value).config_cls.model_fields:
            config["finish_threshold"] = self.threshold_w.value
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

        self.log.clear_output()
        self.result.outputs = ()
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
            self.status.value = f"done: stop reason <b>{html.escape(run.stop_reason)}</b>"
            self.last_run = run
            return run
        except Exception as e:  # shown where the user looks, not swallowed by the task
            self.write(f"ERROR {type(e).__name__}: {e}\n")
            self.status.value = f"<span style='color:#b00'>failed: {html.escape(type(e).__name__)}: " \
                                f"{html.escape(str(e))}</span>"
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


__all__ = ["Explorer", "MODELS", "event_line", "figure_png", "load_explorer", "result_outputs", "side_by_side"]
