"""Sweep results on disk and as tidy pandas frames.

One directory per sweep cell, every file written atomically, `status.json` last:

    <results_dir>/cells/<cell_id>/runs.jsonl            one Run JSON per line (the lossless record)
    <results_dir>/cells/<cell_id>/trajectories.parquet  the cell's rows of the trajectories frame
    <results_dir>/cells/<cell_id>/runs.parquet          the cell's rows of the runs frame
    <results_dir>/cells/<cell_id>/status.json           a `CellStatus`; the cell is finished when it says "ok"

`load(results_dir)` concatenates the ok cells into `Results.trajectories` and `Results.runs`, whose
columns are documented in `TRAJECTORY_COLUMNS` and `RUN_COLUMNS` (name -> (dtype, description)); each
cell's params become columns too (placed first). Dtypes are pandas' nullable ones and do not depend on
the data: an empty result has the same columns and dtypes as a full one.

Metrics: a run's `final_score` is its LAST iteration's average, <NA> when that iteration has no score
(the run's `best_score` is the highest average). The trajectories' iteration-level figures (average,
tokens, cost, calls, cache hits, errors) are repeated on each criterion row of the iteration: sum them
over `iteration_frame(traj)` (one row per run x iteration), not over the trajectories.

Token and cost figures are those of the ORIGINAL model calls (`Step.call`), also for cache hits, so a
cached replay of a sweep gives the same frames; what this execution actually paid is `spent_tokens` /
`spent_cost_usd` in the runs frame. Failed calls add no tokens or cost. pandas and pyarrow are imported
inside the functions so that `import promptlab` stays light.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import io
import json
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError
from .record import GroundedScore, Run, Step

if TYPE_CHECKING:
    import pandas as pd

Columns = dict[str, tuple[str, str]]

TRAJECTORY_COLUMNS: Columns = {
    "cell_id": ("string", "Sweep cell the run belongs to."),
    "run_id": ("string", "Deterministic run id (Run.run_id)."),
    "loop": ("string", "Loop name."),
    "task_id": ("string", "Task id."),
    "sample": ("Int64", "Replicate index of the run."),
    "iteration": ("Int64", "1-based iteration number."),
    "criterion": ("string", "What this row's score judged; <NA> for an iteration without scores (one row)."),
    "judge": ("string", "Who gave the score (a model name or 'critic[k]'), <NA> if not recorded."),
    "score": ("Float64", "The score; <NA> when the judge's output was unusable (never a default number)."),
    "average": ("Float64", "The iteration's comparable score (Iteration.average); repeated on its rows."),
    "decision": ("string", "What the loop decided after the iteration; repeated on its rows."),
    "stop_reason": ("string", "Why the RUN stopped (the same on all of a run's rows)."),
    "input_tokens": ("Int64", "Input tokens of the iteration's calls (original calls, also for cache hits); "
                              "ITERATION-LEVEL, repeated on each criterion row: dedupe with iteration_frame()."),
    "output_tokens": ("Int64", "Output tokens of the iteration's calls; iteration-level like input_tokens."),
    "cost_usd": ("Float64", "Cost of the iteration's calls; <NA> if a call's price is unknown; iteration-level."),
    "calls": ("Int64", "Model calls made in the iteration (cache hits and failures included); iteration-level."),
    "cache_hits": ("Int64", "Calls of the iteration answered from the cache; iteration-level."),
    "n_errors": ("Int64", "Errors recorded in the iteration; iteration-level."),
    "decision_score": ("Float64", "The 1-10 score the loop's router used (Iteration.decision_score: the critic "
                       "average, or 1 + 9 x grounded_score with score_source 'grounded'); iteration-level."),
    "grounded_score": ("Float64", "The iteration's candidate measured on the dev split: mean scorer value in "
                       "[0, 1]; <NA> for a task without examples; iteration-level."),
    "grounded_n": ("Int64", "Dev examples that got a score (errors excluded); iteration-level."),
    "grounded_ci_low": ("Float64", "Lower end of grounded_score's 95% CI (Wilson for 0/1, else bootstrap)."),
    "grounded_ci_high": ("Float64", "Upper end of grounded_score's 95% CI."),
    "score_source": ("string", "What the router decided on: critic, grounded or both (config score_source); "
                     "<NA> for loops without one."),
    "critic_model": ("string", "Model of the judge that gave this row's score (the critic or evaluator)."),
}
"""Trajectories: one row per run x iteration x criterion (an unscored iteration still gives one row).
Setup and final phases (planning, polish) are not in any iteration: their tokens are only in RUN_COLUMNS."""

RUN_COLUMNS: Columns = {
    "cell_id": ("string", "Sweep cell the run belongs to."),
    "run_id": ("string", "Deterministic run id (Run.run_id)."),
    "loop": ("string", "Loop name."),
    "task_id": ("string", "Task id."),
    "sample": ("Int64", "Replicate index of the run."),
    "generator_model": ("string", "Model of the proposing roles (config generator_model, else model)."),
    "critic_model": ("string", "Model of the judging roles (config critic_model, else model)."),
    "final_score": ("Float64", "The LAST iteration's average, even when that is <NA> (compare best_score); "
                               "<NA> for a run without iterations."),
    "best_score": ("Float64", "Highest iteration average of the run (Run.best_score); <NA> if none present."),
    "best_iteration": ("Int64", "Iteration that reached best_score."),
    "final_output_score": ("Float64", "Mean of the present scores the loop gave its final output "
                                      "(Run.final_scores, e.g. a judge's grade); <NA> if none."),
    "iterations_used": ("Int64", "Number of iterations the run made."),
    "stop_reason": ("string", "Why the loop stopped."),
    "calls": ("Int64", "Model calls of the run (Run.totals: cache hits and failures included)."),
    "cache_hits": ("Int64", "Calls answered from the cache (Run.totals)."),
    "failed_calls": ("Int64", "Calls that ended in an error (Run.totals)."),
    "input_tokens": ("Int64", "Input tokens of all the run's calls, setup and final phases included "
                              "(original calls, also for cache hits)."),
    "output_tokens": ("Int64", "Output tokens of all the run's calls (as input_tokens)."),
    "tokens": ("Int64", "input_tokens + output_tokens."),
    "cost_usd": ("Float64", "Cost of all the run's calls (original calls); <NA> if a call's price is unknown."),
    "spent_tokens": ("Int64", "Tokens this execution actually sent to providers (Run.totals; 0 on a full "
                              "cache replay)."),
    "spent_cost_usd": ("Float64", "Cost this execution actually paid (Run.totals); <NA> if unknown."),
    "wall_time_s": ("Float64", "Wall-clock seconds of the run."),
    "n_errors": ("Int64", "Errors recorded in the run."),
    "error": ("string", "The first error as 'Kind: message', <NA> if none."),
    "score_source": ("string", "What the router decided on: critic, grounded or both; <NA> for loops without one."),
    "target_model": ("string", "Model that ran candidate prompts on the examples (prompt loops; else <NA>)."),
    "baseline_test_score": ("Float64", "The task's original prompt on the test split: mean scorer value in "
                            "[0, 1] (Run.baseline_test); <NA> for a task without examples."),
    "baseline_test_n": ("Int64", "Test examples the original prompt got a score on."),
    "baseline_test_ci_low": ("Float64", "Lower end of baseline_test_score's 95% CI."),
    "baseline_test_ci_high": ("Float64", "Upper end of baseline_test_score's 95% CI."),
    "final_test_score": ("Float64", "The run's final output (prompt) on the test split (Run.final_test)."),
    "final_test_n": ("Int64", "Test examples the final prompt got a score on."),
    "final_test_ci_low": ("Float64", "Lower end of final_test_score's 95% CI."),
    "final_test_ci_high": ("Float64", "Upper end of final_test_score's 95% CI."),
    "delta": ("Float64", "final minus baseline, paired over the test examples scored in both (Run.delta)."),
    "delta_n": ("Int64", "Test examples scored in both measures."),
    "delta_ci_low": ("Float64", "Lower end of delta's paired bootstrap 95% CI."),
    "delta_ci_high": ("Float64", "Upper end of delta's paired bootstrap 95% CI."),
    "final_iteration": ("Int64", "Iteration whose candidate is the final output (Run.info['final_iteration'])."),
    "promptlab_version": ("string", "promptlab version that made the run (Run.provenance)."),
    "litellm_version": ("string", "litellm version that made the run."),
    "prompts_hash": ("string", "sha256 (16 hex) over the role prompt templates the run used: runs made under "
                     "different role prompts differ here."),
    "task_hash": ("string", "sha256 (16 hex) of the task, its examples and its split."),
    "experiment_hash": ("string", "Hash of the experiment file (set by the sweep); <NA> outside a sweep."),
    "reported_models": ("string", "JSON text: per role, the model requested, the id the provider reported and "
                        "the endpoint identity (never a key)."),
}
"""Runs: one row per run."""

CELL_COLUMNS: Columns = {
    "cell_id": ("string", "Cell directory name."),
    "status": ("string", "ok, failed, incomplete (no status.json yet) or corrupt (unreadable files)."),
    "error_kind": ("string", "Kind of the cell's error (failed or corrupt cells), else <NA>."),
    "error": ("string", "The cell's error message (failed or corrupt cells), else <NA>."),
    "n_runs": ("Int64", "Runs the cell recorded (from status.json)."),
    "wall_time_s": ("Float64", "Wall-clock seconds of the cell."),
    "finished_at": ("string", "UTC time status.json was written (ISO 8601)."),
}
"""Cells: one row per cell directory, whatever its status, followed by the cell's params."""

