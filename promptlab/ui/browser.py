"""A run browser: pick a cell and a run of a results directory, then step through its iterations.

For each iteration it shows the candidate (with a diff against the previous one), the per-criterion scores
with their justifications, the reflection, the decision and its reason, the grounded (dev-split) score where
there is one with each dev example's reply and whether it was scored correct, and the tokens and cost of every
step. A menu jumps to any iteration. `iteration_html(run, k)` renders one iteration as HTML
(pure, tested); `RunBrowser` wraps it in widgets for JupyterLab (notebooks 03_compare and 05_runs).
"""

from __future__ import annotations

import difflib
import html
import os
from typing import Any

from ..record import Iteration, Run, Step
from ..results.labels import REPLICATE, TASK
from ..results.labels import labels as label_rows


def candidate_diff(before: str | None, after: str | None) -> str:
    """An inline HTML word diff of two candidates: removed words struck through in red, added ones in green."""
    a, b = (before or "").split(), (after or "").split()
    if not a:
        return f"<span class='pl-added' style='background:#dfd'>{html.escape(after or '')}</span>"
    parts: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            parts.append(f"<del class='pl-removed' style='background:#fdd'>{html.escape(' '.join(a[i1:i2]))}</del>")
        if op in ("replace", "insert"):
            parts.append(f"<ins class='pl-added' style='background:#dfd'>{html.escape(' '.join(b[j1:j2]))}</ins>")
        if op == "equal":
            parts.append(html.escape(" ".join(a[i1:i2])))
    return " ".join(parts)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return html.escape(str(value))


WRAP = "white-space:normal;overflow-wrap:anywhere;word-break:break-word;vertical-align:top;text-align:left"
"""Cell style: long text wraps inside the output's width instead of widening the table."""

TABLE = "table-layout:fixed;width:100%;max-width:100%;border-collapse:collapse;text-align:left"
"""Table style: as wide as the output, never wider; the columns share it by their <col> widths."""

FOLD_AT = 4
"""A (phase, role) with more steps than this in one iteration (a call per dev example) is folded into one row."""


def _cell(text: str | None, limit: int | None = None) -> str:
    """A wrapping table cell; past `limit` characters the text is cut, the whole of it in the hover title."""
    text = text or ""
    if limit is not None and len(text) > limit:
        return f"<td style='{WRAP}' title='{html.escape(text, quote=True)}'>{html.escape(text[:limit].rstrip())}…</td>"
    return f"<td style='{WRAP}'>{html.escape(text)}</td>"


def _table(css_class: str, columns: list[tuple[str, int]], rows: list[str]) -> str:
    """An HTML table that fits the output's width: `columns` are (header, width in %)."""
    cols = "".join(f"<col style='width:{width}%'>" for _, width in columns)
    head = "".join(f"<th style='{WRAP}'>{html.escape(name)}</th>" for name, _ in columns)
    return (
        f"<table class='{css_class}' style='{TABLE}'><colgroup>{cols}</colgroup><tr>{head}</tr>{''.join(rows)}</table>"
    )


STEP_COLUMNS = [
    ("phase", 11),
    ("role", 11),
    ("model", 16),
    ("in tokens", 8),
    ("out tokens", 8),
    ("cost USD", 8),
    ("cached", 7),
    ("error", 31),
]


def cost_text(costs: list[float | None]) -> str:
    """Total cost: "cost unknown" when any price is unknown, else "cost X USD"."""
    return "cost unknown" if any(c is None for c in costs) else f"cost {sum(c or 0.0 for c in costs):.4g} USD"


def _num(text: str) -> str:
    return f"<td style='{WRAP}'>{text}</td>"


def _step_row(s: Step) -> str:
    c = s.call
    return (
        "<tr>"
        + "".join(
            [
                _cell(s.phase),
                _cell(s.role),
                _cell(s.model or "tool"),
                _num(_fmt(c.input_tokens if c else None)),
                _num(_fmt(c.output_tokens if c else None)),
                _num(_fmt(c.cost_usd if c else None, 4)),
                _num("yes" if c and c.cache_hit else ""),
                _cell(f"{s.error.kind}: {s.error.message}" if s.error else "", 160),
            ]
        )
        + "</tr>"
    )


def _folded_row(group: list[Step]) -> str:
    """One row for many steps of one (phase, role): how many, their tokens, cost, cache hits and errors."""
    calls = [s.call for s in group if s.call]
    tokens_in = sum(c.input_tokens or 0 for c in calls)
    tokens_out = sum(c.output_tokens or 0 for c in calls)
    costs = [c.cost_usd for c in calls]
    cost = "–" if any(c is None for c in costs) else _fmt(sum(c or 0.0 for c in costs), 4)
    errors = sum(1 for s in group if s.error)
    hits = sum(1 for c in calls if c.cache_hit)
    models = sorted({s.model or "tool" for s in group})
    return (
        "<tr class='pl-folded'>"
        + "".join(
            [
                _cell(group[0].phase),
                _cell(f"{group[0].role} × {len(group)}"),
                _cell(", ".join(models)),
                _num(str(tokens_in)),
                _num(str(tokens_out)),
                _num(cost),
                _num(f"{hits}/{len(group)}"),
                _cell(f"{errors} error(s)" if errors else ""),
            ]
        )
        + "</tr>"
    )


