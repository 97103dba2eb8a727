"""`inspect view` (Inspect AI's own log viewer, on 127.0.0.1) opened in headless Chromium (Debian's, through the
playwright package; no browser download) on an exported results dir: the log list names the runs, and a sample
shows its candidate prompt's input, the target and the model's output. Set PROMPTLAB_SCREENSHOTS=DIR to keep the
screenshots."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from chromium import NEEDS_CHROMIUM, launch
from exported import TARGET, register_target, write_experiment
from fault_server import free_port

from promptlab.exports.inspect_log import export_inspect
from promptlab.sweeps.run import sweep

pytestmark = [
    pytest.mark.slow,
    NEEDS_CHROMIUM,
]
pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install 'promptlab-loops[inspect]')")
playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Path]]]:
    """`inspect view` on the Inspect logs of a small grounded sweep; yields its URL and the logs."""
    root = tmp_path_factory.mktemp("inspect-view")
    register_target()
    sweep(write_experiment(root, target=TARGET, replicates=1), root / "results", progress=False, cache=root / "c")
    logs = export_inspect(root / "results")
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "inspect"), "view", "--log-dir", str(logs[0].parent)]
        + ["--host", "127.0.0.1", "--port", str(port)],
        stdout=(root / "view.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None, (root / "view.log").read_text()
                assert time.monotonic() < deadline, "inspect view did not answer within 180 s"
                time.sleep(0.5)
        yield url, logs
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_inspect_view_lists_the_runs_and_shows_a_sample_s_output(viewer: tuple[str, list[Path]]) -> None:
    from inspect_ai.log import read_eval_log

    url, logs = viewer
    path, log, sample = next(  # a dev example under candidate 1, a rewrite
        (p, log, s)
        for p in logs
        for log in [read_eval_log(str(p))]
        for s in log.samples or []
        if str(s.id).startswith("dev-") and s.epoch == 2
    )
    shots = os.environ.get("PROMPTLAB_SCREENSHOTS")
    with playwright_api.sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url, timeout=120_000)
        # the log list names each run by its label in the sweep (what differs first: loop, setting, task)
        names = [read_eval_log(str(p), header_only=True).eval.task for p in logs]
        assert len(set(names)) == len(names) and "loop=creator_critic, max_iterations=1, alpha" in names
        for name in names:
            playwright_api.expect(page.get_by_text(name, exact=True).first).to_be_visible(timeout=120_000)
        name = urllib.parse.quote(path.name)
        page.goto(f"{url}/#/tasks/{name}/samples/sample/{sample.id}/{sample.epoch}/", timeout=120_000)
        header = page.get_by_text(f"Sample {sample.id} (Epoch {sample.epoch})")
        playwright_api.expect(header).to_be_visible(timeout=120_000)
        output = sample.output.completion
        assert output  # the scripted target's reply: 'yes' or 'no'
        assert isinstance(sample.input, str)
        playwright_api.expect(page.locator("body")).to_contain_text(sample.input.splitlines()[0], timeout=60_000)
        shown = rf"TARGET\s+{re.escape(str(sample.target))}\s+ANSWER\s+{re.escape(output)}\s+SCORE"
        # as a user reads it (innerText: the labels drawn upper-case, one field a line), not the bare textContent
        body = playwright_api.expect(page.locator("body"))
        body.to_contain_text(re.compile(shown), timeout=60_000, use_inner_text=True)
        if shots:
            page.screenshot(path=str(Path(shots) / "inspect_sample.png"))
        browser.close()
