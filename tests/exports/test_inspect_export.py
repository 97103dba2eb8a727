"""The Inspect export, read back with inspect_ai itself (`read_eval_log`, `samples_df`): one log per loop run, and
every example's output and score equal to promptlab's per-example frame; the run's context is in the metadata."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from exported import TARGET, register_target, write_experiment

from promptlab.eval.tasks import examples_of, format_prompt
from promptlab.exports.inspect_log import SAMPLE_PREFIX, epoch_of, export_inspect
from promptlab.results import example_frame, load, read_runs, run_labels
from promptlab.sweeps.run import sweep

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install 'promptlab-loops[inspect]')")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    register_target()
    sweep(write_experiment(root, target=TARGET), root / "results", progress=False, cache=root / "cache")
    return root / "results"


def test_every_example_s_output_and_score_read_back_equal_the_per_example_frame(results: Path) -> None:
    from inspect_ai.analysis import EvalInfo, SampleColumn, SampleSummary, samples_df
    from inspect_ai.log import read_eval_log

    paths = export_inspect(results)
    runs = load(results).runs
    assert len(paths) == len(runs) == 16
    frame = example_frame(results)
    frame["epoch"] = [int(c) + 1 for c in frame["candidate"]]  # every final prompt here is an iteration's
    frame["id"] = [
        f"{SAMPLE_PREFIX[m]}-{e if isinstance(e, str) else x}"
        for m, e, x in zip(frame["measure"], frame["example_id"], frame["example"], strict=True)
    ]

    columns = [*SampleSummary, *EvalInfo, SampleColumn("output", path=completion, full=True)]
    df = samples_df([str(p) for p in paths], columns=columns)
    assert len(df) == len(frame)
    got = {(r["eval_id"], r["id"], int(r["epoch"])): (r["output"], r["score_exact"]) for r in df.to_dict("records")}
    want = {(r["run_id"], r["id"], r["epoch"]): (r["output"], float(r["score"])) for r in frame.to_dict("records")}
    assert got == want

    # one log per run: its samples are that run's rows, with the run's context
    log = read_eval_log(str(paths[0]))
    run = next(r for c in runs["cell_id"].unique() for r in read_runs(results, c) if r.run_id == log.eval.eval_id)
    labels = dict(zip(runs["run_id"], run_labels(runs), strict=True))  # what differs between the sweep's runs first
    assert (
        log.status == "success"
        and log.eval.task == log.eval.task_display_name == labels[run.run_id]
        and log.eval.solver == run.loop
    )
    assert log.samples is not None and len(log.samples) == int((frame["run_id"] == run.run_id).sum())
    by_index = {it.index: it for it in run.iterations}
    for sample in log.samples:
        meta = sample.metadata
        it = by_index[meta["candidate"]]
        assert it.grounded is not None
        assert sample.epoch == epoch_of(run, meta["candidate"])
        assert meta["loop"] == run.loop and meta["measure"] in {"dev", "baseline_test", "final_test"}
        assert meta["critic_score"] == it.average and meta["dev_accuracy"] == it.grounded.score
        prompt = run.task.prompt if meta["candidate"] == 0 else it.candidate
        assert prompt is not None
        example = examples_of(run.task, meta["split"])[meta["example"]]
        assert sample.input == format_prompt(prompt, example.input)  # the prompt as the target model got it
        assert sample.target == example.target and sample.output.completion == sample.messages[-1].text
        usage = sample.model_usage[TARGET]
        assert usage.total_tokens == usage.input_tokens + usage.output_tokens > 0
    assert log.results is not None
    assert run.final_test is not None and run.baseline_test is not None and run.delta is not None
    assert run.delta.value is not None
    test = next(s for s in log.results.scores if s.name == "test")
    assert test.metrics["final_accuracy"].value == run.final_test.score
    assert test.metrics["start_accuracy"].value == run.baseline_test.score
    assert math.isclose(test.metrics["gain"].value, run.delta.value)
    steps = [*run.setup, *(s for it in run.iterations for s in it.steps), *run.final]
    called = [s for s in steps if s.call is not None]
    assert set(log.stats.role_usage) == {s.role for s in called} >= {"target"}
    assert set(log.stats.model_usage) == {s.call.model for s in called if s.call is not None}
    assert sum(u.input_tokens for u in log.stats.model_usage.values()) == sum(
        s.call.input_tokens or 0 for s in called if s.call
    )


def completion(sample: Any) -> str:
    """A sample's output text (a `samples_df` column)."""
    return str(sample.output.completion)


def test_exporting_again_rewrites_the_same_logs_and_removes_those_of_runs_gone(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "logs"
    first = export_inspect(results, out)
    stale = out / ("2020-01-01T00-00-00+00-00_p3ro-x-s0_" + "0" * 32 + ".eval")
    stale.write_bytes(first[0].read_bytes())
    mine = out / "notes.eval"  # not a log this export writes: left alone
    mine.write_bytes(b"x")
    second = export_inspect(results, out)
    assert second == first
    assert sorted(out.iterdir()) == sorted([*first, mine])
