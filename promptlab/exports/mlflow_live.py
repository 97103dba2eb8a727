"""Live MLflow logging while a sweep runs: each cell's runs are logged as soon as the cell finishes.

    live = LiveMlflow("results/demo", "http://127.0.0.1:5000")   # None: the local store beside the results
    try:
        sweep(exp, "results/demo", on_cell=live.cell_finished)     # what `promptlab sweep EXP --mlflow URI` does
    finally:
        live.close()

The sweep's driver process calls `cell_finished` for every cell it records, whichever executor ran the cell
(inline, papermill kernels, Dask workers: the driver records them all), so only the driver talks to the tracker.
It only queues the cell: a background thread logs it (`MlflowTarget.log_cell`, the export's own code), so a tracker
that is slow or down never stalls or fails the sweep. Its HTTP calls time out after `timeout_s` with one retry
(MLflow's `MLFLOW_HTTP_REQUEST_TIMEOUT` / `_MAX_RETRIES`, unless set in the environment). The first failure stops
live logging and is named in one line (`say`); the sweep goes on. A sweep whose cells were all logged ends with one
line naming the tracker, the experiment and the runs logged (`done_line`). `close` waits at most `drain_s` for the cells
still queued, and names the tracker (the same one line) if they were not all logged. Nothing is lost: the results
directory is the record, and `promptlab export mlflow RESULTS_DIR` later logs what was missed (by run id, adding
no run twice). Cells skipped as finished before are logged too, unless their runs are there already.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..sanitize import mask_userinfo
from ..sweeps.plan import CellOutcome
from .extras import check_installed
from .mlflow_export import QUIET_ENV, ExportSummary, MlflowTarget

LIVE_ENV = {**QUIET_ENV, "MLFLOW_HTTP_REQUEST_TIMEOUT": "30", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1"}
"""MLflow's HTTP settings while live logging runs (each kept where the user set it): a tracker that is down refuses
at once; one that is busy gets 30 s a request (MLflow's own 120 s and 7 retries would hold the queue for minutes),
and the sweep never waits for either."""
QUIET_LOGGERS = ("mlflow", "alembic", "urllib3")
"""Loggers held to errors while live logging runs: their retry and connection warnings would repeat per cell."""
LOGGED_STATUSES = frozenset({"ok", "skipped"})
"""The cell outcomes whose runs are logged (a skipped cell finished in an earlier sweep)."""


def say_on_stderr(line: str) -> None:
    """Print a line above the sweep's progress bar (tqdm's write keeps the bar whole)."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


class LiveMlflow:
    """Logs a sweep's finished cells to MLflow from a background thread, never stalling or failing the sweep."""

    def __init__(
        self,
        results_dir: str | os.PathLike[str],
        tracking_uri: str | None = None,
        *,
        experiment_name: str | None = None,
        timeout_s: int = 30,
        drain_s: float = 30.0,
        say: Callable[[str], None] = say_on_stderr,
    ) -> None:
        check_installed("mlflow", "live MLflow logging (--mlflow)")
        self.results = Path(results_dir)
        self.uri = tracking_uri
        self.experiment_name = experiment_name
        self.drain_s = drain_s
        self.say = say
        self.env = {**LIVE_ENV, "MLFLOW_HTTP_REQUEST_TIMEOUT": str(timeout_s)}
        self.queue: queue.SimpleQueue[tuple[str, dict[str, Any]] | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.logged: list[str] = []
        """Cells whose runs are on the tracker."""
        self.summary: ExportSummary | None = None
        """What the logging did (runs created, updated, unchanged), once connected."""
        self.experiment: str | None = None
        """The MLflow experiment's name, once connected."""
        self.problem: str | None = None
        """What stopped live logging (None: nothing did)."""
        self.named = False
        self._added_env: list[str] = []

    @property
    def where(self) -> str:
        """The tracker as it may be shown (a password in the URI masked)."""
        return mask_userinfo(self.uri) if self.uri else f"{self.results}/mlflow.db"

    def cell_finished(self, outcome: CellOutcome) -> None:
        """The sweep's hook: queue a finished cell for logging (returns at once)."""
        if outcome.status not in LOGGED_STATUSES or self.problem is not None:
            return
        with self.lock:
            if self.thread is None:  # the first cell: connect now, not before the sweep checked its input
                self._set_env()
                self.thread = threading.Thread(target=self._work, name="promptlab-mlflow", daemon=True)
                self.thread.start()
        self.queue.put((outcome.cell_id, dict(outcome.params)))

    def close(self) -> None:
        """Wait up to `drain_s` for the queued cells; name the tracker once if some were not logged."""
        if self.thread is None:
            return
        self.queue.put(None)
        self.thread.join(self.drain_s)
        if self.thread.is_alive():
            self._name(f"it did not finish logging within {self.drain_s:g} s")
        elif self.problem is None and self.summary is not None:
            self.say(self.done_line(self.summary))
        self._restore_env()

    def done_line(self, summary: ExportSummary) -> str:
        """The one line a live sweep ends with: the tracker, the experiment and the runs logged."""
        s = summary
        runs = s.created + s.updated + s.unchanged
        kept = f" ({s.unchanged} already there)" if s.unchanged else ""
        line = (
            f"promptlab: MLflow tracker {self.where}: {runs} run(s) of {len(self.logged)} cell(s) logged{kept} to "
            f"experiment '{self.experiment}' (id {s.experiment_id}), under sweep run {s.parent_run_id}"
        )
        return line + ("" if self.uri else f"; open it with: mlflow ui --backend-store-uri sqlite:///{self.where}")

    def _work(self) -> None:
        try:
            target = MlflowTarget(self.results, self.uri, experiment_name=self.experiment_name)
            self.summary, self.experiment = target.summary(), target.experiment_name
            while (item := self.queue.get()) is not None:
                target.log_cell(*item, self.summary)
                self.logged.append(item[0])
            target.finish()
        except Exception as e:  # noqa: BLE001 -- any tracker failure: named once, the sweep goes on
            first = (str(e).strip().splitlines() or [""])[0][:200]
            self._name(f"{type(e).__name__}: {first}")

    def _name(self, why: str) -> None:
        with self.lock:
            if self.named:
                return
            self.named = True
            self.problem = why
        export = f"promptlab export mlflow {self.results}" + (f" --tracking-uri {self.where}" if self.uri else "")
        self.say(
            f"promptlab: MLflow tracker {self.where}: {mask_userinfo(why)}; live logging stopped, the sweep goes on "
            f"(`{export}` logs what it missed)"
        )

    def _set_env(self) -> None:
        for name in QUIET_LOGGERS:  # a tracker that does not answer is named once, by `_name`, not by each retry
            logging.getLogger(name).setLevel(logging.ERROR)
        self._added_env = [k for k in self.env if k not in os.environ]
        os.environ.update({k: self.env[k] for k in self._added_env})

    def _restore_env(self) -> None:
        for k in self._added_env:
            os.environ.pop(k, None)
        self._added_env = []


__all__ = ["LIVE_ENV", "LOGGED_STATUSES", "QUIET_LOGGERS", "LiveMlflow", "say_on_stderr"]
