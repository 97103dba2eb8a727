"""Results on disk and as frames: write_cell / cell_status / tidy / load / iteration_frame."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from factories import (
    CELL_A,
    CELL_FAILED,
    COST,
    FAILED_ERROR,
    IN_TOK,
    OUT_TOK,
    cfg,
    make_run,
    runs_a,
    runs_b,
    write_sweep,
)

from promptlab.errors import ConfigError
from promptlab.results.columns import CELL_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS
from promptlab.results.frames import iteration_frame, tidy
from promptlab.results.store import cell_status, load, read_runs, write_cell

PARAM_DTYPES = {
    "finish_threshold": "Float64",
    "max_iterations": "Int64",
    "generator_model": "string",
    "critic_model": "string",
}


def assert_schema(
    frame: pd.DataFrame, spec: dict[str, tuple[str, str]], params: dict[str, str], params_first: bool = True
) -> None:
    """Columns exactly params + documented (in that order unless params_first is False), dtypes as documented."""
    extra = [p for p in params if p not in spec]
    expected = [*extra, *spec] if params_first else [*spec, *extra]
    assert list(frame.columns) == expected
    for name, (dtype, _) in spec.items():
        assert str(frame[name].dtype) == dtype, name
    for name in extra:
        assert str(frame[name].dtype) == params[name], name


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "results")


def run_row(runs: pd.DataFrame, cell: str, task: str, sample: int) -> pd.Series:
    sel = runs[(runs.cell_id == cell) & (runs.task_id == task) & (runs["sample"] == sample)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_schema_of_a_full_directory(sweep: Path) -> None:
    res = load(sweep)
    assert_schema(res.trajectories, TRAJECTORY_COLUMNS, PARAM_DTYPES)
    assert_schema(res.runs, RUN_COLUMNS, PARAM_DTYPES)
    assert_schema(res.cells, CELL_COLUMNS, {"loop": "string", **PARAM_DTYPES}, params_first=False)


def test_schema_of_an_empty_directory_matches(tmp_path: Path) -> None:
    tmp_path.joinpath("cells").mkdir()
    res = load(tmp_path)
    assert res.trajectories.empty and res.runs.empty and res.cells.empty
    assert_schema(res.trajectories, TRAJECTORY_COLUMNS, {})
    assert_schema(res.runs, RUN_COLUMNS, {})
    assert_schema(res.cells, CELL_COLUMNS, {}, params_first=False)
    assert load(tmp_path / "cells").runs.empty  # no cells/ at all: still a valid (empty) result


def test_directory_with_only_a_failed_cell_gives_empty_frames_with_param_columns(tmp_path: Path) -> None:
    write_cell(tmp_path, "f", CELL_FAILED, [make_run([[3.0, 3.0]], config=cfg(CELL_FAILED))], error=FAILED_ERROR)
    res = load(tmp_path)
    assert res.trajectories.empty and res.runs.empty
    assert_schema(res.trajectories, TRAJECTORY_COLUMNS, PARAM_DTYPES)
    assert_schema(res.runs, RUN_COLUMNS, PARAM_DTYPES)
    assert res.cells.status.tolist() == ["failed"]


def test_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        load(tmp_path / "nope")


def test_trajectory_rows_scores_and_unscored_iterations(sweep: Path) -> None:
    traj = load(sweep).trajectories
    # cell a: 2x2 + 3x2 + 3x2 + (2 + 2 + 1 unscored) ; cell b: 4 runs x 3 iterations x 2 criteria
    assert (traj.cell_id == "a").sum() == 21 and (traj.cell_id == "b").sum() == 24
    missing = traj[(traj.cell_id == "a") & (traj.task_id == "t1") & (traj["sample"] == 1) & (traj.iteration == 1)]
    assert missing.criterion.tolist() == ["clarity", "tone"]
    assert missing.score.tolist()[0] == 5.0 and missing.score.isna().tolist() == [False, True]
    assert missing.average.tolist() == [5.0, 5.0]
    unscored = traj[(traj.cell_id == "a") & (traj.task_id == "t2") & (traj["sample"] == 1) & (traj.iteration == 3)]
    assert len(unscored) == 1 and unscored.criterion.isna().all() and unscored.score.isna().all()
    assert unscored.average.isna().all()
    assert set(traj[traj.cell_id == "a"].stop_reason) == {"threshold", "max_iterations"}
    assert set(traj.judge.dropna()) == {"fake/critic"}


def test_run_metrics(sweep: Path) -> None:
    runs = load(sweep).runs
    assert len(runs) == 8 and runs.run_id.is_unique
    hit = run_row(runs, "a", "t1", 0)
    assert (hit.final_score, hit.best_score, hit.best_iteration, hit.iterations_used) == (8.5, 8.5, 2, 2)
    assert hit.stop_reason == "threshold" and pd.isna(hit.error) and hit.n_errors == 0
    # last iteration unscored: final_score is <NA> while best_score keeps the best average
    gap = run_row(runs, "a", "t2", 1)
    assert pd.isna(gap.final_score) and gap.best_score == 7.0 and gap.best_iteration == 1
    assert gap.final_output_score == 8.0  # mean of the present final scores (one is missing)
    failed_call = run_row(runs, "a", "t1", 1)
    assert failed_call.n_errors == 1 and failed_call.error == "ParseError: bad JSON"
    assert failed_call.failed_calls == 1 and failed_call.calls == 9
    assert (runs.generator_model == runs.cell_id.map({"a": "fake/gen-a", "b": "fake/gen-b"})).all()
    assert (runs.critic_model == "fake/crit-a").all()


def test_tokens_and_cost(sweep: Path) -> None:
    res = load(sweep)
    runs, its = res.runs, res.iterations()
    ok_calls = 2 * 3 + 2  # three iterations of 2 calls, setup and final (the failed call adds nothing)
    row = run_row(runs, "a", "t1", 1)
    assert (row.input_tokens, row.output_tokens, row.tokens) == (
        IN_TOK * ok_calls,
        OUT_TOK * ok_calls,
        (IN_TOK + OUT_TOK) * ok_calls,
    )
    assert row.cost_usd == pytest.approx(COST * ok_calls)
    it1 = its[(its.run_id == row.run_id) & (its.iteration == 1)].iloc[0]
    assert (it1.input_tokens, it1.calls, it1.cache_hits, it1.n_errors) == (2 * IN_TOK, 3, 0, 1)
    # iteration figures sum to the run's, minus the setup and final steps (one call each)
    per_run = its.groupby("run_id")["input_tokens"].sum()
    assert (per_run + 2 * IN_TOK).to_dict() == runs.set_index("run_id")["input_tokens"].to_dict()
    # the trajectories repeat iteration figures per criterion row; iteration_frame does not
    assert res.trajectories.input_tokens.sum() > its.input_tokens.sum()


def test_cache_replay_keeps_original_tokens_and_reports_spend(sweep: Path) -> None:
    runs = load(sweep).runs
    replay = runs[runs.cell_id == "b"]
    assert (replay.tokens == (IN_TOK + OUT_TOK) * 8).all()
    assert replay.cost_usd.tolist() == pytest.approx([COST * 8] * 4)
    assert (replay.spent_tokens == 0).all() and (replay.spent_cost_usd == 0.0).all()
    assert (replay.cache_hits == 8).all()
    fresh = runs[runs.cell_id == "a"]
    assert (fresh.spent_tokens == fresh.tokens).all()


def test_unknown_price_gives_missing_cost(tmp_path: Path) -> None:
    run = make_run([[5.0, 5.0]], cost=None)
    traj, rows = tidy([run], {"loop": "p3ro"}, "c")
    assert traj.cost_usd.isna().all() and rows.cost_usd.isna().all() and rows.spent_cost_usd.isna().all()
    assert rows.tokens.tolist() == [(IN_TOK + OUT_TOK) * 4]


def test_failed_cell_is_only_in_cells(sweep: Path) -> None:
    res = load(sweep)
    assert "failed" not in set(res.trajectories.cell_id) and "failed" not in set(res.runs.cell_id)
    cell = res.cells.set_index("cell_id").loc["failed"]
    assert cell.status == "failed" and cell.error_kind == "SweepCellError" and "boom" in cell.error
    assert cell.n_runs == 1 and cell.finish_threshold == 9.5
    assert res.cells.set_index("cell_id").loc["a"].status == "ok"
    status = cell_status(sweep, "failed")
    assert status is not None and status["status"] == "failed" and status["error"]["cell_index"] == 4
    assert status["params"] == CELL_FAILED and status["n_runs"] == 1


def test_cell_status_and_lossless_runs(sweep: Path) -> None:
    status = cell_status(sweep, "a")
    assert status is not None and status["status"] == "ok" and status["error"] is None
    assert status["params"] == CELL_A and status["n_runs"] == 4 and status["wall_time_s"] == 3.0
    assert cell_status(sweep, "never-ran") is None
    assert read_runs(sweep, "b") == runs_b()
    (sweep / "cells" / "a" / "status.json").write_text("{not json")
    assert cell_status(sweep, "a") is None


def test_no_temp_files_and_status_written_last(sweep: Path) -> None:
    for cell in (sweep / "cells").iterdir():
        names = sorted(p.name for p in cell.iterdir())
        assert names == ["runs.jsonl", "runs.parquet", "status.json", "trajectories.parquet"], names
        last = (cell / "status.json").stat().st_mtime_ns
        assert all(p.stat().st_mtime_ns <= last for p in cell.iterdir())


def test_a_cell_without_status_is_not_loaded(sweep: Path) -> None:
    (sweep / "cells" / "b" / "status.json").unlink()
    res = load(sweep)
    assert set(res.runs.cell_id) == {"a"} and set(res.trajectories.cell_id) == {"a"}
    cell = res.cells.set_index("cell_id").loc["b"]
    assert cell.status == "incomplete" and pd.isna(cell.n_runs)


def test_crash_while_rewriting_leaves_no_temp_file_and_no_ok_status(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    def broken(table: object, where: str) -> None:
        Path(where).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_cell(sweep, "a", CELL_A, runs_a())
    cell = sweep / "cells" / "a"
    assert not [p for p in cell.iterdir() if p.name.startswith(".")]
    assert not (cell / "status.json").exists()  # the old ok status was removed before rewriting
    assert "a" not in set(load(sweep).runs.cell_id)


@pytest.mark.parametrize("killed_in", ["runs.jsonl", "trajectories.parquet", "status.json"])
def test_a_write_killed_mid_file_leaves_no_temp_file_once_the_cell_is_written_again(
    sweep: Path, killed_in: str
) -> None:
    """kill -9 while a cell's file is being written (its temp file made, not yet renamed), then a resume: the cell
    is ok and holds no temp file of the killed write."""
    code = f"""
