"""Where researchers read the judgments: `promptlab judgments plan|import|summary` and the report's "People and the
critic" section with people.png; without judgments, a report on open-ended runs of two critics says that pairings
cannot be compared."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from judging import write_open_ended_sweep

from promptlab.cli import main
from promptlab.people import read_judgments, read_plan


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_open_ended_sweep(tmp_path_factory.mktemp("report") / "results")


@pytest.fixture
def results(sweep_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(sweep_dir, copy)
    return copy


def _lab_csv(results: Path, path: Path) -> Path:
    """Two people who prefer what the critic prefers, except on every fifth item."""
    rows = ["item,person,value,seconds"]
    for person in ("ann", "bob"):
        for k, item in enumerate(read_plan(results).items):
            scores = item.critic_scores
            better = "returned" if (scores["returned"] or 0) > (scores["start"] or 0) else "start"
            if k % 5 == 0 and person == "bob":
                better = "start" if better == "returned" else "returned"
            rows.append(f"{item.id},{person},{'A' if item.order[0] == better else 'B'},3")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_plan_import_summary_and_report(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judgments", "plan", str(results), "--seed", "4"]) == 0
    assert "24 pair items in 26 slots (2 repeats), 2 critic x pairing strata" in capsys.readouterr().out
    assert (results / "judgments" / "plan.csv").read_text().startswith("item,kind,input,a,b,scale")
    assert main(["judgments", "import", str(results), str(_lab_csv(results, tmp_path / "lab.csv"))]) == 0
    assert "48 judgment(s) stored" in capsys.readouterr().out
    assert main(["judgments", "summary", str(results), "--boot", "200"]) == 0
    out = capsys.readouterr().out
    assert "| fake/people-critic-a | critic vs people | 12 | 24 |" in out and "Did refinement help, by people?" in out
    assert main(["report", str(results), "--bias-budget", "0"]) == 0
    summary = (results / "report" / "summary.md").read_text()
    section = summary.split("## People and the critic", 1)[1]
    assert "48 judgments (pairs) by 2 people on 24 of 24 planned items" in section
    assert "- **fake/people-critic-b**:" in section and "| rank | pairing |" in section
    assert (results / "report" / "people.png").stat().st_size > 0 and "[people.png](people.png)" in summary


def test_a_bad_csv_is_refused_by_name_and_loses_nothing(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judgments", "plan", str(results)]) == 0
    good = _lab_csv(results, tmp_path / "lab.csv")
    assert main(["judgments", "import", str(results), str(good)]) == 0
    before = {p.name: p.read_bytes() for p in (results / "judgments").iterdir()}
    bad = tmp_path / "bad.csv"
    item = read_plan(results).items[0].id
    bad.write_text(f"item,person,value\n{item},cy,A\nghost,cy,B\n{item},dee,7\n")
    capsys.readouterr()
    assert main(["judgments", "import", str(results), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3: unknown item 'ghost'" in err and f"{bad}:4: value '7' is not A, B, tie or skip" in err
    assert {p.name: p.read_bytes() for p in (results / "judgments").iterdir()} == before
    assert len(read_judgments(results).judgments) == 48


def test_without_judgments_the_report_says_pairings_cannot_be_compared(results: Path) -> None:
    assert main(["report", str(results), "--bias-budget", "0"]) == 0
    summary = (results / "report" / "summary.md").read_text()
    assert "Pairings cannot be compared on these open-ended runs" in summary
    assert not (results / "report" / "people.png").exists()
