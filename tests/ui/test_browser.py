"""JupyterLab driven as a user would: a real server on 127.0.0.1, headless Chromium (Debian's, through the
playwright package; no browser download), Run All and clicks on the notebooks' widgets.

The server's root is a scratch project shaped like this repository (experiments/, data/, notebooks/,
results/), so a kernel starts in notebooks/ as it does for a user, and relative paths and the call cache must
follow the project root. Skipped, with the reason, where Chromium or playwright is missing; `.ci/run` installs
Chromium when apt can. Set PROMPTLAB_SCREENSHOTS=DIR to keep the screenshots.
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
from biased import write_biased_sweep
from chromium import NEEDS_CHROMIUM, launch
from factories import LONG_CRITERION, make_wide_run, write_sweep
from grounded import write_grounded_sweep
from judging import write_open_ended_sweep
from wording import write_baselines_sweep

from promptlab.people import read_judgments, read_plan
from promptlab.results.store import write_cell
from promptlab.ui.notebook import FIRST_STEPS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    NEEDS_CHROMIUM,
    pytest.mark.skipif(
        not shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)),
        reason="JupyterLab is not installed (pip install -e '.[notebook]')",
    ),
]
playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
BROKEN = 'import promptlab as pl\n\npl.scripted("broken", ["not json"] * 200)  # a model whose replies never parse'
"""Code a user adds to 01_explore to have a scripted model that makes P³RO end in error."""
REGISTER_BIAS_MODELS = (
    f"import sys\n\nsys.path.insert(0, {str(ROOT / 'tests' / 'support')!r})\nfrom biased import register_models\n\n"
    "_ = register_models(2)  # the scripted models the runs of results/biased were made with"
)
"""Added to 07_critic's parameters cell, so that its kernel can re-ask the scripted critic."""
LONG_MODEL = "fake/" + "no-such-model-" * 20
"""A model name of 285 characters: its error is long."""
SLOW = """import time

import promptlab as pl
import promptlab.llm.providers.scripted as fake

pl.scripted("slow", respond=lambda messages: "")  # the name exists; its replies are fake/auto's, each 0.3 s late
auto_reply = fake.reply


def slow_reply(id, messages, params):
    if id != "slow":
        return auto_reply(id, messages, params)
    time.sleep(0.3)
    return auto_reply("auto", messages, params)


fake.reply = slow_reply"""
"""Code a user adds to 01_explore to have a slow model (a run long enough to stop)."""
STUCK = (
    SLOW.replace('"slow"', '"stuck"').replace("0.3 s late", "600 s late").replace("time.sleep(0.3)", "time.sleep(600)")
)
STUCK += (
    "\n\nimport promptlab.sweeps.estimate as estimate\n\n"
    "estimate.probe_first = lambda exp, confirm: False  # a probe of it would take minutes"
)
"""A model, fake/stuck, whose every call takes 600 s (its own name: no call of it is in the cache): an interrupt
that waited for the calls in flight would take ten minutes, so one seen within 120 s did not wait for them, however
busy the machine (the bound is for a loaded browser, not a stopwatch on the interrupt)."""


def hanging(name: str) -> str:
    """Code that adds a model, fake/<name>, that answers in 0.3 s until the test touches hang.flag in the project
    root (the kernel's working directory), then takes 600 s a call: a Stop that waited for the call in flight
    would take ten minutes. Each notebook stopped this way has a model of its own: a Stop cancels nothing in
    flight (promptlab.loops.runtime.interrupt), so another notebook's stopped call stores its reply 600 s later,
    and the fake replies are deterministic, so that reply could be the very one this run waits for (beside CPU
    hogs, with the notebooks sharing fake/hang, the GEPA interrupt test found every call of iterations 2 and 3
    cached and the run over before its Kernel > Interrupt)."""
    return (
        SLOW.replace('"slow"', f'"{name}"')
        .replace("0.3 s late", "0.3 s late, 600 s once the project root holds hang.flag")
        .replace("time.sleep(0.3)", "time.sleep(600 if Path('hang.flag').exists() else 0.3)")
        .replace("import time\n", "import time\nfrom pathlib import Path\n")
    )


COUNTED = (
    SLOW
    + """


slow_reply_uncounted = fake.reply


def counted_reply(id, messages, params):
    if id == "slow":
        with open("big_calls.log", "a") as log:  # in the project root, the kernel's working directory
            log.write("call\\n")
    return slow_reply_uncounted(id, messages, params)


fake.reply = counted_reply"""
)
"""fake/slow, each of its calls counted in big_calls.log."""
BIG = (
    (ROOT / "experiments" / "tiny.yaml")
    .read_text()
    .replace("name: tiny", "name: big")
    .replace("replicates: 1", "replicates: 10000")
)
"""tiny.yaml with 10,000 replicates: 40,000 runs, about 120,000 calls: at fake/slow's 0.3 s a call (at most 8 at once,
reply caps 64 of the probe's 256), at least 0.3 / 8 x 64 / 256 x 120,000 = 1125 s, far above 5 min."""


PLAYS_A_MODEL = """

import promptlab.sweeps.estimate as estimate

estimate.probe_first = lambda exp, confirm: confirm  # fake/slow stands for a real model: timed only once confirmed"""
"""Added to 02_big's parameters: its scripted stand-in is timed as a model is (a script alone is timed at once)."""