CONFIG_COLUMNS = frozenset({"loop", "generator_model", "critic_model", "target_model", "score_source"})
"""Param names that may repeat a documented column: the frames copy these from the run's config, so the
column and the param agree (the run record's value is used there)."""


class CellError(BaseModel):
    """Why a cell failed."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    """SweepCellError (the cell's code raised: a bug or a bad config) or "infrastructure" (a provider outage,
    a missing key, a run left incomplete): either way the cell is re-run by the next sweep."""
    message: str
    """What went wrong."""
    notebook: str | None = None
    """Executed notebook holding the traceback (papermill executor)."""
    cell_index: int | None = None
    """Index of the notebook cell that raised."""
    ename: str | None = None
    """Exception name reported by the kernel."""
    evalue: str | None = None
    """Exception value reported by the kernel."""


class CellStatus(BaseModel):
    """The status.json of a cell directory, written last."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Format version."""
    cell_id: str
    """The cell's id (its directory name)."""
    params: dict[str, str | int | float | bool | None]
    """The cell's parameters (flat JSON scalars; always 'loop')."""
    status: str
    """'ok' or 'failed' (a cell with an incomplete run is failed, never ok, so a re-run retries it)."""
    error: CellError | None = None
    """Why it failed (None when ok)."""
    n_runs: int
    """Runs recorded in runs.jsonl."""
    wall_time_s: float
    """Wall-clock seconds the cell took."""
    finished_at: str
    """UTC time of writing (ISO 8601)."""


