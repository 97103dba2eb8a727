"""The time estimate 02_sweep prints before it starts (issue #31 item 4)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from promptlab.results.store import write_cell
from promptlab.sweeps import load_experiment
from promptlab.sweeps.callcount import count_calls
from promptlab.sweeps.estimate import duration, sweep_plan, time_estimate
from promptlab.sweeps.probe import Probe

ROOT = Path(__file__).resolve().parents[2]


def test_the_estimate_comes_from_the_cells_finished_here(tmp_path: Path) -> None:
    cells = [SimpleNamespace(cell_id=c) for c in ("a", "b", "c", "d", "e")]
    assert "nothing measured to estimate from" in time_estimate(cells, tmp_path, workers=2)
    for cell_id in ("a", "b"):
        write_cell(tmp_path, cell_id, {"loop": "p3ro"}, [], wall_time_s=300.0)
    line = time_estimate(cells, tmp_path, workers=2)
    assert line.startswith(
        "time: about 8 min for the 3 unfinished cell(s), 2 at once (the 2 finished here took 5 min each)"
    )
    assert line.endswith("a re-run resumes from it (finished cells are skipped)")
    for cell_id in ("c", "d", "e"):
        write_cell(tmp_path, cell_id, {"loop": "p3ro"}, [], wall_time_s=1.0)
    assert time_estimate(cells, tmp_path, workers=2).startswith("every cell is finished")


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (40, 720, 9000)] == ["40 s", "12 min", "2.5 h"]


def test_the_calls_are_counted_by_a_dry_run_that_leaves_no_trace(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    exp = load_experiment(ROOT / "experiments" / "demo.yaml")
    count = count_calls(exp.model_copy(update={"replicates": 3}))
    two = count_calls(exp.model_copy(update={"replicates": 2}))
    one = count_calls(exp.model_copy(update={"replicates": 1}))
    assert count.runs == 3 * 3 * 3 and one.replicates_run == 1 and count.replicates_run == 2
    # the starting prompt's dev and test runs are shared by every sample and critic: each further replicate
    # adds its own calls only, so three replicates make less than three times one
    per_sample = two.made - one.made
    assert 0 < per_sample < one.made
    # (two identical calls in flight at once may each be made, or one answer both: a call or two either way)
    assert abs(count.made - (one.made + 2 * per_sample)) <= 0.01 * count.made
    assert count.asked > count.made  # repeats across the critics' cells are answered by the cache
    assert not list(tmp_path.iterdir())  # nothing written here, no cache touched


def test_the_time_line_gives_its_basis(tmp_path: Path, monkeypatch) -> None:
    import promptlab.sweeps.probe as probe_module

    exp = load_experiment(ROOT / "experiments" / "tiny.yaml").with_models("fake/auto")
    asked = []

    def measured(model, task, max_tokens, at_once):  # a probe that took 8 s for 4 calls of 64 tokens
        asked.append((model, max_tokens))
        return Probe(model, 4, 2, 8.0, 64)

    monkeypatch.setattr(probe_module, "probe_model", measured)
    shown = sweep_plan(exp, tmp_path / "out", workers=2)
    assert all(len(line) <= 100 for line in shown.splitlines())
    lines = shown.replace("\n  ", " ").splitlines()  # one line per item, its wrapped parts joined
    assert lines[0] == "tiny: 4 cells x 1 tasks x 1 replicate(s) = 4 runs"
    assert lines[2].startswith("calls: about 12 model calls for the 4 runs (19 asked")
    # 12 made calls capped at 64 tokens each (tiny's max_tokens) at 2 s per 64-token call: 24 s
    assert lines[3].startswith("time: about 24 s: fake/auto took 2.00 s per call just now on this machine"), lines
    assert asked == [("fake/auto", 256)]  # the probe's calls are evaluation-sized (eval_max_tokens' default)
    # a hosted model is not probed: no invented number
    hosted = load_experiment(ROOT / "experiments" / "tiny.yaml").with_models("gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    line = sweep_plan(hosted, tmp_path / "out2", workers=2).replace("\n  ", " ").splitlines()[-1]
    assert line.startswith("time: not estimated: gpt-4o-mini's time per call is not measured here"), line


def test_a_judge_scorer_is_never_called_to_estimate(tmp_path: Path, monkeypatch) -> None:
    import json

    from promptlab.sweeps import Experiment

    examples = tmp_path / "ex.jsonl"
    examples.write_text("".join(json.dumps({"input": f"q{i}", "target": "a"}) + "\n" for i in range(6)))
    task = {
        "id": "t",
        "prompt": "Answer: {input}",
        "goal": "answer",
        "examples": "ex.jsonl",
        "scorer": {"kind": "judge", "model": "gpt-4o-mini", "rubric": "correct"},
        "split": {"seed": 0, "dev": 3, "test": 3},
    }
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    exp = Experiment.from_dict(
        {"name": "judged", "loops": ["creator_critic"], "tasks": "tasks.jsonl", "config": {"model": "fake/auto"}},
        tmp_path,
    )
    assert count_calls(exp) == ["gpt-4o-mini"]  # no dry run: it would have called the judge for real
    shown = sweep_plan(exp, tmp_path / "out", workers=2).replace("\n  ", " ")
    assert "calls and time: not estimated: a dry run would call gpt-4o-mini for real" in shown, shown


def test_a_sweep_above_five_minutes_or_without_an_estimate_starts_only_when_confirmed(
    tmp_path: Path, monkeypatch
) -> None:
    import pytest

    import promptlab.sweeps.probe as probe_module
    from promptlab.sweeps.estimate import NeedsConfirmation, plan_sweep, require_confirmation

    exp = load_experiment(ROOT / "experiments" / "tiny.yaml").with_models("fake/auto")
    per_call = {"seconds": 2.0}  # a probe: 4 calls of 64 tokens in per_call x 4 seconds

    def measured(model, task, max_tokens, at_once):  # type: ignore[no-untyped-def]
        return Probe(model, 4, 2, per_call["seconds"] * 4, 64)

    monkeypatch.setattr(probe_module, "probe_model", measured)
    quick = plan_sweep(exp, tmp_path / "out", workers=2)  # 12 calls x 2 s = 24 s: starts without asking
    assert quick.seconds == pytest.approx(24.0) and quick.calls == 12 and quick.runs == 4
    require_confirmation(quick, confirm=False)
    per_call["seconds"] = 30.0  # 12 calls x 30 s = 6 min: above 5 min
    slow = plan_sweep(exp, tmp_path / "out", workers=2)
    with pytest.raises(NeedsConfirmation) as raised:
        require_confirmation(slow, confirm=False)
    message = str(raised.value)
    assert message.startswith("Not started: this sweep should take about 6 min (4 runs, about 12 model calls), ")
    assert "more than 5 min" in message and "set confirm = True" in message and "-p confirm True" in message
    require_confirmation(slow, confirm=True)  # said so: never blocked
    # no basis for a time (a hosted model is not probed): it asks too
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    hosted = plan_sweep(load_experiment(ROOT / "experiments" / "tiny.yaml").with_models("gpt-4o-mini"), tmp_path, 2)
    assert hosted.seconds is None and hosted.needs_confirmation
    with pytest.raises(NeedsConfirmation, match="has no time estimate"):
        require_confirmation(hosted, confirm=False)


def test_a_model_is_timed_before_the_user_confirms_only_when_it_is_a_script() -> None:
    from promptlab.sweeps.estimate import probe_first

    tiny = load_experiment(ROOT / "experiments" / "tiny.yaml")
    assert probe_first(tiny.with_models("fake/auto"), confirm=False)  # a dry run is never held up
    assert not probe_first(tiny.with_models("local/smollm2"), confirm=False)  # no model call before it asks
    assert probe_first(tiny.with_models("local/smollm2"), confirm=True)


def test_a_fresh_clone_s_demo_plan_names_a_time_before_any_model_call(tmp_path: Path, monkeypatch) -> None:
    """Unconfirmed, with no cell finished: the demo's time is the reference measurement (labelled with its machine
    and whether this one is of its kind), not "not estimated"; no probe runs, and the sweep still asks first."""
    import promptlab.sweeps.probe as probe_module
    from promptlab.sweeps.estimate import plan_sweep
    from promptlab.sweeps.reference import DEMO

    monkeypatch.setattr(probe_module, "probe_model", lambda *a: (_ for _ in ()).throw(AssertionError("probed")))
    monkeypatch.chdir(tmp_path)
    plan = plan_sweep(load_experiment(ROOT / DEMO.experiment), tmp_path / "out", 2, probe=False)
    line = plan.text.replace("\n  ", " ").splitlines()[-1]
    assert line.startswith("time: about 21 min to 38 min, not measured here: measured on "), line
    assert "x86_64, 2 cores, AVX2" in line and "is timed on this machine once you confirm" in line
    assert plan.seconds == pytest.approx(DEMO.loaded_s, rel=0.01) and plan.needs_confirmation


def test_the_reference_s_reply_caps_are_the_demo_s_as_the_dry_run_counts_them(tmp_path: Path, monkeypatch) -> None:
    """The reference time is scaled by reply caps: its own must be the demo's, within the dry run's own spread (it
    counted 144,600 and 144,792 on two runs here); a changed demo fails here, and is then measured again."""
    from promptlab.sweeps.reference import DEMO

    monkeypatch.chdir(tmp_path)
    assert count_calls(load_experiment(ROOT / DEMO.experiment)).token_cap == pytest.approx(DEMO.token_cap, rel=0.01)
