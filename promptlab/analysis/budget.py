"""Equal budget: what each run would have returned had it stopped at a given spend, read off its logged
trajectory by truncation (no model calls), and paired comparisons at one budget. Re-exported by
`promptlab.analysis`.

Runs of different loops differ in cost by several times, so comparing their final scores mixes quality with
spend. `equal_budget` compares them at the same spend instead: at each budget point B (in tokens or calls,
counted as `RunContext.spent` counts: every call but test-split measurement, a cache hit with its original
call's tokens), a run returns the incumbent of its last decision whose cumulative spend is at most B
(`Iteration.incumbent`: the candidate the loop's own selection rule would return at that point). With no
decision within B it returns its starting prompt. Its dev score is that candidate's `Iteration.grounded`, its
test score `Iteration.test` (the starting prompt's is `Run.baseline_test`, the final prompt's
`Run.final_test`; every other incumbent has one when the run measured incumbents, `test_incumbents`).

Exact by truncation: a loop's generation does not depend on its budget (it only stops), so the first
decisions of a logged run are what it would have decided under any smaller budget. A point is exact for a
run when it lies within the logged spend, or when the run ended by its own rule (not by its budget), after
which more budget changes nothing. A point past the spend of a run its budget stopped is inexact: the row
uses what the run returned and is counted in n_runs but not in n_exact. A run capped at B itself may stop up
to one step before its last decision within B (its step's estimate), which this truncation does not model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..eval.stats import bootstrap_ci, exact_mean, present
from ..record import Run
from ..results.order import canonical_rows
from .paired import compare

if TYPE_CHECKING:
    import pandas as pd

    from ..results.store import Results

Unit = Literal["tokens", "calls"]
BUDGET_STOP = "budget"
"""The stop reason of a run its budget stopped (`promptlab.loops.runtime.budget.BUDGET`)."""

PER_RUN_COLUMNS = [
    "cell_id",
    "run_id",
    "task_id",
    "sample",
    "point",
    "returned_iteration",
    "exact",
    "spend",
    "dev",
    "test",
]
"""Columns of `equal_budget(..., per_run=True)` after the `by` columns."""


def equal_budget(
    runs_or_results: Results | pd.DataFrame | Sequence[Run],
    budget: Unit = "tokens",
    by: str | Sequence[str] = "loop",
    points: Sequence[float] | None = None,
    *,
    runs: pd.DataFrame | None = None,
    per_run: bool = False,
) -> pd.DataFrame:
    """Per configuration and budget point, the dev and test score of the prompt each run would return if it
    stopped there (see the module docstring), with n and a 95% CI over runs.

    Args:
        runs_or_results: A `Results`, a list of `Run`s, or a trajectories frame (then pass `runs`, the runs
            frame, for the starting and final prompts' test scores and each run's stop).
        budget: "tokens" (input + output, original figures) or "calls".
        by: Columns that group runs into configurations (default the loop).
        points: Budget points; default ten, evenly spaced up to the largest spend of any run.
        runs: The runs frame when `runs_or_results` is a trajectories frame.
        per_run: Return one row per run x point (`PER_RUN_COLUMNS`) instead of the summary.

    Returns:
        One row per `by` x point: n_runs, n_exact, spend_mean (what the truncated runs had spent), dev_n,
        dev_mean, dev_ci_low, dev_ci_high, test_n, test_mean, test_ci_low, test_ci_high (bootstrap intervals
        of the mean over runs, `promptlab.eval.stats.bootstrap_ci`). Runs without incumbents (PES, PCEE,
        records made before budgets) are left out.
    """
    import pandas as pd

    from ..results.frames import iteration_frame, tidy

    if budget not in ("tokens", "calls"):
        raise ValueError(f"budget must be 'tokens' or 'calls', got {budget!r}")
    traj, run_frame = _frames(runs_or_results, runs, tidy)
    by_cols = [by] if isinstance(by, str) else list(by)
    column = f"cum_{budget}"
    its = iteration_frame(traj)
    its = its[its["incumbent"].notna() & its[column].notna()] if len(its) else its
    info = _run_info(run_frame)
    if points is None:
        top = max([float(v) for v in its[column]] + [float(v["total"][budget] or 0) for v in info.values()] or [0])
        points = [round(top * k / 10) for k in range(1, 11)] if top > 0 else []
    rows: list[dict[str, Any]] = []
    for (cell, run_id), g in its.groupby(["cell_id", "run_id"], sort=False):
        g = g.sort_values([column, "iteration"], kind="stable")
        first = g.iloc[0]
        meta = info.get((cell, run_id)) or {"stop_reason": first["stop_reason"], "total": {}}
        by_index = {int(i): r for i, r in zip(g["iteration"], g.itertuples(), strict=True)}
        for point in points:
            kept = g[g[column] <= point]
            total = meta["total"].get(budget)
            total = float(g[column].max()) if total is None else total  # without the runs frame: the last decision
            own_stop = meta.get("stop_reason") not in (BUDGET_STOP, None)
            if total is not None and point >= total and meta.get("final_iteration") is not None:
                returned: int | None = int(meta["final_iteration"])
            elif len(kept):
                returned = int(kept["incumbent"].astype(int).iloc[-1])
            else:
                returned = 0 if 0 in by_index else None
            spend = float(kept.iloc[-1][column]) if len(kept) else 0.0
            rows.append(
                {
                    **{c: first[c] for c in by_cols},
                    "cell_id": cell,
                    "run_id": run_id,
                    "task_id": first["task_id"],
                    "sample": first["sample"],
                    "point": point,
                    "returned_iteration": returned,
                    "exact": own_stop or point <= total,
                    "spend": spend,
                    "dev": _value(by_index, returned, "grounded_score"),
                    "test": _test(by_index, returned, meta),
                }
            )
    detail = pd.DataFrame(rows, columns=[*by_cols, *PER_RUN_COLUMNS])
    return detail if per_run else _summarise(detail, by_cols)


def compare_at_budget(
    runs_or_results: Results | pd.DataFrame | Sequence[Run],
    point: float,
    budget: Unit = "tokens",
    by: str | Sequence[str] = "loop",
    metric: str = "test",
    reference: str | None = None,
    *,
    runs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Paired differences between configurations at one budget point: `analysis.compare` of the scores the
    runs would return there (`metric` "test" or "dev"), pairs matched on (task_id, sample), Holm-corrected."""
    detail = equal_budget(runs_or_results, budget, by, [point], runs=runs, per_run=True)
    return compare(detail, by=by, metric=metric, reference=reference)


