"""The judging widget (notebook 08_judge): people judge a results directory's plan in JupyterLab, blind.

Pairs show two texts for the same input as A and B, in the order the plan drew (recorded with each judgment),
with nothing that says which prompt, loop, model or critic made them; the person picks A, B, tie or skip. Ratings
show one text and a 1-10 scale with its anchors. A comment is optional. Keys: a / b / t / s for pairs, 1-9 and 0
(10) and s for ratings, unless the cursor is in a text box. Progress is shown as item n of N with the seconds per
item. Several people judge under their own names; everything lives in their files
(`promptlab.people.session.Session`), so a restarted kernel or a closed tab resumes at the first slot not judged.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from ..people.plan import Plan, make_plan, plan_path, read_plan, write_plan
from ..people.session import Session, Shown
from ..people.storage import judgments_dir

PAIR_KEYS = {"a": "A", "b": "B", "t": "tie", "s": "skip"}
"""Key -> a pairwise value."""
PAIR_LABELS = {"A": "A is better", "B": "B is better", "tie": "As good", "skip": "Skip"}
TEXT_STYLE = (
    "white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #ccc;border-radius:4px;padding:8px;"
    "min-height:6em;max-height:24em;overflow:auto"
)
KEYS_JS = """
if (!window.__promptlabJudgeKeys) {
  window.__promptlabJudgeKeys = true;
  window.addEventListener('keydown', (event) => {
    const target = event.target;
    if (target && (target.tagName === 'INPUT' || target.tagName === 'TEXTAREA' || target.isContentEditable)) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const buttons = Array.from(document.querySelectorAll('.pl-judge-key-' + event.key.toLowerCase()));
    const button = buttons.filter((b) => b.offsetParent !== null && !b.disabled).pop();
    if (button) { event.preventDefault(); event.stopImmediatePropagation(); button.click(); }
  }, true);  // on the window, capturing: before JupyterLab's own shortcuts (a and b add cells)
}
"""
"""A key listener that clicks the visible judging button of the key pressed (installed once per page): while a
judging widget is on screen, its keys are its own, not JupyterLab's command-mode shortcuts."""


def ensure_plan(results: str | os.PathLike[str]) -> Plan:
    """The stored plan, or a pairwise plan drawn with seed 0 and stored (`promptlab judgments plan` draws others)."""
    if plan_path(results).is_file():
        return read_plan(results)
    plan = make_plan(results)
    write_plan(results, plan)
    return plan


def known_people(results: str | os.PathLike[str]) -> list[str]:
    """The people who have a judgments file."""
    folder = judgments_dir(results)
    return sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []


def shown_html(shown: Shown) -> str:
    """The texts of one slot as HTML (A and B side by side, or the one text): only the input and the texts."""

    def pane(label: str, text: str) -> str:
        head = f"<b>{html.escape(label)}</b>" if label else ""
        return f"<div style='flex:1;min-width:0'>{head}<div style='{TEXT_STYLE}'>{html.escape(text)}</div></div>"

    labels = ["A", "B"] if shown.kind == "pair" else [""]
    panes = "".join(pane(label, text) for label, text in zip(labels, shown.texts, strict=False))
    return (
        f"<div class='pl-judge-input'><b>Input</b><div style='{TEXT_STYLE};min-height:0'>"
        f"{html.escape(shown.input)}</div></div><div class='pl-judge-texts' style='display:flex;gap:12px'>{panes}</div>"
    )


class JudgingWidget:
    """Judge the plan of a results directory in JupyterLab (`JudgingWidget(results).show()`).

    Args:
        results: The results directory (its plan is drawn and stored if it has none).
        person: Who judges; None: the widget asks for a name (the names already judging are offered).
    """

    def __init__(self, results: str | os.PathLike[str], person: str | None = None) -> None:
        import ipywidgets as w

        self.results = Path(results)
        self.plan = ensure_plan(self.results)
        self.session: Session | None = None
        self.slot: Any = None
        self.times: list[float] = []
        self.name = w.Combobox(placeholder="your name", options=known_people(self.results), value=person or "")
        self.name.add_class("pl-judge-name")
        self.start = w.Button(description="Start judging", button_style="primary")
        self.start.add_class("pl-judge-start")
        self.start.on_click(lambda _: self.begin(self.name.value.strip()))
        self.progress = w.HTML()
        self.progress.add_class("pl-judge-progress")
        self.view = w.HTML()
        self.comment = w.Textarea(placeholder="comment (optional)", layout=w.Layout(width="100%", height="3em"))
        self.message = w.HTML()
        self.message.add_class("pl-judge-message")
        self.buttons = w.HBox(self._buttons(w))
        self.panel = w.VBox([self.progress, self.view, self.buttons, self.comment], layout=w.Layout(display="none"))
        self.box = w.VBox([w.HBox([self.name, self.start]), self.message, self.panel])
        if person:
            self.begin(person)

    def _buttons(self, w: Any) -> list[Any]:
        """The value buttons, each with its key's class (`KEYS_JS` clicks it)."""
        if self.plan.kind == "pair":
            values: list[tuple[str | int, str, str]] = [(v, f"{PAIR_LABELS[v]} [{k}]", k) for k, v in PAIR_KEYS.items()]
        else:
            low, high = self.plan.scale.low, self.plan.scale.high
            values = [
                (v, f"{v}" + (f" {self.plan.scale.anchors[v]}" if v in self.plan.scale.anchors else ""), str(v % 10))
                for v in range(low, high + 1)
            ]
            values.append(("skip", "Skip [s]", "s"))
        out = []
        for value, label, key in values:
            button = w.Button(description=label, layout=w.Layout(width="auto"))
            button.add_class(f"pl-judge-key-{key}")
            button.add_class("pl-judge-value")
            button.on_click(lambda _, v=value: self.judge(v))
            out.append(button)
        return out

    def begin(self, person: str) -> None:
        """Start (or resume) judging as `person`, at the first slot they have not judged."""
        try:
            self.session = Session(self.results, person, source="widget")
        except Exception as e:  # a bad name: said in one line, nothing stored
            self.message.value = f"<span style='color:#b00'>{html.escape(str(e))}</span>"
            return
        self.message.value = f"Judging as <b>{html.escape(person)}</b>; your judgments go to {html.escape(str(judgments_dir(self.results) / (person + '.jsonl')))}"
        self.panel.layout.display = "flex"
        self.next()

    def next(self) -> None:
        """Show the person's next slot, or say they are done."""
        assert self.session is not None
        self.slot = self.session.next_slot()
        total = len(self.plan.slots)
        if self.slot is None:
            self.progress.value = f"<b>Done</b>: all {total} items judged. Thank you."
            self.view.value, self.buttons.layout.display = "", "none"
            return
        shown = self.session.show(self.slot)
        mean = f"; {sum(self.times) / len(self.times):.1f} s per item" if self.times else ""
        self.progress.value = f"Item {shown.number} of {total}{mean}"
        self.view.value = shown_html(shown)

    def judge(self, value: str | int) -> None:
        """Store the judgment of the slot shown, then show the next."""
        if self.session is None or self.slot is None:
            return
        stored = self.session.record(self.slot, value, comment=self.comment.value.strip())
        if stored.seconds is not None:
            self.times.append(stored.seconds)
        self.comment.value = ""
        self.next()

    def show(self) -> Any:
        """Display the widget (and the key listener) in the notebook; returns the widget box."""
        from IPython.display import Javascript, display

        display(self.box)
        display(Javascript(KEYS_JS))
        return self.box


__all__ = ["JudgingWidget", "ensure_plan", "known_people", "shown_html"]