def steps_table(steps: list[Step]) -> str:
    """Tokens, cost, cache hits and errors of each step, as an HTML table. A (phase, role) with more than
    FOLD_AT steps (one per dev example) is one summary row, its steps in a folded table below."""
    groups: dict[tuple[str, str], list[Step]] = {}
    for s in steps:
        groups.setdefault((s.phase, s.role), []).append(s)
    folded = {key for key, group in groups.items() if len(group) > FOLD_AT}
    rows: list[str] = []
    for s in steps:
        key = (s.phase, s.role)
        if key not in folded:
            rows.append(_step_row(s))
        elif groups[key][0] is s:
            rows.append(_folded_row(groups[key]))
    details = "".join(
        f"<details class='pl-per-example'><summary>{html.escape(phase)} · {html.escape(role)}: "
        f"{len(groups[(phase, role)])} steps</summary>"
        f"{_table('pl-steps', STEP_COLUMNS, [_step_row(s) for s in groups[(phase, role)]])}</details>"
        for phase, role in groups
        if (phase, role) in folded
    )
    return _table("pl-steps", STEP_COLUMNS, rows) + details


EXAMPLE_COLUMNS = [("example", 10), ("reply", 66), ("score", 10), ("scored", 14)]


def examples_html(steps: list[Step], split: str = "dev") -> str:
    """Each example's reply and whether it was scored correct, from the iteration's per-example steps (a
    folded table under a one-line count); empty when the iteration was not measured on examples."""
    rows, correct, scored = [], 0, 0
    phase = f"score_{split}"
    for s in steps:
        if s.phase != phase or "example" not in s.output:
            continue
        score = s.output.get("score")
        verdict = "error" if s.error else "missing" if score is None else "correct" if score >= 1 else "wrong"
        if score is not None:
            scored += 1
            correct += score >= 1
        reply = str(s.output.get("text") or (f"{s.error.kind}: {s.error.message}" if s.error else ""))
        rows.append(
            f"<tr class='pl-example pl-{verdict}'>{_num(str(s.output['example']))}{_cell(reply, 200)}"
            f"{_num(_fmt(score))}{_cell(verdict)}</tr>"
        )
    if not rows:
        return ""
    summary = f"{split} examples: {correct} of {scored} scored correct ({len(rows)} replies; each reply and its score)"
    return (
        f"<details class='pl-examples'><summary>{html.escape(summary)}</summary>"
        f"{_table('pl-examples', EXAMPLE_COLUMNS, rows)}</details>"
    )


def iterations_label(run: Run) -> str:
    """The run's iterations by their own numbers ("iterations 0-1", as the position reads), not a count."""
    if not run.iterations:
        return "no iterations"
    first, last = run.iterations[0].index, run.iterations[-1].index
    return f"iteration {first}" if first == last else f"iterations {first}-{last}"


def position_label(run: Run, index: int) -> str:
    """ "iteration k of n" for the `index`-th iteration (1-based position) by the iterations' own numbers, so a
    run whose iteration 0 is its starting prompt reads "iteration 0 of n" first."""
    it = run.iterations[index - 1]
    start = " (the starting prompt)" if it.index == 0 else ""
    return f"iteration {it.index} of {run.iterations[-1].index}{start}"


def iteration_html(run: Run, index: int) -> str:
    """The run's `index`-th iteration (1-based position; a run whose iteration 0 is its starting prompt shows
    that first) as HTML: the candidate with its diff and its scores first, then the grounded score, the
    decision and its reason, the reflection, and the steps' tokens and cost (per-example steps folded)."""
    if not run.iterations:
        return f"<p>Run {html.escape(run.run_id)} has no iterations (stop reason {html.escape(run.stop_reason)}).</p>"
    if not 1 <= index <= len(run.iterations):
        raise ValueError(f"iteration {index} is not in 1..{len(run.iterations)}")
    it: Iteration = run.iterations[index - 1]
    prev = next(
        (p.candidate for p in reversed(run.iterations[: index - 1]) if p.candidate is not None), run.task.prompt
    )
    scores = [
        f"<tr>{_cell(s.criterion)}{_num(_fmt(s.score))}{_cell(s.judge)}{_cell(s.justification)}</tr>" for s in it.scores
    ]
    grounded = "–"
    if it.grounded is not None:
        g = it.grounded
        grounded = (
            f"{_fmt(g.score)} on {g.split} (n={g.n}, 95% CI {_fmt(g.ci_low)}–{_fmt(g.ci_high)}, {g.errors} error(s))"
        )
    tokens = sum((s.call.input_tokens or 0) + (s.call.output_tokens or 0) for s in it.steps if s.call)
    cost = cost_text([s.call.cost_usd for s in it.steps if s.call])
    block = "style='white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #ddd;padding:4px'"
    return f"""<div class='pl-iteration' style='text-align:left;max-width:100%;overflow-x:auto;line-height:1.4'>
<h4>{position_label(run, index).capitalize()} · {html.escape(run.loop)} on {html.escape(run.task.id)}</h4>
<p><b>Candidate</b> (changes against the previous candidate):</p>
<div class='pl-diff' {block}>{candidate_diff(prev, it.candidate)}</div>
<details><summary>candidate text</summary><pre class='pl-candidate' {block}>{html.escape(it.candidate or "(none)")}</pre></details>
<p><b>Scores</b> · <b>average (critic):</b> {_fmt(it.average)} · <b>grounded:</b> <span class='pl-grounded'>{grounded}</span></p>
{_table("pl-scores", [("criterion", 22), ("score", 8), ("judge", 14), ("justification", 56)], scores)}
{examples_html(it.steps)}
<p><b>Decision:</b> <span class='pl-decision'>{html.escape(it.decision or "–")}</span> ·
<b>decision score:</b> {_fmt(it.decision_score)} · <b>reason:</b> {html.escape(it.reason or "–")}</p>
<p><b>Reflection:</b> {html.escape(it.reflection or "–")}</p>
<p><b>Steps</b> ({tokens} tokens, {cost})</p>
{steps_table(it.steps)}
</div>"""