def _frames(source: Any, runs: pd.DataFrame | None, tidy: Any) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(trajectories, runs frame or None) of a Results, a list of Runs or a trajectories frame, in the canonical
    order (`promptlab.results.order`: by cell, task, replicate and iteration, not by run id or finishing order)."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        traj, run_frame = source, runs
    elif isinstance(source, Sequence):
        traj, run_frame = tidy(list(source), {}, "runs")
    else:
        traj, run_frame = source.trajectories, source.runs
    return canonical_rows(traj), None if run_frame is None else canonical_rows(run_frame)


def _run_info(run_frame: pd.DataFrame | None) -> dict[tuple[Any, Any], dict[str, Any]]:
    """(cell_id, run_id) -> the run's stop reason, final iteration, start and final test scores, total spend."""
    import pandas as pd

    if run_frame is None or run_frame.empty:
        return {}

    def val(v: Any) -> Any:
        return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v

    out = {}
    for r in run_frame.to_dict("records"):
        out[(r["cell_id"], r["run_id"])] = {
            "stop_reason": val(r.get("stop_reason")),
            "final_iteration": val(r.get("final_iteration")),
            "baseline_test": val(r.get("baseline_test_score")),
            "final_test": val(r.get("final_test_score")),
            "total": {"tokens": val(r.get("cum_tokens")), "calls": val(r.get("cum_calls"))},
        }
    return out


def _value(by_index: dict[int, Any], iteration: int | None, column: str) -> float | None:
    """A column of the run's iteration `iteration` (None when absent or <NA>)."""
    import pandas as pd

    row = by_index.get(iteration) if iteration is not None else None
    v = getattr(row, column, None) if row is not None else None
    return None if v is None or pd.isna(v) else float(v)


def _test(by_index: dict[int, Any], iteration: int | None, meta: dict[str, Any]) -> float | None:
    """The returned prompt's test score: its own measure, else the start's or the final prompt's."""
    value = _value(by_index, iteration, "test_score")
    if value is not None:
        return value
    if iteration is None or iteration == 0:
        return meta.get("baseline_test")
    if meta.get("final_iteration") is not None and iteration == int(meta["final_iteration"]):
        return meta.get("final_test")
    return None


def _summarise(detail: pd.DataFrame, by_cols: list[str]) -> pd.DataFrame:
    """The per-run rows as means over runs with n and bootstrap CIs, per `by` x point."""
    import pandas as pd

    rows = []
    for key, g in detail.groupby([*by_cols, "point"], sort=True, dropna=False):
        parts: list[Any] = [*key, len(g), int(g["exact"].sum()), exact_mean([float(v) for v in g["spend"]])]
        for col in ("dev", "test"):
            xs = present(list(g[col]))
            parts += [len(xs), *((exact_mean(xs), *bootstrap_ci(xs)) if xs else (None, None, None))]
        rows.append(parts)
    cols = [
        *by_cols,
        "point",
        "n_runs",
        "n_exact",
        "spend_mean",
        "dev_n",
        "dev_mean",
        "dev_ci_low",
        "dev_ci_high",
        "test_n",
        "test_mean",
        "test_ci_low",
        "test_ci_high",
    ]
    out = pd.DataFrame(rows, columns=cols)
    for c in cols[len(by_cols) + 1 :]:
        out[c] = out[c].astype("Int64" if c in ("n_runs", "n_exact", "dev_n", "test_n") else "Float64")
    return out


__all__ = ["PER_RUN_COLUMNS", "Unit", "compare_at_budget", "equal_budget"]
