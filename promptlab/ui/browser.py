"""A run browser: pick a cell and a run of a results directory, then step through its iterations.

For each iteration it shows the candidate (with a diff against the previous one), the per-criterion scores
with their justifications, the reflection, the decision and its reason, the grounded (dev-split) score where
there is one, and the tokens and cost of every step. `iteration_html(run, k)` renders one iteration as HTML
(pure, tested); `RunBrowser` wraps it in widgets for JupyterLab (notebooks 03_compare and 05_runs).
"""

from __future__ import annotations

import difflib
import html
import os
from typing import Any

from ..record import Iteration, Run, Step


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


def steps_table(steps: list[Step]) -> str:
    """Tokens, cost, cache hits and errors of each step, as an HTML table."""
    rows = []
    for s in steps:
        c = s.call
        rows.append("<tr>" + "".join(f"<td>{v}</td>" for v in (
            html.escape(s.phase), html.escape(s.role), html.escape(s.model or "tool"),
            _fmt(c.input_tokens if c else None), _fmt(c.output_tokens if c else None),
            _fmt(c.cost_usd if c else None, 4), "yes" if c and c.cache_hit else "",
            html.escape(f"{s.error.kind}: {s.error.message}"[:160]) if s.error else "")) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("phase", "role", "model", "in tokens", "out tokens", "cost USD",
                                            "cached", "error"))
    return f"<table class='pl-steps' style='text-align:left'><tr>{head}</tr>{''.join(rows)}</table>"


def iteration_html(run: Run, index: int) -> str:
    """One iteration of a run (its number `index`: 1, 2, ..., or 0 for the starting prompt scored as
    candidate 0) as HTML: candidate and diff, scores, reflection, decision, grounded score, and the steps'
    tokens and cost."""
    if not run.iterations:
        return f"<p>Run {html.escape(run.run_id)} has no iterations (stop reason {html.escape(run.stop_reason)}).</p>"
    numbers = [i.index for i in run.iterations]
    if index not in numbers:
        raise ValueError(f"iteration {index} is not in {numbers[0]}..{numbers[-1]}")
    position = numbers.index(index)
    it: Iteration = run.iterations[position]
    prev = next((p.candidate for p in reversed(run.iterations[:position]) if p.candidate is not None),
                run.task.prompt)
    scores = "".join(
        f"<tr><td>{html.escape(s.criterion)}</td><td>{_fmt(s.score)}</td><td>{html.escape(s.judge or '')}</td>"
        f"<td style='text-align:left'>{html.escape(s.justification)}</td></tr>" for s in it.scores)
    grounded = "–"
    if it.grounded is not None:
        g = it.grounded
        grounded = (f"{_fmt(g.score)} on {g.split} (n={g.n}, 95% CI {_fmt(g.ci_low)}–{_fmt(g.ci_high)}, "
                    f"{g.errors} error(s))")
    tokens = sum((s.call.input_tokens or 0) + (s.call.output_tokens or 0) for s in it.steps if s.call)
    costs = [s.call.cost_usd for s in it.steps if s.call]
    cost = "unknown" if any(c is None for c in costs) else f"{sum(c or 0.0 for c in costs):.4g}"
    return f"""<div class='pl-iteration' style='text-align:left'>
<h4>{_title(run, it)} · {html.escape(run.loop)} on {html.escape(run.task.id)}</h4>
<p><b>Decision:</b> <span class='pl-decision'>{html.escape(it.decision or '–')}</span> ·
<b>reason:</b> {html.escape(it.reason or '–')}</p>
<p><b>Average (critic):</b> {_fmt(it.average)} · <b>decision score:</b> {_fmt(it.decision_score)} ·
<b>grounded:</b> <span class='pl-grounded'>{grounded}</span></p>
<p><b>Candidate</b> (changes against the previous candidate):</p>
<div class='pl-diff' style='white-space:pre-wrap;border:1px solid #ddd;padding:4px'>{candidate_diff(prev, it.candidate)}</div>
<details><summary>candidate text</summary><pre class='pl-candidate' style='white-space:pre-wrap'>{html.escape(it.candidate or '(none)')}</pre></details>
<p><b>Scores</b></p>
<table class='pl-scores' style='text-align:left'><tr><th>criterion</th><th>score</th><th>judge</th><th>justification</th></tr>{scores}</table>
<p><b>Reflection:</b> {html.escape(it.reflection or '–')}</p>
<p><b>Steps</b> ({tokens} tokens, cost {cost} USD)</p>
{steps_table(it.steps)}
</div>"""