import os, signal, sys
sys.path[:0] = {[str(Path(__file__).parents[1] / "support")]!r}
from factories import CELL_A, runs_a
import promptlab.results.atomic as atomic
from promptlab.results.store import write_cell
real = atomic.os.replace
def killed(src, dst):
    if str(dst).endswith({killed_in!r}):
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)
atomic.os.replace = killed
write_cell({str(sweep)!r}, "a", CELL_A, runs_a())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    cell = sweep / "cells" / "a"
    assert [p.name for p in cell.iterdir() if p.name.startswith(f".{killed_in}.") and p.name.endswith(".tmp")]
    write_cell(sweep, "a", CELL_A, runs_a())  # the resumed sweep writes the cell again
    assert cell_status(sweep, "a")["status"] == "ok"  # type: ignore[index]
    assert sorted(p.name for p in cell.iterdir()) == [
        "runs.jsonl",
        "runs.parquet",
        "status.json",
        "trajectories.parquet",
    ]


def test_rewriting_a_failed_cell_makes_it_ok(sweep: Path) -> None:
    rerun = [make_run([[9.0, 9.0]], config=cfg(CELL_FAILED), stop_reason="threshold")]
    write_cell(sweep, "failed", CELL_FAILED, rerun, wall_time_s=1.0)
    res = load(sweep)
    assert res.cells.set_index("cell_id").loc["failed"].status == "ok"
    assert res.runs[res.runs.cell_id == "failed"].final_score.tolist() == [9.0]
    assert len(res.runs) == 9  # one cell dir is one cell: nothing counted twice


