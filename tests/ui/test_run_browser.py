"""The run browser (05_runs's logic): one iteration as HTML, and the widgets that step through runs."""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from factories import LONG_CRITERION, make_run, make_wide_run, write_sweep

from promptlab.record import GroundedScore
from promptlab.results.labels import labels
from promptlab.ui.browser import RunBrowser, candidate_diff, examples_html, iteration_html, iterations_label


class _Tables(HTMLParser):
    """The text of every cell of the tables of one class, row by row."""

    def __init__(self, css_class: str) -> None:
        super().__init__()
        self.css_class, self.depth, self.rows = css_class, 0, []  # depth: inside a matching table
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and (self.depth or self.css_class in (dict(attrs).get("class") or "").split()):
            self.depth += 1
        elif self.depth == 1 and tag == "tr":
            self.rows.append([])
        elif self.depth == 1 and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.depth:
            self.depth -= 1
        elif self.depth == 1 and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def rows(html: str, css_class: str) -> list[list[str]]:
    """The rows (cell texts) of the tables with class `css_class` in `html`, in order."""
    parser = _Tables(css_class)
    parser.feed(html)
    return parser.rows


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
    assert rows(html, "pl-scores") == [
        ["criterion", "score", "judge", "justification"],
        ["clarity", "8", "fake/critic", ""],
        ["tone", "–", "fake/critic", ""],
    ]
    assert "30 tokens, cost 0.002 USD" in html  # two calls of 10 + 5 tokens at 0.001
    with pytest.raises(ValueError, match="iteration 3 is not in 1..2"):
        iteration_html(run, 3)


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
    # runs named as every label names them: what differs between the cell's runs (task, replicate) first
    assert [name.split(" · ")[0] for name, _ in b.run_w.options] == labels(
        [{"task_id": r.task.id, "sample": r.sample} for r in b.runs], ["task_id", "sample"]
    )
    b.cell_w.value = "b"
    assert len(b.runs) == 4 and [r[6] for r in rows(b.view.value, "pl-steps")] == ["cached", "yes", "yes"]


def test_long_cells_wrap_inside_a_table_as_wide_as_the_output() -> None:
    html = iteration_html(make_wide_run(), 1)
    scores = rows(html, "pl-scores")
    assert scores[1][0] == LONG_CRITERION  # the whole criterion, wrapped, not cut
    for css_class in ("pl-scores", "pl-steps"):
        opening = html[html.index(f"<table class='{css_class}'") :].split(">", 1)[0]
        assert "table-layout:fixed" in opening and "width:100%" in opening
    where = html.index(escape(LONG_CRITERION))
    cell = html[html.rindex("<td", 0, where) : where]
    assert "white-space:normal" in cell and "overflow-wrap:anywhere" in cell
    # a long step error is cut at 160 characters, its whole text in the cell's hover title
    error = next(r[7] for r in rows(html, "pl-steps") if r[7].startswith("ParseError"))
    assert error.endswith("…") and len(error) <= 161
    assert f"title='ParseError: no JSON object in the reply: {'x' * 300}'" in html


def test_candidate_and_scores_come_first_and_per_example_rows_fold() -> None:
    html = iteration_html(make_wide_run(), 1)
    order = [
        html.index(s)
        for s in ("<b>Candidate</b>", "class='pl-scores'", "<b>Decision:</b>", "<b>Reflection:</b>", "<b>Steps</b>")
    ]
    assert order == sorted(order)
    steps = rows(html, "pl-steps")
    main = steps[: steps.index(steps[0], 1)]  # the first table: up to the folded table's header
    assert [r[:2] for r in main[1:]] == [
        ["generate", "generator"],
        ["evaluate", "critic"],
        ["score_dev", "target × 20"],
        ["evaluate", "critic"],
    ]
    assert main[3][3:7] == ["140", "40", "–", "0/20"]  # 20 x 7 in, 20 x 2 out, price unknown, no hit
    folded = html[html.index("<details class='pl-per-example'>") :]
    assert "<details class='pl-per-example'><summary>score_dev · target: 20 steps</summary>" in folded
    assert len(rows(folded, "pl-steps")) == 21  # its header and the 20 calls, shown when unfolded
    assert "cost unknown" in html and "cost unknown USD" not in html


def test_iteration_0_the_starting_prompt_comes_first() -> None:
    run = make_wide_run(with_start=True)
    html = iteration_html(run, 1)
    assert "Iteration 0 of 2 (the starting prompt)" in html and "0.4 on dev (n=20" in html
    assert "Iteration 1 of 2 ·" in iteration_html(run, 2)
    with pytest.raises(ValueError, match="iteration 4 is not in 1..3"):
        iteration_html(run, 4)


def test_a_few_calls_of_one_role_are_not_folded() -> None:
    run = make_run([[6.0, 7.0]])
    html = iteration_html(run, 1)
    assert "pl-folded" not in html and "<details class='pl-per-example'>" not in html


def test_cells_with_unknown_columns_are_offered_by_their_params(tmp_path: Path) -> None:
    """A cell written without a spend (its spent_* columns <NA>) beside others is offered, labelled by what the
    cells vary, never by the documented columns (a <NA> in a label's test used to raise)."""
    from promptlab.results.store import write_cell

    results = write_sweep(tmp_path / "results")
    write_cell(results, "wide", {"loop": "p3ro", "finish_threshold": 8.0}, [make_wide_run()])
    b = RunBrowser(results)
    offered = dict((v, k) for k, v in b.cell_w.options)
    assert set(offered) == {"a", "b", "wide"}
    assert offered["wide"] == "finish_threshold=8 (wide)"  # what the cells vary, as every label writes it
    assert "spent" not in " ".join(offered.values()) and "wall_time" not in " ".join(offered.values())


def test_each_dev_example_shows_its_reply_and_whether_it_was_scored_correct() -> None:
    from promptlab.record import Step, StepError

    steps = [
        Step(iteration=1, phase="score_dev", role="target", output={"text": "positive", "example": 0, "score": 1.0}),
        Step(iteration=1, phase="score_dev", role="target", output={"text": "I think so", "example": 1, "score": 0.0}),
        Step(
            iteration=1,
            phase="score_dev",
            role="target",
            output={"example": 2, "score": None},
            error=StepError(kind="ProviderError", message="down", role="target", phase="score_dev"),
        ),
        Step(iteration=1, phase="generate", role="creator", output={"text": "not an example"}),
    ]
    shown = examples_html(steps)
    assert "dev examples: 1 of 2 scored correct (3 replies" in shown
    assert [r[1:] for r in rows(shown, "pl-examples")[1:]] == [  # after the header row
        ["positive", "1", "correct"],
        ["I think so", "0", "wrong"],
        ["ProviderError: down", "–", "error"],
    ]
    assert examples_html(steps[3:]) == ""  # an iteration not measured on examples shows none


def test_the_run_browser_jumps_to_an_iteration_and_counts_as_the_position_reads(tmp_path: Path) -> None:
    b = RunBrowser(write_sweep(tmp_path / "results"))
    b.run_w.value = 1
    assert [label for label, _ in b.jump_w.options] == ["iteration 1 of 3", "iteration 2 of 3", "iteration 3 of 3"]
    b.jump_w.value = 3  # one step, not two clicks on next
    assert b.position.value == "iteration 3 of 3" and b.index == 3 and b.next_w.disabled
    b.prev_w.click()
    assert b.jump_w.value == 2
    assert iterations_label(make_wide_run(with_start=True)) == "iterations 0-2"  # as "iteration 0 of 2" reads
    assert "iterations 1-3" in [label for label, _ in b.run_w.options][1]