def with_parameters(name: str, dest: Path, prelude: str = "", **values: Any) -> None:
    """notebooks/<name> copied to dest with parameters replaced (as papermill would, but in the source) and
    `prelude` added to the parameters cell."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for key, value in values.items():
        assert any(ln.split("=")[0].strip() == key for ln in lines), f"{name} has no parameter {key}"
        text = repr(value) if isinstance(value, bool) else json.dumps(value)  # Python's True, not JSON's true
        lines = [f"{key} = {text}" if ln.split("=")[0].strip() == key else ln for ln in lines]
    cell.source = "\n".join([*lines, *([prelude] if prelude else [])])
    nbformat.write(nb, dest)


def scratch_project(root: Path) -> None:
    """A project like this repository: the tiny experiment and its data, the notebooks (some copies with
    parameters set), and results directories to browse (one with a run that strains the layout)."""
    (root / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "tiny.yaml", root / "experiments")
    shutil.copy(ROOT / "experiments" / "demo.yaml", root / "experiments")  # 02's default, as a fresh clone has it
    (root / "experiments" / "big.yaml").write_text(BIG)
    (root / "data").mkdir()
    for name in ("demo_tasks.jsonl", "prompt_tasks.jsonl", "grounded_tasks.jsonl"):
        shutil.copy(ROOT / "data" / name, root / "data")
    shutil.copytree(ROOT / "data" / "grounded", root / "data" / "grounded")
    nbs = root / "notebooks"
    nbs.mkdir()
    with_parameters("01_explore", nbs / "01_explore.ipynb", max_iterations=2)
    with_parameters("01_explore", nbs / "01_scripted.ipynb", prelude=BROKEN, max_iterations=1)
    p3ro, gepa = {"max_iterations": 10}, {"loop": "gepa"}
    for name, settings in [
        ("hang", p3ro),
        ("hang_interrupt", p3ro),
        ("hang_first", p3ro),
        ("hang_gepa", gepa),
        ("hang_gepa_interrupt", gepa),
    ]:
        # each its own model (none replays another's replies) and its own kernel
        with_parameters("01_explore", nbs / f"01_{name}.ipynb", prelude=hanging(name), model=f"fake/{name}", **settings)
    with_parameters("01_explore", nbs / "01_bad_threshold.ipynb", finish_threshold=-1)
    with_parameters("01_explore", nbs / "01_bad_task.ipynb", task_id="nope")
    with_parameters("02_sweep", nbs / "02_sweep.ipynb", experiment_path="experiments/tiny.yaml")
    with_parameters(
        "02_sweep", nbs / "02_slow.ipynb", prelude=SLOW, experiment_path="experiments/tiny.yaml", model="fake/slow"
    )
    with_parameters(
        "02_sweep",
        nbs / "02_stuck.ipynb",
        prelude=STUCK,
        experiment_path="experiments/tiny.yaml",
        model="fake/stuck",
        out_dir="results/stuck",
        confirm=True,  # not probed: no time estimate, so it asks first
    )
    with_parameters(
        "02_sweep",
        nbs / "02_big.ipynb",
        prelude=COUNTED + PLAYS_A_MODEL,
        experiment_path="experiments/big.yaml",
        model="fake/slow",
        out_dir="results/big",
    )
    with_parameters(  # a results directory of its own: no finished cell, so the time comes from a probe
        "02_sweep",
        nbs / "02_plan.ipynb",
        prelude=SLOW,
        experiment_path="experiments/tiny.yaml",
        model="fake/slow",
        out_dir="results/plan",
        confirm=True,  # the probe runs only once the sweep is confirmed
    )
    with_parameters(
        "02_sweep", nbs / "02_bad_model.ipynb", experiment_path="experiments/tiny.yaml", model="fake/nobody"
    )
    with_parameters("03_compare", nbs / "03_compare.ipynb", results_dir="results/browse")
    with_parameters("04_findings", nbs / "04_findings.ipynb", results_dir="results/grounded")
    with_parameters("05_runs", nbs / "05_runs.ipynb", results_dir="results/browse")
    with_parameters("06_baselines", nbs / "06_baselines.ipynb", results_dir="results/budgeted")
    with_parameters(
        "07_critic", nbs / "07_critic.ipynb", prelude=REGISTER_BIAS_MODELS, results_dir="results/biased", budget=10
    )
    with_parameters("08_judge", nbs / "08_judge.ipynb", results_dir="results/judged")
    for name in FRESH:  # their defaults: results/demo and results/baselines, which a fresh clone lacks
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", nbs / f"{name}_fresh.ipynb")
    shutil.copy(ROOT / "notebooks" / "run_cell.ipynb", nbs)  # its defaults, untouched
    shutil.copy(ROOT / "notebooks" / "02_sweep.ipynb", nbs / "02_sweep_fresh.ipynb")  # the demo, nothing run yet
    browse = write_sweep(root / "results" / "browse")
    write_cell(
        browse,
        "wide",
        {
            "loop": "p3ro",
            "finish_threshold": 8.0,
            "max_iterations": 2,
            "generator_model": "fake/gen-a",
            "critic_model": "fake/crit-a",
        },
        [make_wide_run(with_start=True)],
    )
    write_grounded_sweep(root / "results" / "grounded")
    write_baselines_sweep(root / "results" / "budgeted")
    write_biased_sweep(root / "results" / "biased", samples=2)
    write_open_ended_sweep(root / "results" / "judged")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """JupyterLab on a free 127.0.0.1 port over a scratch project; no cache variable is set, so the
    notebooks' call cache is the project's default one."""
    root = tmp_path_factory.mktemp("lab")
    scratch_project(root)
    settings = tmp_path_factory.mktemp("lab-settings") / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    notebook = settings.parent / "notebook-extension"  # every cell rendered (no windowing), so a page's text is whole
    notebook.mkdir()
    (notebook / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("PROMPTLAB_CACHE_DIR", "PROMPTLAB_CACHE")}
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        JUPYTERLAB_SETTINGS_DIR=str(settings.parents[1]),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    log_path = settings.parents[2] / "server.log"
    log = open(log_path, "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start: " + log_path.read_text()) from None
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
        # scroll bars shown, as a user sees them (playwright hides them in headless mode by default)
        browser = launch(p, ignore_default_args=["--hide-scrollbars"])
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


def wait_idle(page: Any) -> None:
    """Wait until the kernel has run every queued cell (busy first, then idle again)."""
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=180_000)


def keep(page: Any, element: Any, name: str) -> None:
    """Screenshot `element` to PROMPTLAB_SCREENSHOTS/<name>.png when that variable is set."""
    where = os.environ.get("PROMPTLAB_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        path = str(Path(where) / f"{name}.png")
        if element.bounding_box()["height"] < page.viewport_size["height"] - 100:
            element.scroll_into_view_if_needed()
            element.screenshot(path=path)
        else:  # taller than the window: its top part, as a reader first sees it
            element.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.screenshot(path=path)


OVERFLOW = """(table) => {
    // How a table sits in its output: "fits" inside the output's box, "scrolls" inside a box with a horizontal
    // scroll bar that itself fits, or "cut" (wider than the output and nothing to scroll it).
    const output = table.closest('.jp-OutputArea-output');
    const right = output.getBoundingClientRect().right + 1;
    if (table.getBoundingClientRect().right <= right) return 'fits';
    for (let el = table.parentElement; el && el !== output.parentElement; el = el.parentElement) {
        const style = getComputedStyle(el);
        if (['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth
            && el.getBoundingClientRect().right <= right) return 'scrolls';
    }
    return 'cut: table right ' + table.getBoundingClientRect().right + ' > output right ' + right;
}"""


def tables_fit_or_scroll(nb: Any, at_least: int) -> list[str]:
    """Every table in the notebook's outputs fits its output or scrolls inside it; returns how each sits."""
    tables = nb.locator(".jp-OutputArea-output table")
    assert tables.count() >= at_least
    placed = [tables.nth(k).evaluate(OVERFLOW) for k in range(tables.count())]
    assert all(p in ("fits", "scrolls") for p in placed), placed
    return placed


def explorer_field(nb: Any, label: str, value: str) -> None:
    field = nb.locator(f".widget-text:has(label:text-is('{label}')) input")
    field.fill(value)
    field.press("Enter")


def log_text(nb: Any) -> str:
    """The whole log (its folded part when there is one, else the lines in view)."""
    whole = nb.locator(".promptlab-log-all pre")
    return whole.first.text_content() if whole.count() else nb.locator(".promptlab-log-tail").first.inner_text()


DEMO_FIRST = f"results/demo yet: {FIRST_STEPS['demo']}."
FRESH = {
    "03_compare": DEMO_FIRST,
    "04_findings": DEMO_FIRST,
    "05_runs": DEMO_FIRST,
    "06_baselines": "results/baselines yet: run `promptlab sweep experiments/baselines.yaml` first.",
    "07_critic": DEMO_FIRST,
    "08_judge": f"results/people yet: {FIRST_STEPS['people']}.",
}
"""The notebooks that read a results directory, and what each says on a fresh clone."""


def one_line_error(nb: Any) -> str:
    """The notebook's first error output, checked to be one line with no traceback."""
    error = nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    error.first.wait_for(timeout=120_000)
    text = error.first.inner_text().strip()
    assert "\n" not in text and "Traceback" not in text and "File " not in text and "----" not in text, text
    return text


def test_01_explore_run_shows_the_plot_and_the_final_prompt(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="01_explore"))
    run = nb.locator(".widget-button", has_text="Run")
    run.wait_for(timeout=120_000)
    # with the defaults (the embedded model), a note says what SmolLM2-135M can and cannot show
    note = nb.locator(".promptlab-note")
    playwright_api.expect(note).to_contain_text("rewrites are usually worse than the starting prompt")
    assert note.bounding_box()["height"] > 0
    for label in ("generator", "critic"):
        explorer_field(nb, label, "fake/auto")
    run.click()
    final = nb.locator("pre.promptlab-final")
    final.wait_for(timeout=120_000)
    expect = playwright_api.expect  # these assertions wait for the page to settle (an image renders late)
    expect(nb.locator(".widget-output img")).to_have_count(1)  # the trajectory plot
    # the default task file is the grounded one: its first task's prompt, and a chart of dev accuracy too
    expect(nb.locator("pre.promptlab-original")).to_have_text("What do you think of this review?\n\n{input}")
    expect(final).not_to_have_text("(none)")
    assert final.inner_text().strip()
    expect(nb.locator(".promptlab-log")).to_contain_text("run_finished")
    expect(nb.locator(".widget-html", has_text="stop reason")).to_contain_text("done: stop reason")
    assert "best dev accuracy" in nb.locator(".widget-output").first.inner_text()
    keep(page, nb.locator(".widget-vbox").first, "01_explore_after_click")
    # a second run starts with an empty log: one run_finished line, not two
    run.click()
    expect(run).to_be_disabled()
    expect(run).to_be_enabled(timeout=120_000)
    expect(nb.locator(".promptlab-log")).to_contain_text("run_finished")
    assert log_text(nb).count("run_finished") == 1, log_text(nb)
    assert "model_call" not in log_text(nb)  # one line per step, not per example
    # the call cache is the project's, not one under notebooks/
    assert (root / ".promptlab" / "cache").is_dir() and not (root / "notebooks" / ".promptlab").exists()