@dataclass(frozen=True)
class Results:
    """A loaded results directory: the frames of its ok cells and one row per cell directory."""

    trajectories: pd.DataFrame
    """One row per run x iteration x criterion (TRAJECTORY_COLUMNS + params)."""
    runs: pd.DataFrame
    """One row per run (RUN_COLUMNS + params)."""
    cells: pd.DataFrame
    """One row per cell directory (CELL_COLUMNS + params)."""
    path: Path
    """The results directory."""

    def iterations(self) -> pd.DataFrame:
        """The trajectories deduplicated to one row per run x iteration (see `iteration_frame`)."""
        return iteration_frame(self.trajectories)

    def __repr__(self) -> str:
        counts = self.cells["status"].value_counts().to_dict() if len(self.cells) else {}
        return (f"Results({str(self.path)!r}: {len(self.runs)} runs, {len(self.trajectories)} trajectory rows, "
                f"cells {counts})")


# writing ----------------------------------------------------------------------------------------
def write_cell(results_dir: str | os.PathLike[str], cell_id: str, params: Mapping[str, Any], runs: Sequence[Run],
               *, error: Mapping[str, Any] | None = None, wall_time_s: float = 0.0) -> Path:
    """Write one cell's files atomically, status.json last.

    Args:
        results_dir: The sweep's results directory (created if missing).
        cell_id: The cell's id, used as its directory name.
        params: Flat dict of JSON scalars (always "loop"); the names become frame columns.
        runs: The cell's runs (partial runs are fine for a failed cell).
        error: Why the cell failed ({"kind", "message", "notebook", "cell_index", "ename", "evalue"});
            the status is "failed" when given, else "ok" -- unless a run is incomplete (an infrastructure
            failure touched it): then the cell is failed with kind "infrastructure" (see `incomplete_error`).
        wall_time_s: Wall-clock seconds the cell took.

    Returns:
        The cell directory.
    """
    import pyarrow.parquet as pq

    params = _check_params(params)
    error = error if error is not None else incomplete_error(runs)
    cell_error = None
    if error is not None:
        try:
            cell_error = CellError.model_validate(dict(error))
        except ValidationError as e:
            raise ConfigError(f"write_cell({cell_id!r}): bad error dict: {e}") from e
    traj, run_rows = _columns(runs, params, cell_id)
    cell_dir = _cell_dir(results_dir, cell_id)
    cell_dir.mkdir(parents=True, exist_ok=True)
    # a re-run must not leave the old status pointing at half-replaced files
    (cell_dir / "status.json").unlink(missing_ok=True)
    _atomic_write(cell_dir / "runs.jsonl", "".join(r.model_dump_json() + "\n" for r in runs).encode())
    for name, columns, spec in (("trajectories.parquet", traj, TRAJECTORY_COLUMNS),
                                 ("runs.parquet", run_rows, RUN_COLUMNS)):
        table = _arrow_table(columns, spec, params)
        _atomic_write(cell_dir / name, functools.partial(pq.write_table, table))
    status = CellStatus(cell_id=cell_id, params=params, status="failed" if cell_error else "ok",
                        error=cell_error, n_runs=len(runs), wall_time_s=float(wall_time_s),
                        finished_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    _atomic_write(cell_dir / "status.json", status.model_dump_json(indent=1).encode())
    return cell_dir


def incomplete_error(runs: Sequence[Run]) -> dict[str, Any] | None:
    """The error of a cell whose runs include an incomplete one (`Run.incomplete`), else None.

    An infrastructure failure (provider error after retries, missing key) is not research data: the cell
    must not be "ok", so the next sweep runs it again (its successful calls replay from the cache)."""
    broken = [r for r in runs if r.incomplete]
    if not broken:
        return None
    first = next(e for e in broken[0].errors if e.infrastructure)
    return {"kind": "infrastructure",
            "message": f"{len(broken)} of {len(runs)} run(s) incomplete (infrastructure failure; re-run the sweep "
                       f"to retry): task {broken[0].task.id}, role {first.role}: {first.kind}: {first.message}",
            "ename": first.kind, "evalue": first.message}


def cell_status(results_dir: str | os.PathLike[str], cell_id: str) -> dict[str, Any] | None:
    """The parsed status.json of a cell, or None if it is missing or unreadable."""
    status, _ = _read_status(_cell_dir(results_dir, cell_id))
    return status.model_dump(mode="json") if status is not None else None


def read_runs(results_dir: str | os.PathLike[str], cell_id: str) -> list[Run]:
    """The lossless Run records of a cell (its runs.jsonl)."""
    path = _cell_dir(results_dir, cell_id) / "runs.jsonl"
    return [Run.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def _atomic_write(path: Path, data: bytes | Callable[[str], object]) -> None:
    """Write bytes (or call `data(tmp_path)`) to a temp file beside `path`, fsync it, then os.replace."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if isinstance(data, bytes):
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        else:
            os.close(fd)
            data(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cell_dir(results_dir: str | os.PathLike[str], cell_id: str) -> Path:
    if not isinstance(cell_id, str) or not cell_id or cell_id.startswith(".") or len(cell_id) > 200 \
            or any(c in cell_id for c in "/\\\0"):
        raise ConfigError(f"cell_id {cell_id!r} cannot be a directory name (no '/', '\\', leading '.', "
                          f"at most 200 characters)")
    return Path(results_dir) / "cells" / cell_id


def _check_params(params: Mapping[str, Any]) -> dict[str, Any]:
    reserved = (set(TRAJECTORY_COLUMNS) | set(RUN_COLUMNS) | set(CELL_COLUMNS)) - CONFIG_COLUMNS
    out: dict[str, Any] = {}
    for name, value in params.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"params: names must be non-empty strings, got {name!r}")
        if name in reserved:
            raise ConfigError(f"params.{name}: the name is a documented frame column; rename the parameter")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ConfigError(f"params.{name}: must be a JSON scalar (str, int, float, bool, None), "
                              f"got {type(value).__name__}")
        out[name] = value
    return out


# frames -----------------------------------------------------------------------------------------
def tidy(runs: Sequence[Run], params: Mapping[str, Any], cell_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One cell's rows of the trajectories and runs frames.

    Args:
        runs: The cell's runs.
        params: The cell's params (become columns, placed first).
        cell_id: The cell's id.

    Returns:
        (trajectories, runs) frames with the documented columns and dtypes.
    """
    params = _check_params(params)
    traj, rows = _columns(runs, params, cell_id)
    dtypes = {name: _param_dtype([value]) for name, value in params.items()}
    return (_frame(traj, TRAJECTORY_COLUMNS, params, dtypes, len(traj["run_id"]), params_first=True),
            _frame(rows, RUN_COLUMNS, params, dtypes, len(rows["run_id"]), params_first=True))


def _columns(runs: Sequence[Run], params: Mapping[str, Any], cell_id: str) -> tuple[dict[str, list[Any]],
                                                                                     dict[str, list[Any]]]:
    """The documented columns of one cell's trajectories and runs rows, as plain lists (no pandas)."""
    traj: dict[str, list[Any]] = {name: [] for name in TRAJECTORY_COLUMNS}
    rows: dict[str, list[Any]] = {name: [] for name in RUN_COLUMNS}
    for run in runs:
        if "loop" in params and params["loop"] != run.loop:
            raise ConfigError(f"cell {cell_id}: params.loop is {params['loop']!r} but run {run.run_id} "
                              f"is of loop {run.loop!r}")
        base = {"cell_id": cell_id, "run_id": run.run_id, "loop": run.loop, "task_id": run.task.id,
                "sample": run.sample}
        for it in run.iterations:
            tin, tout, cost, calls, hits = _usage(it.steps)
            level = dict(base, iteration=it.index, average=it.average, decision=it.decision,
                         stop_reason=run.stop_reason, input_tokens=tin, output_tokens=tout, cost_usd=cost,
                         calls=calls, cache_hits=hits,
                         n_errors=sum(1 for e in run.errors if e.iteration == it.index),
                         decision_score=it.decision_score, score_source=run.config.get("score_source"),
                         **_grounded("grounded", it.grounded))
            scored: list[tuple[str | None, str | None, float | None]] = \
                [(s.criterion, s.judge, s.score) for s in it.scores] or [(None, None, None)]
            for criterion, judge, score in scored:
                _append(traj, dict(level, criterion=criterion, judge=judge, score=score,
                                   critic_model=_critic_model(run, judge)))
        tin, tout, cost, _, _ = _usage([*run.setup, *(s for it in run.iterations for s in it.steps), *run.final])
        finals = [s.score for s in run.final_scores if s.score is not None]
        cfg, t, first = run.config, run.totals, run.errors[0] if run.errors else None
        _append(rows, dict(
            base, generator_model=cfg.get("generator_model") or cfg.get("model"),
            critic_model=cfg.get("critic_model") or cfg.get("model"),
            final_score=run.iterations[-1].average if run.iterations else None, best_score=run.best_score,
            best_iteration=run.best_iteration, final_output_score=sum(finals) / len(finals) if finals else None,
            iterations_used=len(run.iterations), stop_reason=run.stop_reason, calls=t.calls,
            cache_hits=t.cache_hits, failed_calls=t.failed_calls, input_tokens=tin, output_tokens=tout,
            tokens=tin + tout, cost_usd=cost, spent_tokens=t.input_tokens + t.output_tokens,
            spent_cost_usd=t.cost_usd, wall_time_s=t.wall_time_s, n_errors=len(run.errors),
            error=f"{first.kind}: {first.message}" if first else None, **_grounded_run(run)))
    return traj, rows


def _grounded(prefix: str, g: GroundedScore | None) -> dict[str, Any]:
    """score, n and CI of a grounded measure as `<prefix>_score`, `<prefix>_n`, `<prefix>_ci_*` columns."""
    return {f"{prefix}_score": g.score if g else None, f"{prefix}_n": g.n if g else None,
            f"{prefix}_ci_low": g.ci_low if g else None, f"{prefix}_ci_high": g.ci_high if g else None}


def _critic_model(run: Run, judge: str | None) -> str | None:
    """The model behind a score's judge ('critic[k]' names a role in Run.models), else the judging role's."""
    cfg = run.config
    if judge is not None and judge in run.models:
        return run.models[judge]
    return run.models.get("evaluator") or cfg.get("critic_model") or cfg.get("model")


def _grounded_run(run: Run) -> dict[str, Any]:
    """The run-level grounded, decision and provenance columns."""
    cfg, prov, d = run.config, run.provenance, run.delta
    prompts = prov.get("prompt_hashes")
    source = cfg.get("score_source")
    return {
        "score_source": source,
        "target_model": (run.models.get("target") or cfg.get("target_model") or cfg.get("generator_model")
                         or cfg.get("model")) if source is not None else None,
        **_grounded("baseline_test", run.baseline_test), **_grounded("final_test", run.final_test),
        "delta": d.value if d else None, "delta_n": d.n if d else None,
        "delta_ci_low": d.ci_low if d else None, "delta_ci_high": d.ci_high if d else None,
        "final_iteration": run.info.get("final_iteration"),
        "promptlab_version": prov.get("promptlab_version"), "litellm_version": prov.get("litellm_version"),
        "prompts_hash": hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()[:16]
        if prompts else None,
        "task_hash": prov.get("task_hash"), "experiment_hash": prov.get("experiment_hash"),
        "reported_models": json.dumps(prov["models"], sort_keys=True) if prov.get("models") else None,
    }


_ARROW_TYPES = {"Float64": "float64", "Int64": "int64", "string": "string", "boolean": "bool_"}


def _arrow_table(columns: Mapping[str, list[Any]], spec: Columns, params: Mapping[str, Any]) -> Any:
    """A pyarrow table of the params (first) and the documented columns, built without pandas.

    It goes through pyarrow's JSON reader with an explicit schema because converting Python lists with
    `pa.array` imports pandas (~0.2 s in every sweep cell's kernel); `load` restores the pandas dtypes.
    """
    import pyarrow as pa
    import pyarrow.json as pj

    fields: list[Any] = []
    constants: dict[str, Any] = {}
    for name, value in params.items():
        if name not in spec:
            dtype = _param_dtype([value])
            constants[name] = None if value is None else (str(value) if dtype == "string" else value)
            fields.append((name, getattr(pa, _ARROW_TYPES[dtype])()))
    fields += [(name, getattr(pa, _ARROW_TYPES[dtype])()) for name, (dtype, _) in spec.items()]
    schema = pa.schema(fields)
    n = len(columns["run_id"])
    if n == 0:
        return schema.empty_table()

    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    lines = (json.dumps({**constants, **{name: clean(columns[name][i]) for name in spec}}) for i in range(n))
    buf = io.BytesIO("\n".join(lines).encode())
    return pj.read_json(buf, parse_options=pj.ParseOptions(explicit_schema=schema))


def iteration_frame(traj: pd.DataFrame) -> pd.DataFrame:
    """Trajectories deduplicated to one row per run x iteration (criterion, judge and score dropped).

    The iteration-level columns (average, tokens, cost, calls, ...) are repeated on every criterion row
    of the trajectories frame; sum them over this frame, not over the trajectories, to avoid overcounting.
    """
    keep = [c for c in traj.columns if c not in ("criterion", "judge", "score")]
    out = traj.drop_duplicates(subset=["cell_id", "run_id", "iteration"], keep="first")[keep]
    return out.reset_index(drop=True)


def _usage(steps: Iterable[Step]) -> tuple[int, int, float | None, int, int]:
    """(input tokens, output tokens, cost or None if unknown, calls, cache hits) of model steps."""
    tin = tout = calls = hits = 0
    cost: float | None = 0.0
    for step in steps:
        if step.call is None:
            continue
        calls += 1
        if step.error is not None:
            continue
        hits += int(step.call.cache_hit)
        tin += step.call.input_tokens or 0
        tout += step.call.output_tokens or 0
        if cost is not None:
            cost = None if step.call.cost_usd is None else round(cost + step.call.cost_usd, 10)
    return tin, tout, cost, calls, hits


def _append(columns: dict[str, list[Any]], row: dict[str, Any]) -> None:
    for name, values in columns.items():
        values.append(row[name])


def _param_dtype(values: Iterable[Any]) -> str:
    """The nullable dtype that holds every value of a param."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "boolean"
    if any(isinstance(v, bool) for v in present):
        return "string"
    if present and all(isinstance(v, int) for v in present):
        return "Int64"
    if present and all(isinstance(v, int | float) for v in present):
        return "Float64"
    return "string"


def _frame(columns: Mapping[str, list[Any]], spec: Columns, params: Mapping[str, Any],
           param_dtypes: Mapping[str, str], n: int, *, params_first: bool) -> pd.DataFrame:
    """A frame of the documented columns (given dtypes) plus one constant column per param."""
    import pandas as pd

    def _param(name: str) -> Any:
        value = params.get(name)
        dtype = param_dtypes[name]
        cells = [None if value is None else (str(value) if dtype == "string" else value)] * n
        return _array(cells, dtype)

    extra = {name: _param(name) for name in param_dtypes if name not in spec}
    documented = {name: _array(columns.get(name, [None] * n), dtype) for name, (dtype, _) in spec.items()}
    return pd.DataFrame({**extra, **documented} if params_first else {**documented, **extra})


def _array(values: Sequence[Any], dtype: str) -> Any:
    """A pandas extension array of `values` with the nullable `dtype` (None and pd.NA become <NA>)."""
    import pandas as pd

    dtype_: Any = dtype
    return pd.array(list(values), dtype=dtype_)


# loading ----------------------------------------------------------------------------------------
def load(results_dir: str | os.PathLike[str]) -> Results:
    """Load a results directory: the frames of every ok cell, and a row per cell directory.

    Cells without status "ok" are listed in `.cells` only. An ok cell whose parquet files cannot be read
    is listed with status "corrupt" (and a warning); its rows are skipped. Each cell directory counts once.

    Args:
        results_dir: The sweep's results directory.

    Returns:
        A `Results` with `.trajectories`, `.runs` and `.cells`.
    """
    import pyarrow.parquet as pq

    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory not found: {root}")
    cells_dir = root / "cells"
    dirs = sorted(p for p in cells_dir.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if cells_dir.is_dir() else []
    cells: list[dict[str, Any]] = []
    parts: list[tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]] = []
    for d in dirs:
        status, problem = _read_status(d)
        row: dict[str, Any] = {"cell_id": d.name, "status": "incomplete", "params": {}}
        if problem is not None:
            row.update(status="corrupt", error_kind="StatusError", error=problem)
        if status is not None:
            row.update(status=status.status, n_runs=status.n_runs, wall_time_s=status.wall_time_s,
                       finished_at=status.finished_at, params=status.params)
            if status.error is not None:
                row.update(error_kind=status.error.kind, error=status.error.message)
        if row["status"] == "ok":
            try:
                frames = [pq.read_table(str(d / name), use_threads=False).to_pandas(use_threads=False)
                          for name in ("trajectories.parquet", "runs.parquet")]
                for frame, spec, name in zip(frames, (TRAJECTORY_COLUMNS, RUN_COLUMNS), ("trajectories", "runs"),
                                             strict=True):
                    missing = [c for c in spec if c not in frame.columns]
                    if missing:
                        raise ValueError(f"{name}.parquet lacks columns {missing}")
                parts.append((row["params"], frames[0], frames[1]))
            except Exception as e:
                warnings.warn(f"results: skipping cell {d.name}: {type(e).__name__}: {e}", RuntimeWarning,
                              stacklevel=2)
                row.update(status="corrupt", error_kind=type(e).__name__, error=str(e))
        cells.append(row)

    names: dict[str, list[Any]] = {}
    for row in cells:
        for name, value in row["params"].items():
            names.setdefault(name, []).append(value)
    dtypes = {name: _param_dtype(values) for name, values in names.items()}
    traj = _concat([_conform(t, TRAJECTORY_COLUMNS, p, dtypes) for p, t, _ in parts],
                   _frame({}, TRAJECTORY_COLUMNS, {}, dtypes, 0, params_first=True))
    runs = _concat([_conform(r, RUN_COLUMNS, p, dtypes) for p, _, r in parts],
                   _frame({}, RUN_COLUMNS, {}, dtypes, 0, params_first=True))
    cell_frames = [_frame({k: [row.get(k)] for k in CELL_COLUMNS}, CELL_COLUMNS, row["params"], dtypes, 1,
                          params_first=False) for row in cells]
    cell_frame = _concat(cell_frames, _frame({}, CELL_COLUMNS, {}, dtypes, 0, params_first=False))
    return Results(trajectories=traj, runs=runs, cells=cell_frame, path=root)


def _conform(frame: pd.DataFrame, spec: Columns, params: Mapping[str, Any],
             dtypes: Mapping[str, str]) -> pd.DataFrame:
    """A cell's frame with every param column of the directory (unified dtypes) and documented dtypes."""
    return _frame({name: list(frame[name]) for name in spec}, spec, params, dtypes, len(frame), params_first=True)


def _concat(frames: list[pd.DataFrame], empty: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    frames = [f for f in frames if len(f)]
    if not frames:
        return empty
    return pd.concat(frames, ignore_index=True)[list(empty.columns)]


def _read_status(cell_dir: Path) -> tuple[CellStatus | None, str | None]:
    """(status, None), (None, None) when status.json is missing, or (None, problem) when unreadable."""
    path = cell_dir / "status.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"status.json unreadable: {e}"
    try:
        return CellStatus.model_validate_json(text), None
    except ValidationError as e:
        return None, f"status.json invalid: {e.error_count()} error(s): {e.errors()[0]['msg']}"
