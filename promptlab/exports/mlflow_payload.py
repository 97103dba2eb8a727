"""What promptlab writes to MLflow for one loop run and for a sweep, as plain values (no MLflow import here).

More in docs/exports.md, section "promptlab.exports.mlflow_payload".
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..record import Run
from ..results.frames import frame_columns
from ..results.labels import Labelling
from ..sanitize import Cleaner
from .run_names import run_row

MAX_PARAM_CHARS = 6000
"""MLflow's limit on a param value (mlflow.utils.validation.MAX_PARAM_VAL_LENGTH)."""
MAX_TAG_CHARS = 8000
"""MLflow's limit on a tag value."""
MAX_KEY_CHARS = 250
"""MLflow's limit on a param, tag or metric name."""
CUT = " [cut]"
"""Ends a value cut to MLflow's limit."""

HISTORIES: dict[str, str | tuple[str, ...]] = {
    "iteration/critic_score": "critic_score",
    "iteration/dev_accuracy": "grounded_score",
    "iteration/tokens": ("input_tokens", "output_tokens"),
    "iteration/cost_usd": "cost_usd",
    "iteration/calls": "calls",
    "iteration/decision_score": "decision_score",
    "iteration/cum_tokens": "cum_tokens",
    "iteration/cum_cost_usd": "cum_cost_usd",
    "iteration/test_accuracy": "test_score",
}
"""Metric history -> the trajectories column(s) it reads (a tuple is summed), one point per iteration."""
FINALS = {
    "test/start_accuracy": "baseline_test_score",
    "test/final_accuracy": "final_test_score",
    "test/gain": "delta",
    "test/gain_ci_low": "delta_ci_low",
    "test/gain_ci_high": "delta_ci_high",
    "run/calls": "calls",
    "run/tokens": "tokens",
    "run/cost_usd": "cost_usd",
    "run/best_score": "best_score",
    "run/final_score": "final_score",
    "run/iterations_used": "iterations_used",
    "run/n_errors": "n_errors",
    "run/wall_time_s": "wall_time_s",
}
"""Final metric -> the runs column it reads (logged once, at step 0)."""
RUN_ID_TAG = "promptlab.run_id"
"""The tag a nested run is found by: the promptlab run's id."""
DIGEST_TAG = "promptlab.export_digest"
"""Set last on a nested run, to the digest of what was logged: a run that has it needs nothing more."""
RESULTS_TAG = "promptlab.results_dir"
"""The tag the sweep's parent run is found by: the results directory's absolute path."""
ROLE_TAG = "promptlab.role"
"""'sweep' on a parent run, 'run' on a loop run."""


@dataclass(frozen=True)
class RunPayload:
    """Everything logged for one loop run."""

    run_id: str
    name: str
    params: dict[str, str]
    tags: dict[str, str]
    metrics: list[tuple[str, float, int]]
    """(key, value, step), histories in step order."""
    record: str
    """The run's JSON record (cleaned)."""
    start_ms: int
    end_ms: int
    digest: str = field(default="")

    def with_digest(self) -> RunPayload:
        """The payload with `digest` set: sha256 over all of it (what `DIGEST_TAG` holds once it is logged)."""
        body = json.dumps([self.name, self.params, self.tags, self.metrics, self.record], sort_keys=True)
        return RunPayload(**{**self.__dict__, "digest": hashlib.sha256(body.encode()).hexdigest()[:32]})


def run_payloads(
    runs: Sequence[Run],
    cell_id: str,
    cell_params: Mapping[str, Any],
    clean: Cleaner | None = None,
    labelling: Labelling | None = None,
) -> list[RunPayload]:
    """The payloads of one finished cell's runs, read from its runs.jsonl (rows built as the tidy frames build
    them); each run named by `labelling` (the sweep's, `run_names.sweep_labelling`; default: by what differs
    between these runs)."""
    traj, rows = frame_columns(runs, cell_params, cell_id)
    clean = clean or Cleaner()
    name = labelling or Labelling.of(
        [run_row(cell_params, {key: values[i] for key, values in rows.items()}) for i in range(len(runs))],
        [*cell_params, "task_id", "sample"],
    )
    out = []
    for i, run in enumerate(runs):
        row = {key: values[i] for key, values in rows.items()}
        its = _iteration_rows(traj, run.run_id)
        payload = _payload(run, cell_id, cell_params, row, its, clean)
        out.append(replace(payload, name=clean(name(run_row(cell_params, row)))).with_digest())
    return out