def test_01_explore_shows_a_long_error_once_and_keeps_the_run_button(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="01_explore"))
    run = nb.locator(".widget-button", has_text="Run")
    run.wait_for(timeout=120_000)
    natural = run.bounding_box()["width"]
    explorer_field(nb, "generator", LONG_MODEL)
    run.click()
    error = nb.locator(".promptlab-error")
    error.wait_for(timeout=120_000)
    expect = playwright_api.expect
    expect(nb.locator(".widget-html", has_text="failed")).to_contain_text("failed")
    keep(page, nb.locator(".widget-vbox").first, "01_explore_long_error")
    assert nb.inner_text().count("Unknown model") == 1, nb.inner_text()  # the error is shown once
    shown = error.inner_text()  # bad input is quoted bounded (#51): the field, the name's start and its length
    assert "generator_model" in shown and LONG_MODEL[:40] in shown and "285 characters" in shown, shown
    assert LONG_MODEL not in shown
    box = run.bounding_box()
    assert run.inner_text().strip() == "Run" and box["width"] >= natural - 1, (run.inner_text(), box, natural)
    output = nb.locator(".jp-OutputArea-output:has(.promptlab-error)").bounding_box()
    assert error.bounding_box()["x"] + error.bounding_box()["width"] <= output["x"] + output["width"] + 1


