"""Runs as tidy rows: the trajectories and runs frames of one cell, built without pandas where it counts.

`tidy` gives a cell's frames; `frame_columns` gives the same rows as plain lists (what `write_cell` turns
into parquet through `arrow_table`, so a sweep cell's kernel never imports pandas); `iteration_frame`
dedupes the trajectories to one row per run x iteration. The columns are documented in
`promptlab.results.columns`; the metric definitions are in `promptlab.results`' docstring.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, PromptlabWarning
from ..llm.spending.tally import Tally
from ..record import GroundedScore, Run, Step
from .columns import CELL_COLUMNS, CONFIG_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS, Columns

if TYPE_CHECKING:
    import pandas as pd


def check_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params as a dict, checked: non-empty string names that are not documented columns, JSON scalar values."""
    reserved = (set(TRAJECTORY_COLUMNS) | set(RUN_COLUMNS) | set(CELL_COLUMNS)) - CONFIG_COLUMNS
    out: dict[str, Any] = {}
    for name, value in params.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"params: names must be non-empty strings, got {name!r}")
        if name in reserved:
            raise ConfigError(f"params.{name}: the name is a documented frame column; rename the parameter")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ConfigError(
                f"params.{name}: must be a JSON scalar (str, int, float, bool, None), got {type(value).__name__}"
            )
        out[name] = value
    return out


