"""What the explorer (notebooks/01_explore) shows, as pure functions of events and runs: the log lines (one per
step, `LogLines`), the log box that follows the run (`log_html`), the status and error lines, the trajectory chart
(the critic's score beside the dev accuracy) and the final prompt beside the original.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from ..events import Event
from ..record import Run

MODELS = ["local/smollm2", "fake/auto"]
"""Model choices offered in the comboboxes (any litellm name can be typed)."""

PER_EXAMPLE_PHASES = frozenset({"score_dev", "score_test"})
"""Phases with one call per example: the log shows each once per iteration, not once per example."""

SILENT = frozenset({"token", "model_call", "observation"})
"""Event kinds the log leaves out: reply pieces, call accounting (the steps table has it) and raw observations."""

PLUMBING_NOTE = (
    "local/smollm2 is SmolLM2-135M, a 135M-parameter model embedded so that everything runs offline and free: "
    "it is here to check the plumbing (every role, every call, the records), not to improve prompts. Its "
    "rewrites are usually worse than the starting prompt (on sentiment they tend to drop the {input} slot), and a "
    "loop that trusts its G-Eval score as a critic can return a worse prompt (whether that score tracks the dev "
    "accuracy, the summary line reads after the run, by notebook 04's rule). Read the dev accuracy on the right; to watch a loop improve a prompt, type a stronger model (any "
    "litellm name) as generator and critic."
)
"""The note shown while a role is played by the embedded model."""


class LogLines:
    """The explorer's log: one line per step. Token pieces, call accounting and per-example calls are left out;
    a per-example phase (the dev or test measurement) gets one line per iteration."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen: set[tuple[int | None, str]] = set()

    def add(self, event: Event) -> str | None:
        """The event's line, appended to `lines` (None when the log leaves it out)."""
        if event.kind in SILENT:
            return None
        where = f"it{event.iteration}" if event.iteration is not None else "--"
        if event.kind == "phase" and event.phase in PER_EXAMPLE_PHASES:
            key = (event.iteration, event.phase)
            if key in self.seen:
                return None
            self.seen.add(key)
            split = "dev" if event.phase == "score_dev" else "test"
            line = f"[{where}] measuring the candidate on the {split} examples ({event.role or 'target'})\n"
        else:
            role = f" {event.role}" if event.role else ""
            line = f"[{where}] {event.kind}{role}: {event.message}\n"
        self.lines.append(line)
        return line


def event_line(event: Event) -> str | None:
    """One log line per event, with no memory of earlier events (token and call events: None)."""
    return LogLines().add(event)


LOG_TAIL = 12
"""Lines the log box shows: the newest ones; the whole log is one click away."""


def log_html(lines: list[str], tail: int = LOG_TAIL) -> str:
    """The log as a box that follows the run: its newest `tail` lines, and above them, folded, the whole log."""
    pre = "margin:0;white-space:pre-wrap;overflow-wrap:break-word;word-break:normal"
    shown = html.escape("".join(lines[-tail:])) or "(the log fills as the loop works)"
    earlier = ""
    if len(lines) > tail:
        earlier = (
            f"<details class='promptlab-log-all'><summary>the whole log ({len(lines)} lines)</summary>"
            f"<pre style='{pre};max-height:300px;overflow:auto'>{html.escape(''.join(lines))}</pre></details>"
        )
    return (
        f"<div class='promptlab-log' style='border:1px solid #ccc;padding:2px 6px'>{earlier}"
        f"<pre class='promptlab-log-tail' style='{pre}'>{shown}</pre></div>"
    )


def figure_png(fig: Any) -> dict[str, str]:
    """A matplotlib figure as display data (PNG, base64) plus a text fallback."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": "<trajectory plot>"}


PRE = "white-space:pre-wrap;overflow-wrap:break-word;word-break:normal;text-align:left"
"""A prompt's text: wrapped at spaces, a word cut only when it is wider than the column."""


def side_by_side(original: str, final: str | None) -> str:
    """The original and the final prompt as a two-column HTML table, text left-aligned."""
    cols = [("original", original), ("final", final if final is not None else "(none)")]
    cells = "".join(
        f"<td style='vertical-align:top;text-align:left;width:50%'><b>{name}</b>"
        f"<pre class='promptlab-{name}' style='{PRE}'>{html.escape(text)}</pre></td>"
        for name, text in cols
    )
    return f"<table style='width:100%;text-align:left;table-layout:fixed'><tr>{cells}</tr></table>"


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


def uses_local(model: str) -> bool:
    """Whether a model name is the embedded model (False for a name no provider knows)."""
    from ..llm.providers.resolved import resolve_model

    try:
        return resolve_model(model).embedded
    except Exception:  # noqa: BLE001 -- an unknown name: the run says so, with the model's error
        return False


