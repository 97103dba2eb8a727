"""experiments/baselines.yaml: its cells and budget, a dry run of the whole experiment with fake/auto in every role
through the CLI (sweep, then report), and the search loops' fields in experiment files (a bad one is named
before any call, a task without examples refused for every cell that needs one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from experiment_files import write_experiment

import promptlab
from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.results.store import load, read_runs
from promptlab.sweeps.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[2]
LOOPS = ["opro", "ape", "protegi", "gepa", "resample", "p3ro", "creator_critic"]


def test_the_baselines_experiment_runs_seven_loops_on_the_three_tasks_at_one_budget() -> None:
    exp = load_experiment(ROOT / "experiments" / "baselines.yaml")
    assert exp.loops == LOOPS and [t.id for t in exp.load_tasks()] == ["sentiment", "arithmetic", "dates"]
    cells = exp.cells()
    assert [c.loop for c in cells] == LOOPS
    assert {c.config["budget_tokens"] for c in cells} == {exp.config["budget_tokens"]}  # one budget for all
    assert all(c.config["model"] == "local/smollm2" and c.config["test_incumbents"] for c in cells)


@pytest.mark.slow
def test_a_dry_run_of_the_baselines_experiment_with_fake_auto(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "experiments" / "baselines.yaml").read_text(encoding="utf-8"))
    data["config"].update(model="fake/auto", budget_tokens=3000)  # every role, and a budget that ends quickly
    data["tasks"] = str(ROOT / "data" / "grounded_tasks.jsonl")
    path = tmp_path / "baselines.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = tmp_path / "results"
    assert main(["sweep", str(path), "--out", str(out), "--cache", str(tmp_path / "cache"), "--no-progress"]) == 0
    res = load(out)
    assert (res.cells["status"] == "ok").all() and len(res.cells) == 7 and len(res.runs) == 7 * 3 * 2
    for cell in res.cells["cell_id"]:
        for run in read_runs(out, cell):
            assert run.spent is not None and run.final_test is not None and run.baseline_test is not None
            spent = [it.spent.tokens for it in run.iterations if it.spent is not None]
            assert run.stop_reason == "budget", (run.loop, run.stop_reason)
            assert run.spent.tokens - (spent[-2] if len(spent) > 1 else 0) <= 3000  # one step over at most
            assert [e for e in run.errors if e.infrastructure] == []
    assert main(["report", str(out)]) == 0
    summary = (out / "report" / "summary.md").read_text(encoding="utf-8")
    section = summary.split("### 4. Which loop leads at equal budget?", 1)[1]
    assert "Budget in tokens" in section and section.count("\n| ") >= 11  # header + 10 points
    assert (out / "report" / "budget_curve.png").is_file()
    table = promptlab.analysis.equal_budget(res, "tokens")
    assert set(table["loop"]) == set(LOOPS) and (table["n_runs"] == 6).all()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"loop_config": {"protegi": {"samples_per_eval": 0}}},
            r"config.samples_per_eval: 0: Input should be greater than or equal to 1 \(loop protegi\)",
        ),
        (
            {"grid": {"candidates_per_step": [8, 0]}, "loops": ["opro"]},
            r"grid.candidates_per_step\[1\]: 0 is not within 1-100 for loop opro",
        ),
        ({"loop_config": {"ape": {"proposals": 3}}}, r"loop_config.ape.proposals: not a config field of loop ape"),
        ({"config": {"beam_size": 4}}, r"config.beam_size: not a config field of loop opro"),
        (
            {"loop_config": {"protegi": {"selection": "thompson"}}},
            r"config.selection: 'thompson': Input should be 'ucb' or 'successive_rejects' \(loop protegi\)",
        ),
    ],
)
def test_a_bad_search_loop_field_is_named_before_any_call(
    tmp_path: Path, data: dict[str, object], message: str
) -> None:
    writer = promptlab.scripted("never-called", [])
    path = write_experiment(
        tmp_path, {"name": "bad", "loops": ["opro", "protegi", "ape"], "config": {"model": writer.name}, **data}
    )
    with pytest.raises(ConfigError, match=message):
        load_experiment(path)
    assert writer.requests == []


def test_a_task_without_examples_is_refused_for_every_search_loop_cell(tmp_path: Path) -> None:
    writer = promptlab.scripted("never-called-2", [])
    path = write_experiment(tmp_path, {"name": "bare", "loops": [*LOOPS[:4], "p3ro"], "config": {"model": writer.name}})
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    msg = str(caught.value)
    assert "4 config problem(s), found before any call" in msg  # p3ro runs on a task without examples
    for loop in LOOPS[:4]:
        assert f"- cell {json.dumps({'loop': loop})} " in msg and f"{loop} scores every candidate on the dev" in msg
    assert writer.requests == []
