"""A results directory as Inspect AI eval logs: `inspect view` shows every candidate prompt's reply on every example.

More in docs/exports.md, section "promptlab.exports.inspect_log".
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..eval.tasks import examples_of, format_prompt
from ..llm.spending.tally import Tally
from ..record import Iteration, Run
from ..results.examples import example_rows
from ..results.frames import frame_columns
from ..results.runs_file import warn_damaged
from ..results.store import ok_cells, read_cell_runs
from ..sanitize import Cleaner
from .extras import need
from .inspect_judgments import output_rows, people_scores
from .run_names import run_row, sweep_labelling

LOG_DIR = "inspect"
"""The default log folder in the results directory."""
SAMPLE_PREFIX = {
    "dev": "dev",
    "baseline_test": "test-start",
    "final_test": "test-final",
    "incumbent_test": "test-incumbent",
    "start_output": "output-start",
    "returned_output": "output-returned",
}
"""A sample id's prefix per measurement (`promptlab.results.examples`): the viewer lists dev samples first."""
OWN_LOG = re.compile(r"_[0-9a-f]{32}\.eval$")
"""The name of a log this export writes (it ends with the promptlab run id): stale ones are removed."""


class InspectLogs(list[Path]):
    """The logs an Inspect export wrote, in cell and run order, and the records it skipped."""

    damaged: list[str]
    """Records of the results directory that could not be read ('cells/<id>/runs.jsonl:<line>: why'): skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.damaged = []


def export_inspect(results_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> InspectLogs:
    """Write one Inspect `.eval` log per grounded loop run of the results directory's ok cells.

    Args:
        results_dir: A sweep's results directory.
        out: The log folder (default `RESULTS_DIR/inspect`); logs of runs no longer in the results (their cell
            was run again) are removed from it, other files are left alone.

    Returns:
        The logs written, in cell and run order (a list), with `.damaged`: the records of a runs.jsonl that could
        not be read, each skipped and named in a `DamagedRecord` warning.

    Raises:
        MissingDependencyError: inspect_ai is not installed (pip install 'promptlab-loops[inspect]').
        ConfigError: `results_dir` is not a results directory.
    """
    need("inspect_ai", "the Inspect export")
    from inspect_ai.log import write_eval_log

    results = Path(results_dir)
    folder = Path(out) if out is not None else results / LOG_DIR
    cells = ok_cells(results)
    folder.mkdir(parents=True, exist_ok=True)
    clean = Cleaner()
    label = sweep_labelling(results)
    written = InspectLogs()
    people = people_scores(results)
    for cell_id, params in cells:
        read = read_cell_runs(results, cell_id)
        warn_damaged(read)
        written.damaged += read.damaged
        rows = frame_columns(read.runs, params, cell_id)[1]
        for i, run in enumerate(read.runs):
            if not run.task.grounded and not output_rows(run):
                continue
            path = folder / log_name(run)
            name = label(run_row(params, {key: values[i] for key, values in rows.items()}))
            log = eval_log(run, cell_id, params, clean, people.get(run.run_id, {}), name=name)
            write_eval_log(log, str(path), format="eval")
            written.append(path)
    keep = {p.name for p in written}
    for stale in folder.glob("*.eval"):
        if OWN_LOG.search(stale.name) and stale.name not in keep:
            stale.unlink()
    return written


def log_name(run: Run) -> str:
    """`<started, as Inspect names logs>_<loop>-<task id>-s<sample>_<run id>.eval`."""
    started = _dt.datetime.fromtimestamp(run.started_at, _dt.UTC).strftime("%Y-%m-%dT%H-%M-%S+00-00")
    task = re.sub(r"[^\w.-]", "-", f"{run.loop}-{run.task.id}-s{run.sample}")
    return f"{started}_{task}_{run.run_id}.eval"


def epoch_of(run: Run, candidate: int | None) -> int:
    """The epoch of a candidate: candidate + 1; a final prompt that is no iteration's candidate comes after the last."""
    if candidate is not None:
        return candidate + 1
    return max((it.index for it in run.iterations), default=0) + 2