def _title(run: Run, it: Iteration) -> str:
    """'Iteration 2 of 3', or 'Iteration 0: the starting prompt (candidate 0)'."""
    if it.index == 0:
        return "Iteration 0: the starting prompt (candidate 0)"
    return f"Iteration {it.index} of {sum(i.index > 0 for i in run.iterations)}"


class RunBrowser:
    """Widgets to browse the runs of a results directory: cell, run, and previous/next iteration.

    Args:
        results_dir: a sweep's results directory (cells/<id>/runs.jsonl).
    """

    def __init__(self, results_dir: str | os.PathLike[str]) -> None:
        import ipywidgets as w

        from ..results.store import load, read_runs

        self.results_dir = results_dir
        self.read_runs = read_runs
        cells = load(results_dir).cells
        ok = cells[cells["status"] == "ok"]
        labels = []
        for _, row in ok.iterrows():
            extra = ", ".join(f"{k}={row[k]}" for k in ok.columns if k not in ("cell_id", "status", "error_kind",
                              "error", "n_runs", "wall_time_s", "finished_at") and row[k] == row[k])
            labels.append((f"{row['cell_id']} ({extra})", str(row["cell_id"])))
        if not labels:
            raise ValueError(f"{results_dir}: no finished cell to browse")
        self.cell_w = w.Dropdown(options=labels, description="cell", layout={"width": "95%"})
        self.run_w = w.Dropdown(options=[], description="run", layout={"width": "95%"})
        self.prev_w = w.Button(description="previous", icon="arrow-left")
        self.next_w = w.Button(description="next", icon="arrow-right")
        self.position = w.Label("")
        self.view = w.HTML("")
        self.runs: list[Run] = []
        self.index = 1
        self.cell_w.observe(lambda _c: self.load_cell(), names="value")
        self.run_w.observe(lambda _c: self.show(1), names="value")
        self.prev_w.on_click(lambda _b: self.show(self.index - 1))
        self.next_w.on_click(lambda _b: self.show(self.index + 1))
        self.widget = w.VBox([self.cell_w, self.run_w, w.HBox([self.prev_w, self.next_w, self.position]), self.view])
        self.load_cell()

    @property
    def run(self) -> Run | None:
        """The selected run."""
        return self.runs[self.run_w.value] if self.runs and self.run_w.value is not None else None

    def load_cell(self) -> None:
        """Read the selected cell's runs and show the first iteration of its first run."""
        self.runs = self.read_runs(self.results_dir, self.cell_w.value)
        self.run_w.options = [(f"{r.task.id} · sample {r.sample} · {r.stop_reason} · {len(r.iterations)} it.", k)
                              for k, r in enumerate(self.runs)]
        self.run_w.value = 0 if self.runs else None
        self.show(1)

    def show(self, index: int) -> None:
        """Show the `index`-th iteration (1-based position) of the selected run, clamped to its iterations;
        the first is iteration 0 when the run scored its starting prompt as candidate 0."""
        run = self.run
        if run is None:
            self.view.value = "<p>(no run)</p>"
            return
        self.index = max(1, min(index, max(1, len(run.iterations))))
        number = run.iterations[self.index - 1].index if run.iterations else 1
        self.view.value = iteration_html(run, number)
        rewrites = sum(i.index > 0 for i in run.iterations)
        self.position.value = "iteration 0 (the starting prompt)" if number == 0 else f"iteration {number} of {rewrites}"
        self.prev_w.disabled = self.index <= 1
        self.next_w.disabled = self.index >= len(run.iterations)

    def display(self) -> None:
        """Show the browser."""
        from IPython.display import display

        display(self.widget)


__all__ = ["RunBrowser", "candidate_diff", "iteration_html", "steps_table"]
