"""A results directory in MLflow: one parent run per sweep, a nested run per loop run (`mlflow_payload` says what).

    export_mlflow("results/demo")                                   # -> results/demo/mlflow.db (+ mlartifacts/)
    export_mlflow("results/demo", "http://127.0.0.1:5000")          # any tracking server

    mlflow ui --backend-store-uri sqlite:///results/demo/mlflow.db  # then open http://127.0.0.1:5000

The default store is local and offline, beside the results: the SQLite database `RESULTS_DIR/mlflow.db` (MLflow's
own default kind of store since 3.x), its artifacts in `RESULTS_DIR/mlartifacts`. The experiment is named after the
promptlab experiment (or `experiment_name`); the parent run is the one tagged `promptlab.results_dir` = the results
directory's absolute path, made on the first export. Exporting again updates in place and adds no run: a nested run
is found by its `promptlab.run_id` tag, gets only the params and metric points it lacks (MLflow keeps a param's
first value and appends every metric point logged), and a run whose `promptlab.export_digest` tag matches what would
be logged is left as it is. The MLflow client is used directly (`MlflowClient`, runs nested through the
`mlflow.parentRunId` tag), never the fluent API's global active run, so a sweep's driver can log from a thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..people.plan import plan_path
from ..reading import bounded
from ..results.runs_file import warn_damaged
from ..results.store import ok_cells, read_cell_runs
from ..sanitize import Cleaner, mask_userinfo
from ..sweeps.cell_process import env_defaults
from .extras import need
from .mlflow_judgments import log_judgments
from .mlflow_payload import DIGEST_TAG, RESULTS_TAG, ROLE_TAG, RUN_ID_TAG, RunPayload, run_payloads
from .run_names import sweep_labelling

DEFAULT_STORE = "mlflow.db"
"""The default tracking store's file in the results directory (SQLite)."""
DEFAULT_ARTIFACTS = "mlartifacts"
"""The default store's artifact folder in the results directory."""
TEXT_ARTIFACTS = (".md", ".csv", ".txt", ".json", ".yaml", ".yml")
"""Report files logged as cleaned text (secrets out); other files (charts) are copied as they are."""
log = logging.getLogger("promptlab.exports")
QUIET_ENV = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
"""Set while exporting (unless the user set them): MLflow prints no "View run at" line per run."""


def default_tracking_uri(results_dir: str | os.PathLike[str]) -> str:
    """The local SQLite store beside the results: `sqlite:////abs/RESULTS_DIR/mlflow.db`."""
    return f"sqlite:///{Path(results_dir).resolve() / DEFAULT_STORE}"


@dataclass
class ExportSummary:
    """What an export did."""

    tracking_uri: str
    """Where it went (a password in the URI masked)."""
    experiment_id: str
    parent_run_id: str
    created: int = 0
    """Nested runs made."""
    updated: int = 0
    """Nested runs that existed and got what they lacked."""
    unchanged: int = 0
    """Nested runs that had everything already."""
    skipped_params: list[str] = field(default_factory=list)
    """'<run id>: <param>' whose value on the tracker differs (MLflow keeps a param's first value)."""
    damaged: list[str] = field(default_factory=list)
    """Records of the results directory that could not be read ('cells/<id>/runs.jsonl:<line>: why'): skipped."""
    judgments: int = 0
    """People's judgments logged as assessments (`mlflow_judgments`)."""

    def __str__(self) -> str:
        text = (
            f"mlflow {self.tracking_uri}: experiment {self.experiment_id}, sweep run {self.parent_run_id}: "
            f"{self.created} run(s) created, {self.updated} updated, {self.unchanged} unchanged"
        ) + (f", {self.judgments} judgment(s) logged" if self.judgments else "")
        if self.skipped_params:
            text += (
                f"; {len(self.skipped_params)} param(s) differ on the tracker and were kept: {self.skipped_params[:3]}"
            )
        if self.damaged:
            text += f"; {len(self.damaged)} damaged record(s) skipped (first: {self.damaged[0]})"
        return bounded(text)


@dataclass(frozen=True)
class Logged:
    """What a nested run on the tracker already has."""

    run_id: str
    """Its MLflow run id."""
    digest: str | None
    """Its `promptlab.export_digest` tag (None: incomplete)."""
    params: dict[str, str]
    metric_keys: frozenset[str]

    @classmethod
    def of(cls, run: Any) -> Logged:
        """From an MLflow `Run`."""
        data = run.data
        return cls(run.info.run_id, data.tags.get(DIGEST_TAG), dict(data.params), frozenset(data.metrics))


def quiet_mlflow_logs() -> None:
    """MLflow's and alembic's INFO lines (creating a store's tables) are not shown: a sweep prints its own."""
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


