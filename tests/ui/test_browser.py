"""JupyterLab driven as a user would: a real server on 127.0.0.1, headless Chromium (Debian's, through the
playwright package; no browser download), clicks on the notebooks' widgets.

Skipped, with the reason, where Chromium or playwright is missing; `.ci/run` installs Chromium when apt can.
Set PROMPTLAB_SCREENSHOTS=DIR to keep the screenshots.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from factories import write_sweep

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"),
    pytest.mark.skipif(not shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)),
                       reason="JupyterLab is not installed (pip install -e '.[notebook]')"),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def with_parameters(name: str, dest: Path, **values: Any) -> None:
    """notebooks/<name> copied to dest with parameters replaced (as papermill would, but in the source)."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for key, value in values.items():
        lines = [f"{key} = {json.dumps(value)}" if ln.split("=")[0].strip() == key else ln for ln in lines]
    cell.source = "\n".join(lines)
    nbformat.write(nb, dest)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """JupyterLab on a free 127.0.0.1 port over a scratch root holding the notebooks under test."""
    root = tmp_path_factory.mktemp("lab")
    (root / "notebooks").mkdir()
    results = write_sweep(root / "results")
    with_parameters("01_explore", root / "notebooks" / "01_explore.ipynb",
                    tasks_path=str(ROOT / "data" / "prompt_tasks.jsonl"), max_iterations=2)
    with_parameters("05_runs", root / "notebooks" / "05_runs.ipynb", results_dir=str(results))
    settings = root / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(os.environ, PROMPTLAB_CACHE_DIR=str(root / "cache"), LITELLM_LOCAL_MODEL_COST_MAP="True",
               JUPYTERLAB_SETTINGS_DIR=str(root / "lab-settings"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    log = open(root / "server.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start: " + (root / "server.log").read_text()) from None
                time.sleep(0.3)
        # a JupyterLab workspace of its own per notebook, reset: no tab of an earlier test is restored, so the
        # status bar's "Idle" and the Run menu belong to this notebook
        yield f"{base}/lab/workspaces/{{name}}/tree/notebooks/{{name}}.ipynb?reset&token={token}", root
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture
def page(lab: tuple[str, Path]) -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


def open_and_run_all(page: Any, url: str) -> Any:
    """Open a notebook, wait for its kernel, click Run > Run All Cells; return the notebook's panel (the
    server restores earlier tabs, so every lookup is kept inside the visible panel)."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    item = page.locator(".lm-Menu-item", has_text="Run All Cells").first
    item.wait_for(timeout=30_000)
    item.click()
    return page.locator(".jp-NotebookPanel:visible")


def keep(page: Any, element: Any, name: str) -> None:
    """Screenshot `element` to PROMPTLAB_SCREENSHOTS/<name>.png when that variable is set."""
    where = os.environ.get("PROMPTLAB_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        element.scroll_into_view_if_needed()
        element.screenshot(path=str(Path(where) / f"{name}.png"))


def test_clicking_run_in_01_explore_shows_the_plot_and_the_final_prompt(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="01_explore"))
    run = nb.locator(".widget-button", has_text="Run")
    run.wait_for(timeout=120_000)
    for label in ("generator", "critic"):
        field = nb.locator(f".widget-text:has(label:text-is('{label}')) input")
        field.fill("fake/auto")
        field.press("Enter")
    run.click()
    final = nb.locator("pre.promptlab-final")
    final.wait_for(timeout=120_000)
    expect = playwright_api.expect  # these assertions wait for the page to settle (an image renders late)
    expect(nb.locator(".widget-output img")).to_have_count(1)  # the trajectory plot
    expect(nb.locator("pre.promptlab-original")).to_have_text("Write a poem about autumn.")
    expect(final).not_to_have_text("(none)")
    assert final.inner_text().strip()
    expect(nb.locator(".widget-output").first).to_contain_text("run_finished")
    expect(nb.locator(".widget-html", has_text="stop reason")).to_contain_text("done: stop reason")
    keep(page, nb.locator(".widget-vbox").first, "01_explore_after_click")


def test_the_run_browser_steps_through_iterations(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="05_runs"))
    expect = playwright_api.expect
    position = nb.locator(".widget-label", has_text=re.compile(r"^iteration \d+ of \d+$"))
    position.wait_for(timeout=120_000)
    expect(position).to_have_text("iteration 1 of 2")
    expect(nb.locator(".pl-iteration")).to_contain_text("Iteration 1 of 2")
    nb.locator(".widget-button", has_text="next").click()
    expect(position).to_have_text("iteration 2 of 2")
    view = nb.locator(".pl-iteration")
    expect(view).to_contain_text("Iteration 2 of 2")
    expect(view.locator("del.pl-removed")).to_have_count(1)  # "candidate 1" -> "candidate 2"
    expect(nb.locator(".widget-button", has_text="next")).to_be_disabled()
    keep(page, nb.locator(".widget-vbox").first, "05_runs_iteration_2")
