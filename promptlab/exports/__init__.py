"""promptlab's runs where researchers already look: MLflow (a sweep as a parent run, a nested run per loop run, also
live while a sweep runs) and Inspect AI's log viewer (every candidate's reply on every example).

Each target's library is an optional extra (`pip install 'promptlab-loops[mlflow]'`, `'promptlab-loops[inspect]'`),
imported only when its export runs. See docs/exports.md.
"""

from __future__ import annotations

from .mlflow_export import DEFAULT_STORE, ExportSummary, MlflowTarget, default_tracking_uri, export_mlflow

__all__ = ["DEFAULT_STORE", "ExportSummary", "MlflowTarget", "default_tracking_uri", "export_mlflow"]