def test_01_explore_marks_a_run_that_ends_in_error(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="01_scripted"))
    run = nb.locator(".widget-button", has_text="Run")
    run.wait_for(timeout=120_000)
    expect = playwright_api.expect
    slider = nb.locator(".widget-slider:has(label:text-is('min criteria'))")
    expect(slider.locator("[disabled]")).to_have_count(0)
    for label in ("generator", "critic"):
        explorer_field(nb, label, "fake/broken")
    run.click()
    status = nb.locator(".promptlab-failed")
    status.wait_for(timeout=120_000)
    expect(status).to_contain_text("ended in error (stop reason error)")
    assert "done:" not in status.inner_text()
    expect(nb.locator(".promptlab-error")).to_contain_text("decomposer (plan): ParseError")
    keep(page, nb.locator(".widget-vbox").first, "01_explore_ended_in_error")
    # the min criteria control belongs to P³RO: another loop greys it out
    nb.locator(".widget-dropdown:has(label:text-is('loop')) select").select_option("pcee")
    expect(slider.locator("[disabled]")).to_have_count(1)


def test_02_sweep_tables_fit_or_scroll(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="02_sweep"))
    nb.locator(".jp-OutputArea-output img").wait_for(timeout=180_000)  # the last cell's chart
    wait_idle(page)
    text = nb.inner_text()
    assert "4 cells: 4 done, 0 failed" in text and "Traceback" not in text
    tables_fit_or_scroll(nb, 2)  # the cells and the summary table (14 columns: it scrolls)
    keep(page, nb.locator(".jp-OutputArea-output:has(table)").last, "02_sweep_summary")
    assert (root / "results" / "tiny" / "cells").is_dir()  # results/NAME under the project root
    keep(page, nb.locator(".jp-Notebook"), "02_sweep")


def test_02_sweep_with_a_bad_model_says_so_in_one_line(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="02_bad_model"))
    error = nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    error.first.wait_for(timeout=120_000)
    text = error.first.inner_text().strip()
    assert text.startswith("ConfigError: config.model: 'fake/nobody'"), text
    assert "\n" not in text and "Traceback" not in text and "File " not in text and "----" not in text, text
    keep(page, error.first, "02_bad_model")


def test_03_compare_tables_fit_or_scroll(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="03_compare"))
    nb.locator(".pl-iteration").wait_for(timeout=180_000)  # the run browser, in the last cell
    wait_idle(page)
    assert "Traceback" not in nb.inner_text()
    assert tables_fit_or_scroll(nb, 2)  # the cells, the summary table (and the run browser's)
    keep(page, nb.locator(".jp-Notebook"), "03_compare")


def test_04_findings_runs_top_to_bottom(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="04_findings"))
    nb.locator(".jp-RenderedMarkdown:has-text('Findings')").first.wait_for(timeout=180_000)
    wait_idle(page)
    assert "Traceback" not in nb.inner_text()
    assert nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    playwright_api.expect(nb.locator(".jp-OutputArea-output img").first).to_be_visible(timeout=60_000)
    tables_fit_or_scroll(nb, 1)


def test_06_baselines_runs_top_to_bottom(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="06_baselines"))
    nb.locator(".jp-RenderedMarkdown:has-text('Which loop leads at equal budget')").first.wait_for(timeout=180_000)
    wait_idle(page)
    assert "Traceback" not in nb.inner_text()
    assert nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    playwright_api.expect(nb.locator(".jp-OutputArea-output img").first).to_be_visible(timeout=60_000)
    shown = nb.inner_text()  # OPRO holds the best wording at 94 calls, but 2 pairs cannot prove a lead after Holm
    assert "loop=opro: 1.000 [1.000, 1.000], n=2" in shown and "Inconclusive after Holm's correction" in shown
    tables_fit_or_scroll(nb, 2)  # the equal-budget table and the paired differences


