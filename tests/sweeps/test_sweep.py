"""The sweep runner: inline and papermill executors, resume, failures recorded, a killed sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from experiment_files import topics, write_experiment
from nbformat import v4

from promptlab.errors import ConfigError
from promptlab.results.store import cell_status, load
from promptlab.sweeps.experiment import Experiment, load_experiment
from promptlab.sweeps.notebook import run_cell_notebook
from promptlab.sweeps.plan import schedule
from promptlab.sweeps.run import sweep


def experiment(tmp_path: Path, **over: Any) -> Path:
    """Write a toy experiment (2 tasks) to tmp_path/exp.yaml and return its path."""
    data: dict[str, Any] = {
        "name": "toyexp",
        "loops": ["toy"],
        "config": {"model": "fake/auto", "counter": str(tmp_path / "counter.txt")},
        "grid": {"max_iterations": [1, 2], "finish_threshold": [5.0, 9.0]},
        "replicates": 2,
    }
    return write_experiment(tmp_path, {**data, **over}, topics(2))


def counter_lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "counter.txt"
    return path.read_text().splitlines() if path.exists() else []


def status_mtimes(out: Path) -> dict[str, float]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (out / "cells").glob("*/status.json")}


def test_inline_sweep_writes_cells_that_load(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    events: list[Any] = []
    result = sweep(experiment(tmp_path), out, workers=2, progress=False, on_event=events.append)
    assert (result.done, result.failed, result.skipped) == (4, 0, 0)
    assert len(counter_lines(tmp_path)) == 4 * 2 * 2
    res = load(out)
    assert len(res.runs) == 16 and res.runs["run_id"].is_unique
    assert set(res.runs["finish_threshold"]) == {5.0, 9.0} and set(res.runs["max_iterations"]) == {1, 2}
    assert len(res.trajectories) >= 16
    assert {e.kind for e in events} >= {"model_call", "score", "run_finished"}
    # the results dir is self-contained: its experiment.yaml names the same cells
    copy = load_experiment(out / "experiment.yaml")
    assert [c.cell_id for c in copy.cells()] == [c.cell_id for c in result.cells]
    assert all(cell_status(out, c.cell_id)["status"] == "ok" for c in result.cells)  # type: ignore[index]


def test_the_progress_bar_shows_the_runs_totals(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    result = sweep(
        experiment(tmp_path, config={"model": "fake/auto", "style": "progress"}),
        out,
        workers=2,
        cache=tmp_path / "cache",
    )
    runs = load(out).runs
    spend = result.spend
    assert spend.calls == int(runs["calls"].sum()) > spend.cache_hits > 0  # cells of one loop share first calls
    assert spend.cache_hits == int(runs["cache_hits"].sum())
    assert spend.tokens == int(runs["spent_tokens"].sum()) > 0
    assert spend.cost_usd == pytest.approx(float(runs["spent_cost_usd"].sum()))
    # the bar's last postfix (tqdm writes to stderr) shows the same figures
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert f"calls={spend.calls}," in last and f"tokens={spend.tokens}," in last
    assert f"hits={spend.cache_hits}" in last and "done=4" in last
    assert "16/16 [" in last and ("run/s" in last or "s/run" in last)  # it counts runs: 4 cells x 2 tasks x 2
    # a replay into another results dir: every call a hit, nothing spent
    again = sweep(
        experiment(tmp_path, config={"model": "fake/auto", "style": "progress"}),
        tmp_path / "out2",
        cache=tmp_path / "cache",
        progress=False,
    )
    assert (again.spend.calls, again.spend.cache_hits, again.spend.tokens) == (spend.calls, spend.calls, 0)
    assert again.spend.cost_usd == 0 and f"{spend.calls} calls ({spend.calls} cached)" in str(again)


def test_the_progress_bar_counts_each_run_as_it_finishes(toy_dir: Path, tmp_path: Path) -> None:
    from promptlab.sweeps import plan

    seen: list[int] = []
    made = plan.progress_bar

    def watched(name: str, cells: int, runs_per_cell: int, *, disable: bool = False) -> Any:
        bar = made(name, cells, runs_per_cell, disable=True)
        seen.append(bar.total)
        bar.update = seen.append  # each step the bar would advance by
        return bar

    import promptlab.sweeps.run as run_module

    run_module.progress_bar = watched  # type: ignore[assignment]
    try:
        sweep(experiment(tmp_path), tmp_path / "out", workers=1, cell_concurrency=1)
    finally:
        run_module.progress_bar = made  # type: ignore[assignment]
    total, *steps = seen
    assert total == sum(steps) == 16  # 4 cells x 2 tasks x 2 replicates
    assert steps.count(1) >= 12  # run by run (a cell's end adds what was not yet counted), not 4 steps of 4


def test_second_sweep_skips_finished_cells(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sweep(experiment(tmp_path), out, progress=False)
    before, calls = status_mtimes(out), len(counter_lines(tmp_path))
    again = sweep(experiment(tmp_path), out, progress=False)
    assert (again.done, again.failed, again.skipped) == (0, 0, 4)
    assert status_mtimes(out) == before and len(counter_lines(tmp_path)) == calls
    assert len(load(out).runs) == 16


def test_failing_inline_cell_is_recorded_and_the_sweep_goes_on(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = experiment(tmp_path, grid={"fail_on": [None, "t0"]}, replicates=1)
    result = sweep(path, out, progress=False)
    assert (result.done, result.failed) == (1, 1)
    bad = next(c for c in result.cells if c.status == "failed")
    status = cell_status(out, bad.cell_id)
    assert status is not None and status["status"] == "failed"
    assert status["error"]["kind"] == "SweepCellError"
    assert status["error"]["ename"] == "RuntimeError" and "fails on task t0" in status["error"]["evalue"]
    assert "fails on task t0" in str(result)
    assert len(load(out).runs) == 2  # only the ok cell's runs
    # a failed cell is run again, a finished one is not
    n = len(counter_lines(tmp_path))
    again = sweep(path, out, progress=False)
    assert (again.failed, again.skipped) == (1, 1)
    assert len(counter_lines(tmp_path)) == n + 2


def test_a_results_dir_of_another_experiment_is_refused(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sweep(experiment(tmp_path, grid={"max_iterations": [1]}), out, progress=False)
    changed = experiment(tmp_path, grid={"max_iterations": [1]}, replicates=3)
    with pytest.raises(ConfigError, match="holds 1 cell"):
        sweep(changed, out, progress=False)


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_redoing_finished_cells(toy_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = experiment(tmp_path, config={"model": "fake/auto", "delay_s": 0.4, "counter": str(tmp_path / "c.txt")})
    code = (
        "import sys, toyloop; from promptlab.cli import main; "
        f"sys.exit(main(['sweep', {str(path)!r}, '--out', {str(out)!r}, '--workers', '1', '--no-progress']))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]),
        "TOYLOOP_HOLD_AFTER_A_CELL": str(out),  # the second cell's runs wait: exactly one cell is done at the kill
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # a hang guard only
    while not status_mtimes(out) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = status_mtimes(out)
    assert len(finished) == 1, proc.stderr.read().decode() if proc.stderr else ""
    result = sweep(path, out, progress=False)
    assert result.skipped == len(finished) and result.done == 4 - len(finished)
    assert {k: v for k, v in status_mtimes(out).items() if k in finished} == finished
    runs = load(out).runs
    assert len(runs) == 16 and runs["run_id"].is_unique


@pytest.mark.slow
def test_papermill_executor_runs_cells_and_a_cached_cell_skips_litellm(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}) + "\n")
    exp = Experiment.from_dict(
        {
            "name": "pm",
            "loops": ["p3ro"],
            "tasks": "tasks.jsonl",
            "config": {"model": "fake/auto", "max_tokens": 64},
            "grid": {"max_iterations": [1, 2]},
        },
        tmp_path,
    )
    first = sweep(exp, tmp_path / "out1", executor="papermill", workers=2, progress=False)
    assert (first.done, first.failed) == (2, 0), str(first)
    for cell in first.cells:
        assert (tmp_path / "out1" / "cells" / cell.cell_id / "run_cell.ipynb").is_file()
    assert len(load(tmp_path / "out1").runs) == 2
    # the same cells into a new dir with the same cache: every call is a hit, litellm is never imported
    second = sweep(exp, tmp_path / "out2", executor="papermill", workers=2, progress=False)
    assert second.done == 2
    for cell in second.cells:
        nb = nbformat.read(tmp_path / "out2" / "cells" / cell.cell_id / "run_cell.ipynb", as_version=4)
        printed = json.loads(nb.cells[-1].outputs[0]["text"])
        assert printed["status"] == "ok" and printed["litellm_imported"] is False
    runs = load(tmp_path / "out2").runs
    assert (runs["cache_hits"] == runs["calls"]).all()
    # what each cell spent, read back from its runs: the first sweep paid, the second replayed
    assert first.spend.calls == second.spend.calls == second.spend.cache_hits == int(runs["calls"].sum())
    assert first.spend.tokens == int(load(tmp_path / "out1").runs["spent_tokens"].sum()) > 0 == second.spend.tokens


def template(tmp_path: Path, code: str) -> Path:
    """The run_cell notebook with an extra cell before the run (after the parameters)."""
    nb = run_cell_notebook()
    nb.cells.insert(2, v4.new_code_cell(code))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    path = tmp_path / "template.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_papermill_failures_are_recorded_with_ename_and_evalue(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(toy_dir))
    # the loop raises inside the notebook: the notebook records the cell itself, then fails
    monkeypatch.delenv("PROMPTLAB_LIMIT_SHARE", raising=False)
    path = experiment(
        tmp_path,
        grid={"fail_on": [None, "t1"]},
        replicates=1,
        config={"model": "fake/auto", "env_log": str(tmp_path / "env.txt")},
    )
    result = sweep(
        path,
        tmp_path / "out",
        executor="papermill",
        workers=2,
        progress=False,
        template=template(tmp_path, "import toyloop"),
    )
    # each of the 2 kernels at once takes half of each model's limits
    assert {line.split()[1] for line in (tmp_path / "env.txt").read_text().splitlines()} == {"2"}
    assert (result.done, result.failed) == (1, 1), str(result)
    bad = next(c for c in result.cells if c.status == "failed")
    err = cell_status(tmp_path / "out", bad.cell_id)["error"]  # type: ignore[index]
    assert err["ename"] == "RuntimeError" and "fails on task t1" in err["evalue"]
    assert err["notebook"].endswith(f"{bad.cell_id}/run_cell.ipynb")
    # the notebook itself raises before recording anything: the runner records it
    result = sweep(
        path,
        tmp_path / "out2",
        executor="papermill",
        workers=2,
        progress=False,
        template=template(tmp_path, "import toyloop\nraise ValueError('boom in the notebook')"),
    )
    assert result.failed == 2
    for cell in result.cells:
        err = cell_status(tmp_path / "out2", cell.cell_id)["error"]  # type: ignore[index]
        assert (err["kind"], err["ename"], err["evalue"]) == ("SweepCellError", "ValueError", "boom in the notebook")
        assert err["cell_index"] == 3  # markdown, parameters, injected parameters, the raising cell
        assert Path(err["notebook"]).is_file()


def test_cells_start_with_the_loops_interleaved(tmp_path: Path) -> None:
    from promptlab.sweeps.cells import Cell

    cells = [Cell(f"{loop}{i}", loop, {"loop": loop}, {}) for loop in ("a", "b") for i in range(3)]
    cells.insert(2, Cell("c0", "c", {"loop": "c"}, {}))
    assert [c.cell_id for c in schedule(cells)] == ["a0", "c0", "b0", "a1", "b1", "a2", "b2"]


@pytest.mark.slow
def test_a_dead_kernel_is_recorded_and_the_sweep_goes_on(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(toy_dir))
    path = experiment(tmp_path, grid={"max_iterations": [1]}, replicates=1)
    result = sweep(
        path,
        tmp_path / "out",
        executor="papermill",
        workers=1,
        progress=False,
        template=template(tmp_path, "import os, toyloop\nos._exit(3)"),
    )
    assert result.failed == 1
    err = cell_status(tmp_path / "out", result.cells[0].cell_id)["error"]  # type: ignore[index]
    assert err["kind"] == "SweepCellError" and err["ename"] == "DeadKernelError"


def test_a_papermill_kernel_may_take_minutes_to_start(
    toy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """papermill's 60 s start timeout failed a cell on a busy machine ("Kernel didn't respond in 60 seconds"): the
    executor gives each kernel KERNEL_START_TIMEOUT_S (300 s) to start. Checked on what papermill is asked for."""
    import papermill

    from promptlab.sweeps.papermill import KERNEL_START_TIMEOUT_S

    asked: list[dict[str, Any]] = []

    def execute_notebook(*args: Any, **kwargs: Any) -> None:
        asked.append(kwargs)
        raise RuntimeError("not run here")

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    result = sweep(experiment(tmp_path, grid={"max_iterations": [1]}), tmp_path / "out", executor="papermill")
    assert result.failed == 1 and "not run here" in str(result)
    assert [a["start_timeout"] for a in asked] == [KERNEL_START_TIMEOUT_S] and KERNEL_START_TIMEOUT_S >= 300


def test_the_bar_goes_to_stderr_in_a_process_that_only_launched_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """A process that ran a papermill sweep has imported ipykernel (jupyter_client finds the kernel's spec with it)
    without being a kernel: its bar stays on stderr, where a terminal shows it (stdout is for a kernel's cell)."""
    from jupyter_client.kernelspec import KernelSpecManager

    from promptlab.sweeps.plan import progress_bar

    KernelSpecManager().get_kernel_spec("python3")  # what launching a papermill kernel does here
    bar = progress_bar("launched", 1, 1)
    bar.update(1)
    bar.close()
    said = capsys.readouterr()
    assert "sweep launched" in said.err and "sweep launched" not in said.out
