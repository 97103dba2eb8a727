"""Missing scores are errors: a dry run whose critic writes a score its expected (G-Eval) reading cannot use
goes on, with the scores missing, and counts each as an error of the run, in the frames, the cell's status and
the report."""

from __future__ import annotations

import json
from pathlib import Path

import promptlab as pl
from promptlab.reports.summary import report
from promptlab.results import load
from promptlab.sweeps import Experiment, sweep

ROOT = Path(__file__).resolve().parents[2]
HALF = json.dumps({"score": 7.5, "strengths": ["clear"], "weaknesses": ["long"], "suggestions": ["cut"]})
"""A critique whose score is not a whole number: no expected score can be read from it."""


def test_a_critic_score_that_cannot_be_read_is_an_error_in_the_frames_the_status_and_the_report(
    tmp_path: Path,
) -> None:
    pl.scripted("half-critic", respond=lambda messages: HALF)
    exp = Experiment.from_dict(
        {
            "name": "missing",
            "loops": ["creator_critic"],
            "tasks": str(ROOT / "data" / "demo_tasks.jsonl"),
            "limit": 1,
            "config": {
                "model": "fake/auto",
                "critic_model": "fake/half-critic",
                "score_mode": "expected",
                "max_iterations": 2,
            },
        },
        tmp_path,
    )
    out = tmp_path / "out"
    result = sweep(exp, out, executor="inline", workers=1)
    res = load(out)
    assert list(res.cells["status"]) == ["ok"]  # the run went on past the errors
    errors = int(res.runs["n_errors"].sum())
    assert errors > 0 and int(res.cells["n_errors"].iloc[0]) == errors
    assert res.trajectories["score"].isna().all()  # missing, never invented
    assert f"{errors} error(s) recorded in its runs" in str(result)
    report(out)
    summary = (out / "report" / "summary.md").read_text()
    assert "## Errors recorded in runs" in summary and f"{errors} error(s) in 1 of 1 runs (ScoreMissing x" in summary