def test_07_critic_shows_the_bias_tables_and_charts(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="07_critic"))
    nb.locator(".jp-RenderedMarkdown:has-text('first-position preference')").first.wait_for(timeout=180_000)
    wait_idle(page)
    assert "Traceback" not in nb.inner_text()
    assert nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    playwright_api.expect(nb.locator(".jp-OutputArea-output img").first).to_be_visible(timeout=60_000)
    shown = nb.inner_text()
    # critics named as in 03's and 04's legends (`sim/` and `fake/` left out)
    assert "biased per_100 0.3" in shown and "\nbias-critic: 100% of 2 pairs flip under swapped order" in shown
    tables_fit_or_scroll(nb, 3)  # the three critics' bias tables (and the re-asks' frames)
    keep(page, nb.locator(".jp-Notebook"), "07_critic")


def test_05_runs_steps_through_iterations(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="05_runs"))
    expect = playwright_api.expect
    position = nb.locator(".widget-label", has_text=re.compile(r"^iteration \d+ of \d+"))
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


def test_05_runs_fits_long_cells_and_folds_per_example_rows(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="05_runs"))
    expect = playwright_api.expect
    position = nb.locator(".widget-label", has_text=re.compile(r"^iteration \d+ of \d+"))
    position.wait_for(timeout=120_000)
    cells = nb.locator(".widget-dropdown:has(label:text-is('cell')) select")
    # a cell is labelled by what differs between the cells, then its id
    cells.select_option(label=cells.locator("option", has_text="(wide)").inner_text())
    expect(position).to_have_text("iteration 0 of 2 (the starting prompt)")  # the start comes first
    # the go-to menu jumps to an iteration in one step
    nb.locator(".widget-dropdown:has(label:text-is('go to')) select").select_option(label="iteration 2 of 2")
    expect(position).to_have_text("iteration 2 of 2")
    nb.locator(".widget-dropdown:has(label:text-is('go to')) select").select_option(label="iteration 1 of 2")
    expect(position).to_have_text("iteration 1 of 2")
    view = nb.locator(".pl-iteration")
    output = nb.locator(".jp-OutputArea-output:has(.pl-iteration)").bounding_box()
    right = output["x"] + output["width"] + 1
    for table in ("table.pl-scores", "table.pl-steps >> nth=0"):
        box = view.locator(table).bounding_box()
        assert box["x"] + box["width"] <= right, (table, box, output)
    expect(view.locator("table.pl-scores")).to_contain_text(LONG_CRITERION)  # wrapped, not cut
    # what a reader looks for comes first: candidate, its scores, then decision and steps
    text = view.inner_text()
    order = [text.index(s) for s in ("Candidate", "Scores", "Decision:", "Reflection:", "Steps")]
    assert order == sorted(order), order
    # the 20 per-example score_dev calls are one folded row; their own rows stay hidden until expanded
    expect(view.locator("tr.pl-folded")).to_contain_text("target × 20")
    per_example = view.locator("details.pl-per-example")
    expect(per_example.locator("tr", has_text="score_dev").first).to_be_hidden()
    per_example.locator("summary").click()
    expect(per_example.locator("tr", has_text="score_dev").first).to_be_visible()
    assert "cost unknown" in text and "cost unknown USD" not in text
    # each dev example's reply and whether it was scored correct, one click away
    examples = view.locator("details.pl-examples")
    expect(examples.locator("summary")).to_contain_text("dev examples: 12 of 20 scored correct")
    examples.locator("summary").click()
    expect(examples.locator("tr.pl-correct")).to_have_count(12)
    expect(examples.locator("tr.pl-wrong").first).to_contain_text("answer 12")
    # a long step error is cut, its whole text on hover
    cut = view.locator("td[title*='no JSON object in the reply']").first
    assert cut.get_attribute("title").endswith("x" * 300) and len(cut.inner_text()) < 170
    keep(page, view, "05_runs_wide")


def test_run_cell_defaults_run_from_the_project_root(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="run_cell"))
    printed = nb.locator(".jp-OutputArea-output", has_text='"status"')
    printed.first.wait_for(timeout=180_000)
    status = json.loads(printed.first.inner_text())
    assert status["status"] == "ok"
    assert (root / "results" / "manual" / "cells" / status["cell_id"] / "status.json").is_file()
    assert (root / ".promptlab" / "cache").is_dir()
    assert not (root / "notebooks" / "results").exists() and not (root / "notebooks" / ".promptlab").exists()