class MlflowTarget:
    """A results directory's place in an MLflow tracker: the client, the experiment and the sweep's parent run,
    and the nested runs already there (by promptlab run id). Connecting makes what is missing."""

    def __init__(
        self,
        results_dir: str | os.PathLike[str],
        tracking_uri: str | None = None,
        *,
        experiment_name: str | None = None,
        clean: Cleaner | None = None,
    ) -> None:
        mlflow = need("mlflow", "the MLflow export")
        quiet_mlflow_logs()
        self.results = Path(results_dir).resolve()
        self.uri = tracking_uri or default_tracking_uri(self.results)
        self.clean = clean or Cleaner()
        self.client: Any = mlflow.tracking.MlflowClient(self.uri)
        name = experiment_name or self._experiment_field("name") or self.results.name
        self.experiment_name = name
        """The MLflow experiment's name."""
        self.experiment_id = self._experiment(name)
        self.parent_id = self._parent()
        self.known: dict[str, Logged] = self._nested()
        self.labelling = sweep_labelling(self.results)
        """How its runs are named: by what differs between the sweep's runs (`run_names`)."""

    @property
    def where(self) -> str:
        """The tracking URI as it may be shown (a password masked)."""
        return mask_userinfo(self.uri)

    def _experiment_field(self, key: str) -> str | None:
        from ..reading import load_yaml

        text = results_file(self.results / "experiment.yaml")
        if text is None:
            return None
        data = load_yaml(text.decode("utf-8", errors="replace"), str(self.results / "experiment.yaml"))
        value = data.get(key) if isinstance(data, dict) else None
        return str(value) if value is not None else None

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return str(found.experiment_id)
        local = self.uri == default_tracking_uri(self.results)
        location = (self.results / DEFAULT_ARTIFACTS).as_uri() if local else None
        return str(self.client.create_experiment(name, artifact_location=location))

    def _search(self, filter_string: str) -> Iterator[Any]:
        token = None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string, max_results=1000, page_token=token)
            yield from page
            token = page.token
            if not token:
                return

    def _parent(self) -> str:
        where = quoted(str(self.results))
        for run in self._search(f"tags.`{RESULTS_TAG}` = {where} and tags.`{ROLE_TAG}` = 'sweep'"):
            return str(run.info.run_id)
        experiment = results_file(self.results / "experiment.yaml")
        tags = {
            ROLE_TAG: "sweep",
            RESULTS_TAG: str(self.results),
            "promptlab.experiment_hash": "" if experiment is None else hashlib.sha256(experiment).hexdigest(),
        }
        name = f"{self._experiment_field('name') or self.results.name} sweep ({self.results.name})"
        run = self.client.create_run(self.experiment_id, tags=self.clean(tags), run_name=self.clean(name))
        return str(run.info.run_id)

    def _nested(self) -> dict[str, Logged]:
        runs = self._search(f"tags.`mlflow.parentRunId` = '{self.parent_id}'")
        return {r.data.tags[RUN_ID_TAG]: Logged.of(r) for r in runs if RUN_ID_TAG in r.data.tags}

    # logging ------------------------------------------------------------------------------------------
    def log_cell(self, cell_id: str, params: Mapping[str, Any], summary: ExportSummary | None = None) -> None:
        """Log (or complete) the nested runs of one finished cell; a damaged record of its runs.jsonl is skipped,
        named in a warning and counted in the summary."""
        read = read_cell_runs(self.results, cell_id)
        warn_damaged(read)
        if summary is not None:
            summary.damaged += read.damaged
        for payload in run_payloads(read.runs, cell_id, params, self.clean, self.labelling):
            self.log_run(payload, summary)

    def log_run(self, p: RunPayload, summary: ExportSummary | None = None) -> None:
        """Create or complete the nested run of one loop run; a run already complete is left as it is."""
        from mlflow.entities import Metric, Param, RunTag

        existing = self.known.get(p.run_id)
        if existing is not None and existing.digest == p.digest:
            if summary is not None:
                summary.unchanged += 1
            return
        if existing is None:
            tags = {"mlflow.parentRunId": self.parent_id, **p.tags}
            made = self.client.create_run(self.experiment_id, start_time=p.start_ms, tags=tags, run_name=p.name)
            run_id, have_params, have_points = str(made.info.run_id), {}, set()
        else:
            run_id, have_params = existing.run_id, existing.params
            have_points = self._points(run_id, {k for k, _, _ in p.metrics} & existing.metric_keys)
            self.client.update_run(run_id, name=p.name)
        differ = [k for k, v in p.params.items() if k in have_params and have_params[k] != v]
        params = [Param(k, v) for k, v in p.params.items() if k not in have_params]
        metrics = [Metric(k, v, p.start_ms, step) for k, v, step in p.metrics if (k, step) not in have_points]
        tags_ = [RunTag(k, v) for k, v in p.tags.items()]
        for i in range(0, len(params), 100):
            self.client.log_batch(run_id, params=params[i : i + 100])
        for i in range(0, len(tags_), 100):
            self.client.log_batch(run_id, tags=tags_[i : i + 100])
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i : i + 1000])
        self.client.log_text(run_id, p.record, "record/run.json")
        self.client.set_terminated(run_id, "FINISHED", end_time=max(p.end_ms, p.start_ms))
        self.client.set_tag(run_id, DIGEST_TAG, p.digest)  # last: the run is complete
        if summary is not None:
            summary.skipped_params += [f"{p.run_id}: {k}" for k in differ]
            if existing is None:
                summary.created += 1
            else:
                summary.updated += 1
        logged = {**have_params, **{param.key: param.value for param in params}}
        keys = frozenset({k for k, _, _ in p.metrics}) | (existing.metric_keys if existing else frozenset())
        self.known[p.run_id] = Logged(run_id, p.digest, logged, keys)

    def _points(self, run_id: str, keys: set[str]) -> set[tuple[str, int]]:
        return {(k, m.step) for k in keys for m in self.client.get_metric_history(run_id, k)}

    def log_sweep_files(self) -> None:
        """The parent run's artifacts: the experiment file, and the report's charts and tables if there is one."""
        experiment = results_file(self.results / "experiment.yaml")
        if experiment is not None:
            self.client.log_text(self.parent_id, self.clean(experiment.decode("utf-8", "replace")), "experiment.yaml")
        report = self.results / "report"
        for path in sorted(report.iterdir()) if report.is_dir() and not report.is_symlink() else []:
            data = results_file(path)  # a link, a FIFO or a directory there is left out: never followed
            if data is None:
                continue
            if path.suffix in TEXT_ARTIFACTS:
                self.client.log_text(self.parent_id, self.clean(data.decode("utf-8", "replace")), f"report/{path.name}")
            else:
                self.client.log_artifact(self.parent_id, str(path), "report")

    def finish(self, status: str = "FINISHED") -> None:
        """Mark the sweep's parent run as ended."""
        self.client.set_terminated(self.parent_id, status)

    def summary(self) -> ExportSummary:
        """An empty summary of an export to this target."""
        return ExportSummary(self.where, self.experiment_id, self.parent_id)