def notes_html(spec: Any, task: Any, models: list[str]) -> str:
    """What needs saying before a run of loop `spec` on `task` with `models`: that a search loop needs a task
    with examples, that the embedded model checks plumbing."""
    from ..loops.runtime.search import SearchConfig

    notes = []
    if issubclass(spec.config_cls, SearchConfig) and not task.grounded:
        notes.append(
            f"<b>{html.escape(spec.name)}</b> scores every candidate on the task's examples, and task "
            f"<b>{html.escape(task.id)}</b> has none: pick a task of data/grounded_tasks.jsonl "
            '(tasks_path = "data/grounded_tasks.jsonl").'
        )
    if any(uses_local(m) for m in models):
        notes.append(html.escape(PLUMBING_NOTE))
    return "".join(
        f"<div class='promptlab-note' style='color:#555;line-height:1.4;margin:2px 0'>{n}</div>" for n in notes
    )


def failed_html(e: BaseException) -> tuple[str, str]:
    """The status line and the error box of an error that stopped a run."""
    status = (
        f"<span class='promptlab-failed' style='color:#b00'><b>failed</b> "
        f"({html.escape(type(e).__name__)}, see below)</span>"
    )
    return status, error_box(error_text(e), type(e).__name__)


def measurable(run: Run | None) -> bool:
    """Whether a run was stopped before measuring its returned prompt on its task's test examples (so the
    explorer offers to)."""
    from ..eval.tasks import examples_of
    from ..loops.registry import get_loop
    from ..loops.runtime.grounding import GroundedConfig

    return (
        run is not None
        and run.stop_reason == "interrupted"
        and run.final_output is not None
        and run.final_test is None
        and bool(examples_of(run.task, "test"))
        and issubclass(get_loop(run.loop).config_cls, GroundedConfig)
    )


def status_html(run: Run) -> str:
    """The short status line after a run: done and its stop reason, interrupted, or, in red, that it ended in
    error."""
    reason = html.escape(run.stop_reason or "none")
    if ended_in_error(run):
        return f"<span class='promptlab-failed' style='color:#b00'><b>ended in error</b> (stop reason {reason})</span>"
    note = f" · {len(run.errors)} error(s) recorded" if run.errors else ""
    if run.stop_reason == "interrupted":
        test = "" if run.final_test is not None or not measurable(run) else "; not measured on test"
        return (
            f"<span class='promptlab-stopped'><b>stopped</b> (stop reason interrupted; what it recorded is kept"
            f"{test}){note}</span>"
        )
    return f"done: stop reason <b>{reason}</b>{note}"


PANELS = (("average", "critic's score (1-10)"), ("grounded_score", "dev accuracy (0-1)"))
"""The trajectory chart's panels: the critic's own score, and the accuracy on the task's dev examples."""


def trajectory_figure(run: Run, params: dict[str, Any]) -> Any:
    """The run's trajectory as a matplotlib Figure: the critic's score per iteration beside the dev accuracy
    (each panel only when some iteration has that value; whole-number iteration ticks); None when no iteration
    has either."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..reports.plots import integer_ticks, plot_trajectories
    from ..results.frames import iteration_frame, tidy

    traj, _ = tidy([run], params, "explore")
    its = iteration_frame(traj) if len(traj) else traj
    panels = [(c, label) for c, label in PANELS if len(its) and c in its and its[c].notna().any()]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.2), squeeze=False, layout="constrained")
    for ax, (value, label) in zip(axes[0], panels, strict=True):
        plot_trajectories(its, by=["loop"], ax=ax, value=value, ci=None)
        ax.set(title=label, ylabel=label.split(" (")[0])
        if value == "grounded_score":
            fit_accuracy(ax, its[value].dropna().astype(float).tolist())
        else:
            fit_critic_score(ax, its[value].dropna().astype(float).tolist())
        integer_ticks(ax, sorted(int(i) for i in its["iteration"].dropna().unique()))
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()  # one loop: the title says which
    fig.suptitle(f"{run.loop} on {run.task.id}: stopped ({run.stop_reason})", fontsize="medium")
    return fig


def fit_accuracy(ax: Any, values: list[float]) -> None:
    """An accuracy axis that fits its values, inside [0, 1] (`promptlab.reports.charts.accuracy_limits`)."""
    import pandas as pd

    from ..reports.charts import accuracy_limits

    ax.set_ylim(*accuracy_limits(pd.DataFrame({"accuracy": values})))


CRITIC_SPAN = 1.0
"""The fewest points of the 1-10 scale the critic's-score axis spans: SmolLM2's expected score moves in the third
decimal, and an axis fitted to 2.357-2.361 draws that as a steep fall."""


def fit_critic_score(ax: Any, values: list[float]) -> None:
    """A critic's-score axis around its values, at least CRITIC_SPAN points tall, inside [1, 10]."""
    if not values:
        return
    low, high = min(values), max(values)
    half = max((high - low) * 0.55, CRITIC_SPAN / 2)
    middle = min(max((low + high) / 2, 1 + half), 10 - half)
    ax.set_ylim(max(1.0, middle - half), min(10.0, middle + half))