@pytest.mark.parametrize("name", sorted(FRESH))
def test_a_fresh_clone_says_what_to_run_first_at_the_first_cell(page: Any, lab: tuple[str, Path], name: str) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name=f"{name}_fresh"))
    text = one_line_error(nb)
    assert text == f"NoResultsError: No results in {FRESH[name]}", text
    wait_idle(page)
    code = nb.locator(".jp-CodeCell")
    # the setup cell (after the parameters) stopped the notebook: no later cell has an output
    assert code.nth(1).locator(".jp-OutputArea-output", has_text=re.compile(r"\S")).count() == 1
    for k in range(2, code.count()):
        assert code.nth(k).locator(".jp-OutputArea-output").count() == 0, k
    # where the view rests after Run All, the message is in sight (not off-screen above the last cell)
    error = nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").first
    playwright_api.expect(error).to_be_in_viewport(timeout=10_000)
    keep(
        page,
        nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").first,
        f"{name}_fresh",
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("01_bad_threshold", "ConfigError: finish_threshold: -1 is not allowed; give a number from 1.0 to 10.0"),
        ("01_bad_task", "ConfigError: task_id: 'nope' is not one of the tasks: sentiment, arithmetic, dates"),
    ],
)
def test_01_explore_refuses_a_bad_parameter_in_one_line(
    page: Any, lab: tuple[str, Path], name: str, message: str
) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name=name))
    assert one_line_error(nb) == message
    assert nb.locator(".widget-button", has_text="Run").count() == 0  # no explorer with a clamped value
    keep(page, nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").first, name)


def stop_a_hanging_run(page: Any, nb: Any, root: Path, stop: Any) -> None:
    """Run 01_hang, let its first rewrite be recorded, make every later call take 600 s, then `stop()`: the run
    ends within 120 s of it (it did not wait for the call in flight), keeping its iterations 0 and 1, with the
    test measurement skipped and offered."""
    expect = playwright_api.expect
    flag = root / "hang.flag"
    flag.unlink(missing_ok=True)
    run = nb.locator(".widget-button", has_text="Run")
    run.wait_for(timeout=120_000)
    run.click()
    expect(nb.locator(".promptlab-log")).to_contain_text("[it1] decision", timeout=60_000)  # iteration 1 is kept
    flag.touch()  # from now on every call takes 600 s
    expect(nb.locator(".promptlab-log")).to_contain_text("[it2] ", timeout=30_000)  # a 600 s call is in flight
    page.wait_for_timeout(1_000)
    stop()
    stopped = nb.locator(".promptlab-stopped")
    expect(stopped).to_contain_text("stop reason interrupted", timeout=120_000)  # not the 600 s of the call
    expect(stopped).to_contain_text("not measured on test")
    summary = nb.locator(".widget-output").first.inner_text()
    iterations = int(re.search(r"(\d+) iteration\(s\)", summary).group(1))  # type: ignore[union-attr]
    assert 2 <= iterations < 11, summary  # iterations 0 and 1 (and the one stopped, if recorded) are kept
    expect(nb.locator(".widget-output img")).to_have_count(1)  # the chart of what it recorded
    expect(nb.locator(".widget-button", has_text="Measure best prompt on test")).to_be_visible()
    expect(run).to_be_enabled()
    # a second run starts at once, although the abandoned call still sleeps in its thread
    run.click()
    expect(nb.locator(".widget-button", has_text="Stop")).to_be_enabled(timeout=5_000)
    expect(nb.locator(".promptlab-log")).to_contain_text("run_started", timeout=60_000)
    nb.locator(".widget-button", has_text="Stop").click()
    expect(nb.locator(".promptlab-stopped")).to_contain_text("stop reason interrupted", timeout=120_000)
    flag.unlink()


def test_01_explore_stop_ends_the_run_at_once_and_measures_on_test_on_request(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="01_hang"))
    expect = playwright_api.expect
    stop = nb.locator(".widget-button", has_text="Stop")
    stop.wait_for(timeout=120_000)
    expect(stop).to_be_disabled()  # nothing to stop yet
    expect(nb.locator(".widget-button", has_text="Measure best prompt on test")).to_be_hidden()
    stop_a_hanging_run(page, nb, root, stop.click)
    keep(page, nb.locator(".widget-vbox").first, "01_explore_stopped")
    # the stopped run's best prompt, measured on the test examples by a click (its calls take 0.3 s again)
    nb.locator(".widget-button", has_text="Measure best prompt on test").click()
    expect(nb.locator(".widget-output").first).to_contain_text("test accuracy", timeout=120_000)
    expect(nb.locator(".widget-button", has_text="Measure best prompt on test")).to_be_hidden()


def test_01_explore_stopped_in_its_first_iteration_counts_what_the_chart_shows_and_gives_no_verdict(
    page: Any, lab: tuple[str, Path]
) -> None:
    """Stopped while iteration 1 runs, a run has one scored iteration (0, the starting prompt): the summary counts
    that one, as the chart draws it (one decision in the log), names the iteration cut short, and reads no
    calibration verdict from one candidate ("not enough candidates")."""
    url, root = lab
    expect = playwright_api.expect
    nb = open_and_run_all(page, url.format(name="01_hang_first"))
    flag = root / "hang.flag"
    flag.unlink(missing_ok=True)
    run = nb.locator(".widget-button", has_text="Run")
    run.wait_for(timeout=120_000)
    run.click()
    expect(nb.locator(".promptlab-log")).to_contain_text("[it0] decision", timeout=60_000)
    flag.touch()  # from now on every call takes 600 s: iteration 1 cannot finish
    expect(nb.locator(".promptlab-log")).to_contain_text("[it1] ", timeout=30_000)
    nb.locator(".widget-button", has_text="Stop").click()
    expect(nb.locator(".promptlab-stopped")).to_contain_text("stop reason interrupted", timeout=120_000)
    flag.unlink()
    keep(page, nb.locator(".widget-vbox").first, "01_explore_stopped_in_iteration_1")
    summary = nb.locator(".widget-output").first.inner_text()
    log = nb.locator(".promptlab-log").first.inner_text()
    decided = len(set(re.findall(r"\[it(\d+)\] decision", log)))
    count = int(re.search(r"(\d+) iteration\(s\)", summary).group(1))  # type: ignore[union-attr]
    assert count == decided == 1, summary  # the chart's one point: iteration 0
    assert "iteration 1 stopped before one" in summary
    assert "not enough candidates with both scores (n=1" in summary
    for verdict in ("carries no information", "ranks candidates", "Inconclusive", "Spearman"):
        assert verdict not in summary, summary
    expect(nb.locator(".widget-output img")).to_have_count(1)