def _iteration_rows(traj: Mapping[str, list[Any]], run_id: str) -> list[dict[str, Any]]:
    """The run's trajectory rows deduplicated to one per iteration (as `iteration_frame` does)."""
    seen: dict[int, dict[str, Any]] = {}
    for i, rid in enumerate(traj["run_id"]):
        if rid == run_id and traj["iteration"][i] not in seen:
            seen[traj["iteration"][i]] = {name: values[i] for name, values in traj.items()}
    return list(seen.values())


def _payload(
    run: Run,
    cell_id: str,
    cell_params: Mapping[str, Any],
    row: Mapping[str, Any],
    iterations: list[dict[str, Any]],
    clean: Cleaner,
) -> RunPayload:
    params: dict[str, Any] = {"loop": run.loop, "task_id": run.task.id, "sample": run.sample, "cell_id": cell_id}
    params.update({k: v for k, v in run.config.items()})
    params.update({key_of(f"model.{role}"): model for role, model in run.models.items()})
    params.update({k: v for k, v in cell_params.items() if k not in params})
    tags: dict[str, Any] = {
        ROLE_TAG: "run",
        RUN_ID_TAG: run.run_id,
        "promptlab.cell_id": cell_id,
        "promptlab.version": run.provenance.get("promptlab_version"),
        "promptlab.stop_reason": run.stop_reason,
    }
    tags.update({f"provenance.{k}": v for k, v in run.provenance.items()})
    for key in ("commit", "git_commit"):
        if isinstance(run.provenance.get(key), str):
            tags["mlflow.source.git.commit"] = run.provenance[key]
    metrics = [
        (key, value, int(it["iteration"]))
        for key, column in HISTORIES.items()
        for it in iterations
        if (value := _number(it, column)) is not None
    ]
    metrics += [(key, value, 0) for key, column in FINALS.items() if (value := _number(row, column)) is not None]
    start = int(run.started_at * 1000)
    return RunPayload(
        run_id=run.run_id,
        name=run.run_id,  # named by the sweep's labelling (`run_payloads`)
        params={key_of(k): _cut(clean(text_of(v)), MAX_PARAM_CHARS) for k, v in params.items()},
        tags={key_of(k): _cut(clean(text_of(v)), MAX_TAG_CHARS) for k, v in tags.items() if v is not None},
        metrics=metrics,
        record=clean(run.model_dump_json(indent=1)),
        start_ms=start,
        end_ms=start + int(run.totals.wall_time_s * 1000),
    )


def key_of(name: str) -> str:
    """A param or tag name as MLflow takes it: `critic[1]` reads `critic.1`, any other character MLflow refuses
    (it takes letters, digits, `_-. :/`) becomes `_`."""
    name = re.sub(r"\[(\w+)\]", r".\1", name)
    return re.sub(r"[^\w\-. :/]", "_", name)[:MAX_KEY_CHARS]


def text_of(value: Any) -> str:
    """A param or tag value as MLflow stores it: a string as it is, anything else as JSON text."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _number(row: Mapping[str, Any], column: str | tuple[str, ...]) -> float | None:
    """A finite number from the row (the sum of the columns for a tuple), else None."""
    names = (column,) if isinstance(column, str) else column
    values = [row.get(n) for n in names]
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) < len(values):
        return None
    total = sum(numbers)
    return total if math.isfinite(total) else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT


__all__ = [
    "DIGEST_TAG",
    "FINALS",
    "HISTORIES",
    "MAX_PARAM_CHARS",
    "MAX_TAG_CHARS",
    "RESULTS_TAG",
    "ROLE_TAG",
    "RUN_ID_TAG",
    "RunPayload",
    "key_of",
    "run_payloads",
    "text_of",
]