class RunBrowser:
    """Widgets to browse the runs of a results directory: cell, run, and previous/next iteration.

    Args:
        results_dir: a sweep's results directory (cells/<id>/runs.jsonl).
    """

    def __init__(self, results_dir: str | os.PathLike[str]) -> None:
        import ipywidgets as w

        from ..results.columns import CELL_COLUMNS
        from ..results.store import load, read_runs

        self.results_dir = results_dir
        self.read_runs = read_runs
        cells = load(results_dir).cells
        ok = cells[cells["status"] == "ok"]
        params = [k for k in ok.columns if k == "loop" or k not in CELL_COLUMNS]  # what the cell varies
        rows = ok[params].to_dict("records")
        labels = [
            (f"{name} ({cell})", str(cell)) for name, cell in zip(label_rows(rows, params), ok["cell_id"], strict=True)
        ]
        if not labels:
            raise ValueError(f"{results_dir}: no finished cell to browse")
        self.cell_w = w.Dropdown(options=labels, description="cell", layout={"width": "95%"})
        self.run_w = w.Dropdown(options=[], description="run", layout={"width": "95%"})
        self.prev_w = w.Button(description="previous", icon="arrow-left")
        self.next_w = w.Button(description="next", icon="arrow-right")
        self.position = w.Label("")
        self.jump_w = w.Dropdown(options=[], description="go to", layout={"width": "260px"})
        self.view = w.HTML("", layout={"width": "auto"})  # the output's width, margins included
        self.runs: list[Run] = []
        self.index = 1
        self.cell_w.observe(lambda _c: self.load_cell(), names="value")
        self.run_w.observe(lambda _c: self.show(1), names="value")
        self.jump_w.observe(lambda c: self.show(c["new"]) if c["new"] else None, names="value")
        self.prev_w.on_click(lambda _b: self.show(self.index - 1))
        self.next_w.on_click(lambda _b: self.show(self.index + 1))
        self.widget = w.VBox(
            [self.cell_w, self.run_w, w.HBox([self.prev_w, self.next_w, self.jump_w, self.position]), self.view]
        )
        self.load_cell()

    @property
    def run(self) -> Run | None:
        """The selected run."""
        return self.runs[self.run_w.value] if self.runs and self.run_w.value is not None else None

    def load_cell(self) -> None:
        """Read the selected cell's runs and show the first iteration of its first run."""
        self.runs = self.read_runs(self.results_dir, self.cell_w.value)
        names = label_rows([{TASK: r.task.id, REPLICATE: r.sample} for r in self.runs], [TASK, REPLICATE])
        self.run_w.options = [
            (f"{name} · {r.stop_reason} · {iterations_label(r)}", k)
            for k, (name, r) in enumerate(zip(names, self.runs, strict=True))
        ]
        self.run_w.value = 0 if self.runs else None
        self.show(1)

    def show(self, index: int) -> None:
        """Show iteration `index` of the selected run (clamped to its iterations)."""
        run = self.run
        if run is None:
            self.view.value = "<p>(no run)</p>"
            return
        self.index = max(1, min(index, max(1, len(run.iterations))))
        jump = [(position_label(run, k).split(" (")[0], k) for k in range(1, len(run.iterations) + 1)]
        if list(self.jump_w.options) != jump:
            self.jump_w.options = jump
        self.jump_w.value = self.index if jump else None
        self.view.value = iteration_html(run, self.index)
        self.position.value = position_label(run, self.index) if run.iterations else "no iterations"
        self.prev_w.disabled = self.index <= 1
        self.next_w.disabled = self.index >= len(run.iterations)

    def display(self) -> None:
        """Show the browser."""
        from IPython.display import display

        display(self.widget)


__all__ = [
    "EXAMPLE_COLUMNS",
    "FOLD_AT",
    "RunBrowser",
    "STEP_COLUMNS",
    "TABLE",
    "WRAP",
    "candidate_diff",
    "cost_text",
    "examples_html",
    "iterations_label",
    "iteration_html",
    "position_label",
    "steps_table",
]