def test_01_explore_kernel_interrupt_stops_a_clicked_run_at_once(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="01_hang_interrupt"))
    nb.locator(".widget-button", has_text="Run").wait_for(timeout=120_000)
    wait_idle(page)  # no cell is executing: the run below is a task a click started

    def interrupt() -> None:
        page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
        page.locator(".lm-Menu-item", has_text="Interrupt Kernel").first.click()

    stop_a_hanging_run(page, nb, root, interrupt)
    keep(page, nb.locator(".widget-vbox").first, "01_explore_kernel_interrupt")


def test_01_explore_stop_ends_a_gepa_run_at_once_keeping_its_iterations(page: Any, lab: tuple[str, Path]) -> None:
    """GEPA runs in a worker thread of its own: the Stop cancels its call in flight, ends that thread and keeps
    what GEPA decided (iterations 0 and 1)."""
    url, root = lab
    nb = open_and_run_all(page, url.format(name="01_hang_gepa"))
    stop = nb.locator(".widget-button", has_text="Stop")
    stop.wait_for(timeout=120_000)
    stop_a_hanging_run(page, nb, root, stop.click)
    playwright_api.expect(nb.locator(".promptlab-log")).to_contain_text("reflector")  # GEPA's reflection ran
    keep(page, nb.locator(".widget-vbox").first, "01_explore_gepa_stopped")


def test_01_explore_kernel_interrupt_ends_a_gepa_run_at_once(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="01_hang_gepa_interrupt"))
    nb.locator(".widget-button", has_text="Run").wait_for(timeout=120_000)
    wait_idle(page)

    def interrupt() -> None:
        page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
        page.locator(".lm-Menu-item", has_text="Interrupt Kernel").first.click()

    stop_a_hanging_run(page, nb, root, interrupt)
    keep(page, nb.locator(".widget-vbox").first, "01_explore_gepa_kernel_interrupt")


def test_02_sweep_interrupted_says_what_it_kept_in_two_lines(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="02_slow"))
    expect = playwright_api.expect
    expect(nb.locator(".jp-OutputArea-output", has_text="models: fake/slow").first).to_be_visible(timeout=120_000)
    expect(nb.locator(".jp-OutputArea-output", has_text="sweep tiny").first).to_be_visible(timeout=120_000)  # the bar
    page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
    page.locator(".lm-Menu-item", has_text="Interrupt Kernel").first.click()
    wait_idle(page)
    errors = nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    expect(errors.filter(has_text="run the same sweep again to resume").first).to_be_visible(timeout=60_000)
    expect(errors.last).to_have_text(re.compile(r"^\s*KeyboardInterrupt\s*$"), timeout=30_000)  # it renders last
    shown = nb.inner_text()
    assert "KeyboardInterrupt" in shown and "Traceback" not in shown and "File " not in shown, shown
    last = errors.last.inner_text().strip()
    assert last == "KeyboardInterrupt", last  # one line, not a 40-line traceback
    statuses = list((root / "results" / "tiny-fake_slow").glob("cells/*/status.json"))
    assert all(json.loads(p.read_text())["status"] == "ok" for p in statuses)  # kept cells are whole
    keep(page, nb.locator(".jp-Notebook"), "02_interrupted")


def test_02_sweep_says_its_calls_and_time_before_it_starts(page: Any, lab: tuple[str, Path]) -> None:
    url, _ = lab
    nb = open_and_run_all(page, url.format(name="02_plan"))
    plan = nb.locator(".jp-OutputArea-output", has_text="models: fake/slow").first
    plan.wait_for(timeout=120_000)
    text = plan.inner_text()
    # the calls counted by a dry run, the time from a probe of the model measured now, and the cache's part
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), lines  # wrapped at words, never cut mid-word by the page
    text = " ".join(line.strip() for line in lines)
    assert "calls: about 12 model calls for the 4 runs (19 asked" in text, text
    assert "counted by a dry run of the experiment on fake/auto" in text, text
    seconds = re.search(r"fake/slow took (\d+\.\d+) s per call just now on this machine", text)
    assert seconds and float(seconds.group(1)) >= 0.3 / 4, text  # 0.3 s a call, at most 4 at once
    assert "a re-run resumes from it" in text, text
    keep(page, plan, "02_sweep_plan")
    wait_idle(page)


def test_02_sweep_shows_busy_while_it_runs_and_an_interrupt_stops_it_at_once(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="02_stuck"))
    expect = playwright_api.expect
    sweeping = nb.locator(".jp-CodeCell", has_text="result = sweep(")
    bar = sweeping.locator(".jp-OutputArea-output", has_text="sweep tiny")
    bar.wait_for(timeout=180_000)  # the bar is there: the sweep runs (its calls take 600 s each)
    status = page.locator("#jp-main-statusbar")
    for _ in range(6):  # while the sweep's cell runs, the kernel says it is busy
        assert sweeping.locator(".jp-InputPrompt").inner_text().strip() == "[*]:"
        expect(status).to_contain_text("Busy")
        expect(status).not_to_contain_text("Idle")
        page.wait_for_timeout(300)
    keep(page, nb.locator(".jp-Notebook"), "02_sweep_running")
    page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
    page.locator(".lm-Menu-item", has_text="Interrupt Kernel").first.click()
    # stopped at once, with the calls in flight (600 s each) left to end on their own
    expect(sweeping.locator(".jp-OutputArea-output", has_text="KeyboardInterrupt")).to_be_visible(timeout=120_000)
    expect(status).to_contain_text("Idle", timeout=120_000)
    shown = sweeping.inner_text()
    assert "run the same sweep again to resume" in shown and "Traceback" not in shown, shown
    assert shown.count("sweep tiny:") == 1, shown  # the bar's last state once, above the line, not again below
    statuses = [json.loads(p.read_text()) for p in (root / "results" / "stuck").glob("cells/*/status.json")]
    assert all(s["status"] == "ok" for s in statuses), statuses  # kept cells are whole
    keep(page, sweeping, "02_sweep_interrupted_at_once")