def run_summary(run: Run, config: dict[str, Any]) -> str:
    """One line on how the run went: its iterations (and what `max_iterations` counted, when a step writes
    several candidates), stop reason, best critic score and best dev accuracy."""
    parts = [f"{run.loop} on {run.task.id}: {len(run.iterations)} iteration(s)"]
    cap, scored = config.get("max_iterations"), [it for it in run.iterations if it.index != 0]
    if isinstance(cap, int) and len(scored) > cap:
        parts[0] += f" (max iterations {cap} counts {run.loop}'s steps; each writes several candidates)"
    parts.append(f"stop reason {run.stop_reason}")
    if run.best_score is not None:
        parts.append(f"best critic score {run.best_score:.3g}")
    dev = [(it.grounded.score, it.index) for it in run.iterations if it.grounded and it.grounded.score is not None]
    if dev:
        score, index = max(dev, key=lambda p: (p[0], -p[1]))
        parts.append(f"best dev accuracy {score:.3g} (iteration {index})")
    if run.best_score is None and not dev:
        parts.append("no iteration has a score")
    if run.baseline_test is not None and run.final_test is not None:
        start, final = run.baseline_test.score, run.final_test.score
        if start is not None and final is not None:
            parts.append(f"test accuracy {start:.3g} (starting prompt) -> {final:.3g} (final prompt)")
    if len(run.iterations) > 1 and run.final_output == run.task.prompt:
        parts.append("the final prompt is the starting prompt (the loop kept no rewrite)")
    parts.extend(below_start(run))
    parts.extend(critic_reading(run, config))
    return ", ".join(parts)


def critic_reading(run: Run, params: dict[str, Any]) -> list[str]:
    """A clause on whether the critic's score tracked the dev accuracy over this run's candidates, read by the
    rule of notebook 04 and the report (`reports.findings.calibration_verdict`); none without both scores."""
    import pandas as pd

    from ..analysis.critic import ALL, calibration
    from ..reports.findings import calibration_verdict
    from ..results.frames import tidy

    traj, _ = tidy([run], params, "explore")
    cal = calibration(traj) if len(traj) else traj
    own = cal[cal["criterion"] == ALL] if len(cal) else cal
    if own.empty or pd.isna(own["n"].iloc[0]) or int(own["n"].iloc[0]) == 0:
        return []
    r = own.iloc[0]
    if pd.isna(r["spearman"]):
        return [f"critic score against dev accuracy: {r['finding']}"]
    reading = calibration_verdict(r["spearman_ci_low"], r["spearman_ci_high"])
    return [f"critic score against dev accuracy: {reading} (Spearman {r['spearman']:+.2f}, n={int(r['n'])})"]


def below_start(run: Run) -> list[str]:
    """A clause when the final prompt's dev accuracy is below the starting prompt's (a loop that trusted its
    critic over the measurement), else none."""
    dev = {it.candidate: it.grounded.score for it in run.iterations if it.grounded and it.grounded.score is not None}
    start, final = dev.get(run.task.prompt), dev.get(run.final_output)
    if start is None or final is None or final >= start:
        return []
    return [f"the final prompt's dev accuracy {final:.3g} is below the starting prompt's {start:.3g}"]


def result_outputs(run: Run, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The result area's outputs: the trajectory chart (a line saying why when no iteration has a score), the
    run's summary line and the prompts side by side."""
    import matplotlib.pyplot as plt

    fig = trajectory_figure(run, params)
    plot: dict[str, Any]
    if fig is None:
        plot = {"output_type": "stream", "name": "stdout", "text": "(no chart: no iteration has a score)\n"}
    else:
        try:
            plot = {"output_type": "display_data", "data": figure_png(fig), "metadata": {}}
        finally:
            plt.close(fig)
    return [
        plot,
        {"output_type": "stream", "name": "stdout", "text": run_summary(run, params) + "\n"},
        {
            "output_type": "display_data",
            "data": {
                "text/html": side_by_side(run.task.prompt, run.final_output),
                "text/plain": f"final: {run.final_output}",
            },
            "metadata": {},
        },
    ]


__all__ = [
    "MODELS",
    "PANELS",
    "PER_EXAMPLE_PHASES",
    "PLUMBING_NOTE",
    "SILENT",
    "LOG_TAIL",
    "LogLines",
    "ended_in_error",
    "error_box",
    "error_text",
    "errors_html",
    "event_line",
    "failed_html",
    "figure_png",
    "fit_accuracy",
    "log_html",
    "measurable",
    "notes_html",
    "result_outputs",
    "critic_reading",
    "run_summary",
    "side_by_side",
    "status_html",
    "trajectory_figure",
    "uses_local",
]
