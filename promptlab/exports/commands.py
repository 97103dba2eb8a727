"""The exports on the command line: `promptlab export mlflow|inspect RESULTS_DIR` and `promptlab sweep --mlflow`.

    promptlab export mlflow results/demo                          # the local store results/demo/mlflow.db
    promptlab export mlflow results/demo --tracking-uri http://127.0.0.1:5000
    promptlab export inspect results/demo                         # results/demo/inspect/*.eval
    promptlab sweep experiments/demo.yaml --mlflow                # live, into results/demo/mlflow.db
    promptlab sweep experiments/demo.yaml --mlflow http://127.0.0.1:5000

`cli.py` adds these (`add_export_command`, `add_mlflow_flag`) and wraps its sweep in `live_logging`.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sweeps.plan import CellOutcome


def add_export_command(sub: Any) -> None:
    """Add `export mlflow` and `export inspect` to the `promptlab` command's subparsers."""
    e = sub.add_parser("export", help="a results dir in MLflow or as Inspect AI logs (docs/exports.md)")
    targets = e.add_subparsers(dest="target", required=True)
    m = targets.add_parser("mlflow", help="a parent run per sweep, a nested run per loop run (again: updates in place)")
    m.add_argument("results_dir")
    m.add_argument(
        "--tracking-uri",
        help="any MLflow tracking URI (default: the local store sqlite:///RESULTS_DIR/mlflow.db, opened by "
        "`mlflow ui --backend-store-uri sqlite:///RESULTS_DIR/mlflow.db`)",
    )
    m.add_argument("--experiment-name", help="the MLflow experiment (default: the promptlab experiment's name)")
    m.set_defaults(func=_export_mlflow)
    i = targets.add_parser("inspect", help="one Inspect .eval log per loop run: every candidate on every example")
    i.add_argument("results_dir")
    i.add_argument("--out", help="the log folder (default RESULTS_DIR/inspect; open it with `inspect view --log-dir`)")
    i.set_defaults(func=_export_inspect)


def add_mlflow_flag(p: argparse.ArgumentParser) -> None:
    """`--mlflow [TRACKING_URI]` on `promptlab sweep`."""
    p.add_argument(
        "--mlflow",
        nargs="?",
        const="",
        metavar="TRACKING_URI",
        help="log each run to MLflow as its cell finishes (default store: RESULTS_DIR/mlflow.db); a tracker that "
        "is down or slow never stops the sweep (`promptlab export mlflow` logs what it missed)",
    )


@contextlib.contextmanager
def live_logging(mlflow: str | None, results_dir: str | Path) -> Iterator[Callable[[CellOutcome], None] | None]:
    """The sweep's `on_cell` hook for `--mlflow` (None without the flag); the logger is closed after the block.

    Raises:
        MissingDependencyError: before the sweep starts, when mlflow is not installed.
    """
    if mlflow is None:
        yield None
        return
    from .mlflow_live import LiveMlflow

    live = LiveMlflow(results_dir, mlflow or None)
    try:
        yield live.cell_finished
    finally:
        live.close()


def _export_mlflow(args: argparse.Namespace) -> int:
    from .mlflow_export import default_tracking_uri, export_mlflow

    summary = export_mlflow(args.results_dir, args.tracking_uri, experiment_name=args.experiment_name)
    print(summary)
    if args.tracking_uri is None:
        print(f"open it with: mlflow ui --backend-store-uri {default_tracking_uri(args.results_dir)}")
    return 0


def _export_inspect(args: argparse.Namespace) -> int:
    from .inspect_log import LOG_DIR, export_inspect

    paths = export_inspect(args.results_dir, args.out)
    folder = Path(args.out) if args.out else Path(args.results_dir) / LOG_DIR
    skipped = f" ({len(paths.damaged)} damaged record(s) skipped, named above)" if paths.damaged else ""
    print(f"{len(paths)} Inspect log(s) in {folder}{skipped}; open them with: inspect view --log-dir {folder}")
    return 0


__all__ = ["add_export_command", "add_mlflow_flag", "live_logging"]