def results_file(path: Path) -> bytes | None:
    """A results directory's file as `reading.read_bounded` reads it (a regular file of at most MAX_FILE_BYTES,
    no link followed); None when it is missing or refused (a link, a FIFO: said once in the log, not exported)."""
    from ..reading import MAX_FILE_BYTES, RefusedFile, read_bounded

    try:
        return read_bounded(path, MAX_FILE_BYTES, path.name)
    except FileNotFoundError:
        return None
    except RefusedFile as e:
        log.warning("promptlab export: %s; not exported", e)
        return None


def quoted(text: str) -> str:
    """A string literal for an MLflow search filter."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def export_mlflow(
    results_dir: str | os.PathLike[str],
    tracking_uri: str | None = None,
    *,
    experiment_name: str | None = None,
) -> ExportSummary:
    """Export a results directory's finished runs to MLflow: a parent run for the sweep, a nested run per loop run.

    Args:
        results_dir: A sweep's results directory.
        tracking_uri: Any MLflow tracking URI (http://host:5000, sqlite:///x.db, databricks, ...); default: the
            local SQLite store `RESULTS_DIR/mlflow.db`, its artifacts in `RESULTS_DIR/mlartifacts`.
        experiment_name: The MLflow experiment (default: the promptlab experiment's name).

    Returns:
        How many nested runs were created, updated and left unchanged.

    Raises:
        MissingDependencyError: mlflow is not installed (pip install 'promptlab-loops[mlflow]').
        ConfigError: `results_dir` is not a results directory.
    """
    results = Path(results_dir)
    cells = ok_cells(results)
    with env_defaults(QUIET_ENV):
        target = MlflowTarget(results, tracking_uri, experiment_name=experiment_name)
        summary = target.summary()
        for cell_id, params in cells:
            target.log_cell(cell_id, params, summary)
        if plan_path(results).is_file():
            summary.judgments = log_judgments(target)
        target.log_sweep_files()
        target.finish()
    return summary


__all__ = [
    "DEFAULT_ARTIFACTS",
    "DEFAULT_STORE",
    "ExportSummary",
    "MlflowTarget",
    "default_tracking_uri",
    "export_mlflow",
    "quiet_mlflow_logs",
]
