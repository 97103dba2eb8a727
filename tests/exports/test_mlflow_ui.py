"""MLflow's own UI (its tracking server on 127.0.0.1) in headless Chromium (Debian's, through the playwright package)
on an exported Creator/Critic sweep with two critics and two replicates: the run list tells the runs apart by the
first 40 characters of their names, which say what differs between them first (the critic, the task, the
replicate), as every label does (`promptlab.results.labels`). PROMPTLAB_SCREENSHOTS=DIR keeps a screenshot."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chromium import NEEDS_CHROMIUM, launch
from exported import start_mlflow_server, stop_server, write_experiment

from promptlab.exports.mlflow_export import ExportSummary, export_mlflow
from promptlab.sweeps.run import sweep

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]
pytest.importorskip("mlflow", reason="mlflow is not installed (pip install 'promptlab-loops[mlflow]')")
playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
CRITICS = ("sim/oracle", "sim/noisy?sd=2&seed=0")
SHOWN = 40
"""The characters of a run name the list must tell runs apart by."""


def two_critic_sweep(root: Path) -> Path:
    """Creator/Critic on the two export tasks, judged by two simulated critics (a pairing each), 2 replicates."""
    path = write_experiment(root, target="fake/auto", name="two-critics")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["loops"], data["grid"] = ["creator_critic"], {}
    data["config"].pop("critic_model")
    data["pairings"] = [{"generator": "fake/auto", "critic": c} for c in CRITICS]
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    sweep(path, root / "results", progress=False, cache=root / "cache")
    return root / "results"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ExportSummary]]:
    root = tmp_path_factory.mktemp("mlflow-ui")
    results = two_critic_sweep(root)
    proc, uri = start_mlflow_server(root / "server")
    try:
        yield uri, export_mlflow(results, uri)
    finally:
        stop_server(proc)


def run_names(page: Any) -> list[str]:
    """The run names the run list shows, parent first (its nested runs expanded)."""
    cells = page.locator("[role=gridcell][col-id='attributes.`Run Name`'] a")
    return [t.strip() for t in cells.all_inner_texts()]


def test_the_mlflow_run_list_tells_a_two_critic_sweep_s_runs_apart_in_40_characters(
    exported: tuple[str, ExportSummary],
) -> None:
    uri, summary = exported
    assert summary.created == 2 * 2 * 2  # critics x tasks x replicates
    with playwright_api.sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{uri}/#/experiments/{summary.experiment_id}/runs", timeout=120_000)
        parent = page.get_by_text("two-critics sweep (results)").first
        playwright_api.expect(parent).to_be_visible(timeout=180_000)
        row = page.locator("[role=row]", has=page.get_by_text("two-critics sweep (results)"))
        row.locator("[col-id='attributes.`Run Name`'] button").first.click()  # show the nested runs
        playwright_api.expect(page.get_by_text("critic=oracle, alpha, replicate 0")).to_be_visible(timeout=60_000)
        names = [n for n in run_names(page) if "sweep (" not in n]
        if shots := os.environ.get("PROMPTLAB_SCREENSHOTS"):
            page.screenshot(path=str(Path(shots) / "mlflow_runs.png"))
        browser.close()
    assert len(names) == summary.created
    assert len({n[:SHOWN] for n in names}) == len(names), names
    assert {n.split(",")[0] for n in names} == {"critic=oracle", "critic=noisy sd 2"}  # the critic first