def tidy(runs: Sequence[Run], params: Mapping[str, Any], cell_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One cell's rows of the trajectories and runs frames.

    Args:
        runs: The cell's runs.
        params: The cell's params (become columns, placed first).
        cell_id: The cell's id.

    Returns:
        (trajectories, runs) frames with the documented columns and dtypes.
    """
    params = check_params(params)
    traj, rows = frame_columns(runs, params, cell_id)
    dtypes = {name: param_dtype([value]) for name, value in params.items()}
    return (
        build_frame(traj, TRAJECTORY_COLUMNS, params, dtypes, len(traj["run_id"]), params_first=True),
        build_frame(rows, RUN_COLUMNS, params, dtypes, len(rows["run_id"]), params_first=True),
    )


def frame_columns(
    runs: Sequence[Run], params: Mapping[str, Any], cell_id: str
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The documented columns of one cell's trajectories and runs rows, as plain lists (no pandas)."""
    traj: dict[str, list[Any]] = {name: [] for name in TRAJECTORY_COLUMNS}
    rows: dict[str, list[Any]] = {name: [] for name in RUN_COLUMNS}
    for run in runs:
        if "loop" in params and params["loop"] != run.loop:
            raise ConfigError(
                f"cell {cell_id}: params.loop is {params['loop']!r} but run {run.run_id} is of loop {run.loop!r}"
            )
        base = {
            "cell_id": cell_id,
            "run_id": run.run_id,
            "loop": run.loop,
            "task_id": run.task.id,
            "sample": run.sample,
        }
        for row in trajectory_rows(run, base):
            _append(traj, row)
        _append(rows, run_row(run, base))
    return traj, rows


def trajectory_rows(run: Run, base: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's trajectories rows (`base` columns plus one row per iteration x score; an unscored iteration
    gives one row without a score)."""
    out: list[dict[str, Any]] = []
    for it in run.iterations:
        tin, tout, cost, calls, hits = _usage(it.steps)
        level = dict(
            base,
            iteration=it.index,
            average=it.average,
            decision=it.decision,
            stop_reason=run.stop_reason,
            input_tokens=tin,
            output_tokens=tout,
            cost_usd=cost,
            calls=calls,
            cache_hits=hits,
            n_errors=sum(1 for e in run.errors if e.iteration == it.index),
            decision_score=it.decision_score,
            critic_score=it.average,
            score_source=run.config.get("score_source"),
            incumbent=it.incumbent,
            parents=",".join(map(str, it.parents)) or None,
            **_spend(it.spent),
            **_grounded("grounded", it.grounded),
            **_grounded("test", it.test),
        )
        scored: list[tuple[str | None, str | None, float | None, str | None]] = [
            (s.criterion, s.judge, s.score, s.mode) for s in it.scores
        ] or [(None, None, None, None)]
        out += [
            dict(
                level, criterion=criterion, judge=judge, score=score, mode=mode, critic_model=_critic_model(run, judge)
            )
            for criterion, judge, score, mode in scored
        ]
    return out


def run_row(run: Run, base: Mapping[str, Any]) -> dict[str, Any]:
    """The run's row of the runs frame (`base` columns plus the run-level ones)."""
    tin, tout, cost, _, _ = _usage([*run.setup, *(s for it in run.iterations for s in it.steps), *run.final])
    finals = [s.score for s in run.final_scores if s.score is not None]
    cfg, t, first = run.config, run.totals, run.errors[0] if run.errors else None
    return dict(
        base,
        generator_model=cfg.get("generator_model") or cfg.get("model"),
        critic_model=cfg.get("critic_model") or cfg.get("model"),
        final_score=run.iterations[-1].average if run.iterations else None,
        best_score=run.best_score,
        best_iteration=run.best_iteration,
        final_output_score=sum(finals) / len(finals) if finals else None,
        iterations_used=sum(it.index > 0 for it in run.iterations),
        stop_reason=run.stop_reason,
        calls=t.calls,
        cache_hits=t.cache_hits,
        failed_calls=t.failed_calls,
        input_tokens=tin,
        output_tokens=tout,
        tokens=tin + tout,
        cost_usd=cost,
        spent_tokens=t.input_tokens + t.output_tokens,
        spent_cost_usd=t.cost_usd,
        wall_time_s=t.wall_time_s,
        **_spend(run.spent),
        n_errors=len(run.errors),
        error=f"{first.kind}: {first.message}" if first else None,
        **_grounded_run(run),
    )


def _grounded(prefix: str, g: GroundedScore | None) -> dict[str, Any]:
    """score, n and CI of a grounded measure as `<prefix>_score`, `<prefix>_n`, `<prefix>_ci_*` columns."""
    return {
        f"{prefix}_score": g.score if g else None,
        f"{prefix}_n": g.n if g else None,
        f"{prefix}_ci_low": g.ci_low if g else None,
        f"{prefix}_ci_high": g.ci_high if g else None,
    }


def _spend(spent: Tally | None) -> dict[str, Any]:
    """A budget spend (`Iteration.spent`, `Run.spent`) as the cum_calls, cum_tokens and cum_cost_usd columns."""
    return {
        "cum_calls": spent.calls if spent else None,
        "cum_tokens": spent.tokens if spent else None,
        "cum_cost_usd": spent.cost_usd if spent else None,
    }


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
        "target_model": run.models.get("target")
        or (
            (cfg.get("target_model") or cfg.get("generator_model") or cfg.get("model")) if source is not None else None
        ),
        **_grounded("baseline_test", run.baseline_test),
        **_grounded("final_test", run.final_test),
        "delta": d.value if d else None,
        "delta_n": d.n if d else None,
        "delta_ci_low": d.ci_low if d else None,
        "delta_ci_high": d.ci_high if d else None,
        "final_iteration": run.info.get("final_iteration"),
        "promptlab_version": prov.get("promptlab_version"),
        "litellm_version": prov.get("litellm_version"),
        "prompts_hash": hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()[:16]
        if prompts
        else None,
        "prompt_hashes": json.dumps(prompts, sort_keys=True) if prompts else None,
        "task_hash": prov.get("task_hash"),
        "experiment_hash": prov.get("experiment_hash"),
        "reported_models": json.dumps(prov["models"], sort_keys=True) if prov.get("models") else None,
        **_fingerprints(prov.get("fingerprints")),
    }


def _fingerprints(prints: dict[str, dict[str, Any]] | None) -> dict[str, str | None]:
    """The run's inference fingerprints: their ids (sorted, space-separated) and the whole record as JSON text."""
    if not prints:
        return {"fingerprint": None, "fingerprints": None}
    ids = sorted({i for by_id in prints.values() for i in by_id})
    return {"fingerprint": " ".join(ids), "fingerprints": json.dumps(prints, sort_keys=True)}


_ARROW_TYPES = {"Float64": "float64", "Int64": "int64", "string": "string", "boolean": "bool_"}