def test_corrupt_parquet_is_skipped_with_a_warning(sweep: Path) -> None:
    (sweep / "cells" / "a" / "trajectories.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.warns(RuntimeWarning, match="skipping cell a"):
        res = load(sweep)
    assert set(res.trajectories.cell_id) == {"b"} and set(res.runs.cell_id) == {"b"}
    cell = res.cells.set_index("cell_id").loc["a"]
    assert cell.status == "corrupt" and isinstance(cell.error, str) and cell.error


def test_parquet_missing_a_documented_column_is_corrupt(sweep: Path) -> None:
    path = sweep / "cells" / "b" / "runs.parquet"
    pd.read_parquet(path).drop(columns=["final_score"]).to_parquet(path)
    with pytest.warns(RuntimeWarning, match="final_score"):
        res = load(sweep)
    assert res.cells.set_index("cell_id").loc["b"].status == "corrupt"
    assert set(res.runs.cell_id) == {"a"}


def test_a_cell_written_before_the_newer_columns_loads_with_them_missing(sweep: Path) -> None:
    for name, dropped in (("trajectories", ["parents"]), ("runs", ["fingerprint", "fingerprints"])):
        path = sweep / "cells" / "b" / f"{name}.parquet"
        pd.read_parquet(path).drop(columns=dropped).to_parquet(path)
    res = load(sweep)
    assert res.cells.set_index("cell_id").loc["b"].status == "ok"
    assert set(res.runs.cell_id) == {"a", "b"}
    b_runs, b_traj = res.runs[res.runs.cell_id == "b"], res.trajectories[res.trajectories.cell_id == "b"]
    assert b_runs.fingerprint.isna().all() and b_runs.fingerprints.isna().all() and b_traj.parents.isna().all()


def test_unreadable_status_is_corrupt(sweep: Path) -> None:
    (sweep / "cells" / "b" / "status.json").write_text(json.dumps({"status": "ok"}))
    cells = load(sweep).cells.set_index("cell_id")
    assert cells.loc["b"].status == "corrupt" and "status.json invalid" in cells.loc["b"].error


def test_param_dtypes_are_unified_across_cells(tmp_path: Path) -> None:
    write_cell(tmp_path, "x", {"loop": "p3ro", "t": 8, "tag": "a", "only_x": True}, [make_run([[5.0]])])
    write_cell(tmp_path, "y", {"loop": "p3ro", "t": 8.5, "tag": 3}, [make_run([[6.0]], sample=1)])
    res = load(tmp_path)
    assert str(res.runs.t.dtype) == "Float64" and res.runs.t.tolist() == [8.0, 8.5]
    assert str(res.runs.tag.dtype) == "string" and res.runs.tag.tolist() == ["a", "3"]
    assert str(res.runs.only_x.dtype) == "boolean" and res.runs.only_x.isna().tolist() == [False, True]


def test_tidy_of_no_runs_has_the_schema() -> None:
    traj, runs = tidy([], CELL_A, "a")
    assert traj.empty and runs.empty
    assert_schema(traj, TRAJECTORY_COLUMNS, PARAM_DTYPES)
    assert_schema(runs, RUN_COLUMNS, PARAM_DTYPES)


def test_iteration_frame_is_one_row_per_run_and_iteration(sweep: Path) -> None:
    its = iteration_frame(load(sweep).trajectories)
    assert not its.duplicated(["cell_id", "run_id", "iteration"]).any()
    assert len(its) == 2 + 3 + 3 + 3 + 4 * 3
    assert "score" not in its.columns and "criterion" not in its.columns


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"loop": "p3ro", "nested": {"a": 1}}, "params.nested"),
        ({"loop": "p3ro", "score": 1}, "params.score"),
        ({"loop": "pes"}, "params.loop"),
    ],
)
def test_bad_params_are_rejected(tmp_path: Path, params: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        write_cell(tmp_path, "c", params, [make_run([[5.0]])])


@pytest.mark.parametrize("cell_id", ["", "../up", "a/b", ".hidden"])
def test_bad_cell_ids_are_rejected(tmp_path: Path, cell_id: str) -> None:
    with pytest.raises(ConfigError, match="cell_id"):
        write_cell(tmp_path, cell_id, {"loop": "p3ro"}, [])


def test_bad_error_dict_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bad error dict"):
        write_cell(tmp_path, "c", {"loop": "p3ro"}, [], error={"message": "no kind"})


@pytest.mark.slow
def test_import_promptlab_stays_light() -> None:
    code = (
        "import sys, promptlab, promptlab.results, promptlab.reports.plots; "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_grounded_and_provenance_columns() -> None:
    from factories import make_grounded_run

    cc = {**CELL_A, "loop": "creator_critic"}
    traj, runs = tidy([make_grounded_run()], cc, "g")
    plain_traj, plain_runs = tidy([make_run([[5.0]], task_id="plain")], CELL_A, "p")
    for t, r in ((traj, runs), (plain_traj, plain_runs)):
        assert_schema(t, TRAJECTORY_COLUMNS, PARAM_DTYPES)
        assert_schema(r, RUN_COLUMNS, PARAM_DTYPES)
    traj, runs = pd.concat([traj, plain_traj]), pd.concat([runs, plain_runs])
    g = traj[traj.task_id == "g1"]
    assert g.grounded_score.tolist() == [0.5, 0.75] and g.grounded_n.tolist() == [4, 4]
    assert g.grounded_ci_low.tolist() == pytest.approx([0.2, 0.45]) and g.grounded_ci_high.tolist() == [0.7, 0.95]
    assert g.decision_score.tolist() == pytest.approx([5.5, 7.75])
    assert g.score_source.tolist() == ["grounded"] * 2 and g.critic_model.tolist() == ["fake/crit"] * 2
    plain = traj[traj.task_id == "plain"]
    assert plain.grounded_score.isna().all() and plain.score_source.isna().all()
    assert plain.critic_model.tolist() == ["fake/model"]
    r = runs.set_index("task_id")
    row = r.loc["g1"]
    assert row.score_source == "grounded" and row.target_model == "fake/target"
    assert (row.baseline_test_score, row.baseline_test_n, row.final_test_score, row.final_test_n) == (0.25, 8, 0.625, 8)
    assert (row.baseline_test_ci_low, row.final_test_ci_high) == (0.07, 0.86)
    assert (row.delta, row.delta_n, row.delta_ci_low, row.delta_ci_high) == (0.375, 8, 0.125, 0.625)
    assert row.final_iteration == 2 and row.promptlab_version == "0.1.0" and row.litellm_version == "1.2.3"
    assert row.task_hash == "t" * 16 and row.experiment_hash == "e" * 16 and len(row.prompts_hash) == 16
    assert json.loads(row.reported_models)["creator"]["reported"] == "gen-2024"
    other = make_grounded_run()
    other.provenance["prompt_hashes"]["critic"] = "c" * 16
    assert tidy([other], cc, "g")[1].prompts_hash[0] != row.prompts_hash
    none = r.loc["plain"]
    assert pd.isna(none.delta) and pd.isna(none.baseline_test_n) and pd.isna(none.target_model)
    assert pd.isna(none.reported_models) and pd.isna(none.final_iteration)


def test_grounded_columns_survive_the_round_trip(tmp_path: Path) -> None:
    from factories import make_grounded_run

    write_cell(tmp_path, "g", {**CELL_A, "loop": "creator_critic"}, [make_grounded_run(source="both")])
    res = load(tmp_path)
    assert res.runs.delta.tolist() == [0.375] and str(res.runs.delta_n.dtype) == "Int64"
    assert res.trajectories.decision_score.tolist() == [4.0, 6.0]  # the critic decides in 'both'
    assert res.trajectories.score_source.tolist() == ["both", "both"]


def test_a_label_names_only_the_fields_its_row_has() -> None:
    """A search loop has no score_source: its label is "loop=ape", not "loop=ape, score_source=NA"; labels stay
    one per configuration, and a row with no value at all says so."""
    from promptlab.results.configs import config_groups, config_labels

    frame = pd.DataFrame(
        {
            "loop": ["ape", "p3ro", "p3ro", "ape"],
            "score_source": [pd.NA, "grounded", "critic", pd.NA],
            "budget_tokens": [100.0, 100.0, 100.0, 100.0],
        }
    )
    assert config_labels(frame, ["loop", "score_source", "budget_tokens"]).tolist() == [
        "loop=ape",
        "loop=p3ro, score_source=grounded",
        "loop=p3ro, score_source=critic",
        "loop=ape",
    ]
    assert [label for label, _ in config_groups(frame, ["loop", "score_source"])] == [
        "loop=ape",
        "loop=p3ro, score_source=critic",
        "loop=p3ro, score_source=grounded",
    ]
    assert config_labels(pd.DataFrame({"a": [pd.NA, 1]}), ["a"]).tolist() == ["a=NA", "a=1"]