def test_02_sweep_on_a_fresh_clone_names_the_demo_s_time_before_any_model_call(
    page: Any, lab: tuple[str, Path]
) -> None:
    """02 as a fresh clone has it (the demo, no cell finished, not confirmed): its first output, the plan, names a
    time for the demo, labelled as measured elsewhere; then it asks, having made no model call."""
    url, root = lab
    nb = open_and_run_all(page, url.format(name="02_sweep_fresh"))
    error = nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").first
    error.wait_for(timeout=300_000)
    wait_idle(page)
    text = error.inner_text().strip()
    assert text.startswith("NeedsConfirmation: Not started: this sweep should take about 38 min (63 runs"), text
    plan = " ".join(nb.locator(".jp-OutputArea-output", has_text="demo: 3 cells").first.inner_text().split())
    assert "time: about 21 min to 38 min, not measured here: measured on" in plan, plan
    assert "just now on this machine" not in plan  # no probe: no model call before the user confirms
    assert not (root / "results" / "demo" / "cells").exists()
    keep(page, nb.locator(".jp-Notebook"), "02_sweep_fresh_plan")


def test_02_sweep_run_all_prints_its_plan_and_asks_before_a_long_sweep(page: Any, lab: tuple[str, Path]) -> None:
    url, root = lab
    nb = open_and_run_all(page, url.format(name="02_big"))
    expect = playwright_api.expect
    error = nb.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").first
    error.wait_for(timeout=180_000)
    wait_idle(page)
    text = error.inner_text().strip()
    assert text.startswith("NeedsConfirmation: Not started: this sweep has no time estimate"), text
    assert "40000 runs" in text and "set confirm = True in the parameters cell" in text and "\n" not in text, text
    # the plan was printed first, above the message, and the message is in view where Run All left the page
    plan = nb.locator(".jp-OutputArea-output", has_text="models: fake/slow").first
    assert "= 40000 runs" in plan.inner_text() and plan.bounding_box()["y"] < error.bounding_box()["y"]
    expect(error).to_be_in_viewport(timeout=10_000)
    # no model call at all before the user confirms: not the sweep's, not a timing probe's
    log = root / "big_calls.log"
    assert not log.exists() or log.read_text().count("call") == 0, log.read_text()
    assert "not timed before the sweep is confirmed" in " ".join(plan.inner_text().split())  # lines wrap
    assert not (root / "results" / "big" / "cells").exists()
    assert nb.locator(".jp-CodeCell").last.locator(".jp-OutputArea-output").count() == 0  # the charts' cell
    keep(page, nb.locator(".jp-Notebook"), "02_sweep_asks_first")


def _start_judging(page: Any, nb: Any, person: str) -> None:
    """Type a name into 08_judge's widget and press Start."""
    name = nb.locator(".pl-judge-name input")
    name.wait_for(timeout=120_000)
    name.fill(person)
    nb.locator(".pl-judge-start").click()


def test_08_judge_judges_12_items_with_clicks_and_keys_and_resumes_at_13_after_a_restart(
    page: Any, lab: tuple[str, Path]
) -> None:
    url, root = lab
    results = root / "results" / "judged"
    nb = open_and_run_all(page, url.format(name="08_judge"))
    wait_idle(page)
    _start_judging(page, nb, "tester")
    progress = nb.locator(".pl-judge-progress")
    progress.locator("text=Item 1 of").wait_for(timeout=60_000)
    plan = read_plan(results)
    first = plan.item(plan.slots[0].item)
    shown = [first.texts[side] for side in plan.slots[0].shown]
    # the two texts in the drawn order, under A and B, and nothing else: no prompt, loop, model or critic
    assert nb.locator(".pl-judge-texts").inner_text().split("\n") == ["A", shown[0], "B", shown[1]]
    assert nb.locator(".pl-judge-input").inner_text().split("\n") == ["Input", first.input]
    chosen = []
    for k in range(12):
        value = ("A", "B", "tie")[k % 3]
        if k % 2:  # a click on the button
            nb.locator(
                ".pl-judge-value", has_text={"A": "A is better", "B": "B is better", "tie": "As good"}[value]
            ).click()
        else:  # its key, with the focus on the page
            progress.click()  # the focus on the notebook, in no text box
            page.keyboard.press({"A": "a", "B": "b", "tie": "t"}[value])
        chosen.append(value)
        progress.locator(f"text=Item {k + 2} of").wait_for(timeout=60_000)
    keep(page, nb, "08_judge")
    page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
    page.locator(".lm-Menu-item", has_text="Restart Kernel…").first.click()
    page.locator(".jp-Dialog button", has_text="Restart").first.click()
    wait_idle(page)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
    wait_idle(page)
    _start_judging(page, nb, "tester")
    nb.locator(".pl-judge-progress >> text=Item 13 of").wait_for(timeout=60_000)
    stored = read_judgments(results).judgments
    assert [j.position for j in stored] == list(range(12)) and [j.value for j in stored] == chosen
    assert [j.shown for j in stored] == [plan.slots[k].shown for k in range(12)]
    assert [j.item for j in stored] == [plan.slots[k].item for k in range(12)]
    assert all(j.person == "tester" and j.source == "widget" and j.seconds is not None for j in stored)
    assert len((results / "judgments" / "tester.jsonl").read_text().splitlines()) == 12