def arrow_table(columns: Mapping[str, list[Any]], spec: Columns, params: Mapping[str, Any]) -> Any:
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
            dtype = param_dtype([value])
            constants[name] = None if value is None else (str(value) if dtype == "string" else value)
            fields.append((name, getattr(pa, _ARROW_TYPES[dtype])()))
    fields += [(name, getattr(pa, _ARROW_TYPES[dtype])()) for name, (dtype, _) in spec.items()]
    schema = pa.schema(fields)
    n = len(columns["run_id"])
    if n == 0:
        return schema.empty_table()

    def clean(v: Any, dtype: str) -> Any:
        return None if (isinstance(v, float) and math.isnan(v)) or not _in_range(v, dtype) else v

    cols = {name: bounded(name, columns[name], dtype) for name, (dtype, _) in spec.items()}
    lines = (
        json.dumps({**constants, **{name: clean(cols[name][i], spec[name][0]) for name in spec}}) for i in range(n)
    )
    buf = io.BytesIO("\n".join(lines).encode())
    return pj.read_json(buf, parse_options=pj.ParseOptions(explicit_schema=schema))


def iteration_frame(traj: pd.DataFrame) -> pd.DataFrame:
    """Trajectories deduplicated to one row per run x iteration (criterion, judge and score dropped).

    The iteration-level columns (average, tokens, cost, calls, ...) are repeated on every criterion row
    of the trajectories frame; sum them over this frame, not over the trajectories, to avoid overcounting.
    """
    keep = [c for c in traj.columns if c not in ("criterion", "judge", "score", "mode")]
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
    """Append one row's values to the column lists."""
    for name, values in columns.items():
        values.append(row[name])


def param_dtype(values: Iterable[Any]) -> str:
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


def build_frame(
    columns: Mapping[str, list[Any]],
    spec: Columns,
    params: Mapping[str, Any],
    param_dtypes: Mapping[str, str],
    n: int,
    *,
    params_first: bool,
) -> pd.DataFrame:
    """A frame of the documented columns (given dtypes) plus one constant column per param."""
    import pandas as pd

    def _param(name: str) -> Any:
        value = params.get(name)
        dtype = param_dtypes[name]
        cells = [None if value is None else (str(value) if dtype == "string" else value)] * n
        return _array(cells, dtype)

    extra = {name: _param(name) for name in param_dtypes if name not in spec}
    documented = {
        name: _array(bounded(name, columns.get(name, [None] * n), dtype), dtype) for name, (dtype, _) in spec.items()
    }
    return pd.DataFrame({**extra, **documented} if params_first else {**documented, **extra})


FIGURE_BOUND = 2**53
"""The largest magnitude a number column holds: what a float counts exactly and an int64 holds (a provider's
count past it, as an older version could record, is not a figure: `bounded`)."""


def _in_range(value: Any, dtype: str) -> bool:
    if value is None or dtype not in ("Int64", "Float64") or isinstance(value, bool):
        return True
    if not isinstance(value, (int, float)):
        return True  # pandas says what it thinks of it
    return math.isnan(value) or abs(value) <= FIGURE_BOUND  # NaN is <NA> already


def bounded(name: str, values: Sequence[Any], dtype: str) -> list[Any]:
    """A number column's values with those out of range (past FIGURE_BOUND, infinite) read as <NA>, with one
    warning naming the column: a results directory an older version wrote with such a figure still loads."""
    out = [v if _in_range(v, dtype) else None for v in values]
    dropped = sum(o is None and v is not None for o, v in zip(out, values, strict=True))
    if dropped:
        warnings.warn(
            f"results: {dropped} value(s) of {name} out of range (past 2**53, or infinite); read as <NA>",
            PromptlabWarning,
            stacklevel=3,
        )
    return out


def _array(values: Sequence[Any], dtype: str) -> Any:
    """A pandas extension array of `values` with the nullable `dtype` (None and pd.NA become <NA>)."""
    import pandas as pd

    dtype_: Any = dtype
    return pd.array(list(values), dtype=dtype_)


def conform_frame(
    frame: pd.DataFrame, spec: Columns, params: Mapping[str, Any], dtypes: Mapping[str, str]
) -> pd.DataFrame:
    """A cell's frame with every param column of the directory (unified dtypes) and documented dtypes; a
    documented column that a cell written by an older promptlab lacks is <NA> (e.g. `critic_score`)."""
    n = len(frame)
    return build_frame(
        {name: list(frame[name]) if name in frame.columns else [None] * n for name in spec},
        spec,
        params,
        dtypes,
        n,
        params_first=True,
    )


def concat_frames(frames: list[pd.DataFrame], empty: pd.DataFrame) -> pd.DataFrame:
    """The frames that have rows, concatenated in `empty`'s column order; `empty` when none has rows."""
    import pandas as pd

    frames = [f for f in frames if len(f)]
    if not frames:
        return empty
    return pd.concat(frames, ignore_index=True)[list(empty.columns)]