def eval_log(
    run: Run,
    cell_id: str,
    params: Mapping[str, Any],
    clean: Cleaner,
    people: Mapping[Any, Any] | None = None,
    *,
    name: str | None = None,
) -> Any:
    """The run as an Inspect `EvalLog` (status "success", every sample in it; `people`: (measure, example) -> the
    people's score of that sample, `inspect_judgments.people_scores`), shown in Inspect's log list as `name` (the
    run's label in its sweep, `run_names`; default: its loop, task and replicate)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalPlanStep, EvalSpec, EvalStats
    from inspect_ai.model import ModelConfig

    samples = eval_samples(run, cell_id, params, clean, people or {})
    label = clean(name or f"{run.loop}, {run.task.id}, replicate {run.sample}")
    target = target_model(run)
    created = iso(run.started_at)
    spec = EvalSpec(
        eval_id=run.run_id,
        run_id=run.run_id,
        created=created,
        task=label,  # what Inspect's log list shows
        task_id=run.run_id,
        task_display_name=label,
        task_args=clean(dict(params)),
        solver=run.loop,
        solver_args=clean(dict(run.config)),
        dataset=EvalDataset(
            name=run.task.id, location=run.task.examples_source, samples=len({s.id for s in samples}), shuffled=False
        ),
        model=target,
        model_roles={role: ModelConfig(model=m) for role, m in run.models.items() if role != "target"} or None,
        config=EvalConfig(epochs=max((s.epoch for s in samples), default=1)),
        packages={k: v for k, v in _packages(run).items() if v},
        metadata=clean({"promptlab": {"cell_id": cell_id, "run_id": run.run_id, "provenance": run.provenance}}),
        tags=[run.loop, cell_id],
    )
    return EvalLog(
        status="success",
        eval=spec,
        plan=EvalPlan(name="promptlab", steps=[EvalPlanStep(solver=run.loop, params=clean(dict(run.config)))]),
        results=eval_results(run, len(samples)),
        stats=EvalStats(
            started_at=created,
            completed_at=iso(run.started_at + run.totals.wall_time_s),
            model_usage=_usage(run, by="model"),
            role_usage=_usage(run, by="role"),
        ),
        samples=samples,
    )


def eval_samples(
    run: Run, cell_id: str, params: Mapping[str, Any], clean: Cleaner, people: Mapping[Any, Any] | None = None
) -> list[Any]:
    """One `EvalSample` per example row of the run (`example_rows`, or an open-ended run's `output_rows`): id
    `<SAMPLE_PREFIX>-<example>`, epoch = candidate + 1 (an example measured twice under one candidate and measure
    gets `#2`); the people's score, where they judged the sample, is its second score ('people')."""
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage

    by_index = {it.index: it for it in run.iterations}
    scorer = str((run.task.scorer or {}).get("kind") or "score")
    splits = {split: examples_of(run.task, split) for split in ("dev", "test")} if run.task.grounded else {}
    seen: dict[tuple[str, int], int] = {}
    samples = []
    for row in example_rows(run, cell_id) or output_rows(run, cell_id):
        candidate = row["candidate"]
        epoch = epoch_of(run, candidate)
        base_id = f"{SAMPLE_PREFIX[row['measure']]}-{row['example_id'] or row['example']}"
        seen[(base_id, epoch)] = seen.get((base_id, epoch), 0) + 1
        sample_id = base_id if seen[(base_id, epoch)] == 1 else f"{base_id}#{seen[(base_id, epoch)]}"
        example = splits[row["split"]][row["example"]] if row["split"] in splits else None
        prompt = candidate_prompt(run, candidate)
        text = (
            clean(row["input"] or "")
            if prompt is None
            else clean(format_prompt(prompt, example.input) if example else prompt)
        )
        output = clean(row["output"] or "")
        model = row["model"] or target_model(run)
        messages: list[Any] = [ChatMessageSystem(content=clean(run.task.system))] if run.task.system else []
        messages += [ChatMessageUser(content=text), ChatMessageAssistant(content=output, model=model)]
        tokens_in, tokens_out = row["input_tokens"] or 0, row["output_tokens"] or 0
        samples.append(
            EvalSample(
                id=sample_id,
                epoch=epoch,
                input=text,
                target=clean(row["target"] or ""),
                messages=messages,
                output=ModelOutput.from_content(model, output, error=clean(row["error"]) if row["error"] else None),
                scores=_scores(row, scorer, output, clean, (people or {}).get((row["measure"], row["example"]))),
                metadata=clean(_sample_metadata(run, row, by_index.get(candidate) if candidate is not None else None)),
                model_usage={
                    model: ModelUsage(
                        input_tokens=tokens_in,
                        output_tokens=tokens_out,
                        total_tokens=tokens_in + tokens_out,
                        total_cost=row["cost_usd"],
                    )
                },
                error=EvalError(message=clean(row["error"]), traceback="", traceback_ansi="")
                if row["output"] is None and row["error"]
                else None,
            )
        )
    return samples


def _scores(row: Mapping[str, Any], scorer: str, output: str, clean: Cleaner, people: Any) -> dict[str, Any] | None:
    """The scorer's score and the people's, where there are any."""
    from inspect_ai.scorer import Score

    scores = (
        {}
        if row["score"] is None
        else {scorer: Score(value=row["score"], answer=output, explanation=clean(row["error"]))}
    )
    if people is not None:
        scores["people"] = people
    return scores or None


def candidate_prompt(run: Run, candidate: int | None) -> str | None:
    """The prompt text of a candidate: iteration `candidate`'s, the task's own for candidate 0 without an iteration
    0, the final output for a final prompt that is no iteration's candidate."""
    if candidate is None:
        return run.final_output
    for it in run.iterations:
        if it.index == candidate and it.candidate is not None:
            return it.candidate
    return run.task.prompt if candidate == 0 else None


def _sample_metadata(run: Run, row: Mapping[str, Any], it: Iteration | None) -> dict[str, Any]:
    keep = ("measure", "candidate", "split", "example", "example_id", "loop", "cell_id", "run_id", "sample")
    meta: dict[str, Any] = {k: row[k] for k in keep}
    meta["task_id"] = run.task.id
    if it is not None:
        meta.update(
            critic_score=it.average,
            dev_accuracy=it.grounded.score if it.grounded else None,
            decision=it.decision,
            reason=it.reason,
        )
    if row["error"]:
        meta["error"] = row["error"]
    return meta


def eval_results(run: Run, n_samples: int) -> Any:
    """The test accuracy of the final and starting prompts and the gain, then per candidate its dev accuracy and
    critic score, as Inspect `EvalScore`s (a missing value is left out; the first is the viewer's headline score)."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    def score(name: str, scorer: str, values: Mapping[str, float | None]) -> EvalScore | None:
        metrics = {k: EvalMetric(name=k, value=v) for k, v in values.items() if v is not None}
        return EvalScore(name=name, scorer=scorer, metrics=metrics) if metrics else None

    test = score(
        "test",
        "promptlab",
        {
            "final_accuracy": run.final_test.score if run.final_test else None,  # first: the viewer's headline
            "start_accuracy": run.baseline_test.score if run.baseline_test else None,
            "gain": run.delta.value if run.delta else None,
        },
    )
    dev = score(
        "dev_accuracy",
        "promptlab",
        {f"candidate {it.index}": it.grounded.score if it.grounded else None for it in run.iterations},
    )
    critic = score("critic_score", "promptlab", {f"candidate {it.index}": it.average for it in run.iterations})
    scores = [s for s in (test, dev, critic) if s is not None]
    return EvalResults(total_samples=n_samples, completed_samples=n_samples, scores=scores)


def target_model(run: Run) -> str:
    """The model that ran the candidate prompts on the examples."""
    cfg = run.config
    return str(run.models.get("target") or cfg.get("target_model") or cfg.get("generator_model") or cfg.get("model"))


def _usage(run: Run, by: str) -> dict[str, Any]:
    """The run's model usage (every model step's call) per model or per role, as Inspect `ModelUsage`."""
    from inspect_ai.model import ModelUsage

    tallies: dict[str, Tally] = {}
    steps = [*run.setup, *(s for it in run.iterations for s in it.steps), *run.final]
    for step in steps:
        if step.call is None:
            continue
        key = step.call.model if by == "model" else step.role
        c = step.call
        tallies.setdefault(key, Tally()).count(
            input_tokens=c.input_tokens or 0,
            output_tokens=c.output_tokens or 0,
            cost_usd=c.cost_usd,  # original calls
        )
    return {
        k: ModelUsage(
            input_tokens=t.input_tokens, output_tokens=t.output_tokens, total_tokens=t.tokens, total_cost=t.cost_usd
        )
        for k, t in tallies.items()
    }


def _packages(run: Run) -> dict[str, str | None]:
    prov = run.provenance
    return {"promptlab-loops": prov.get("promptlab_version"), "litellm": prov.get("litellm_version")}


def iso(timestamp: float) -> str:
    """A Unix time as ISO 8601 in UTC."""
    return _dt.datetime.fromtimestamp(timestamp, _dt.UTC).isoformat()


__all__ = [
    "InspectLogs",
    "LOG_DIR",
    "SAMPLE_PREFIX",
    "candidate_prompt",
    "epoch_of",
    "eval_log",
    "eval_samples",
    "export_inspect",
    "log_name",
]
