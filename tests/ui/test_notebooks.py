"""The notebooks run top to bottom under papermill with the scripted model; they are committed clean."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import papermill as pm
import pytest

from promptlab.results.labels import model_names
from promptlab.results.store import cell_status, load
from promptlab.sweeps.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NAMES = (
    "01_explore",
    "02_sweep",
    "03_compare",
    "04_findings",
    "05_runs",
    "06_baselines",
    "07_critic",
    "08_judge",
    "run_cell",
)


def execute(name: str, out: Path, **parameters: Any) -> nbformat.NotebookNode:
    """Run notebooks/<name>.ipynb with papermill from the repository root; return the executed notebook."""
    pm.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(out),
        parameters=parameters,
        cwd=str(ROOT),
        progress_bar=False,
        extra_arguments=["--log-level=CRITICAL"],
    )
    return nbformat.read(out, as_version=4)


def outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def text(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs(nb))


def images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs(nb))


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, nbformat.NotebookNode]]:
    """02_sweep run on experiments/tiny.yaml with fake/auto (its own cache dir)."""
    tmp = tmp_path_factory.mktemp("sweep-notebook")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROMPTLAB_CACHE_DIR", str(tmp / "cache"))
        nb = execute(
            "02_sweep",
            tmp / "02.ipynb",
            experiment_path="experiments/tiny.yaml",
            model="fake/auto",
            out_dir=str(tmp / "results"),
        )
        yield tmp / "results", nb


@pytest.mark.slow
def test_sweep_notebook_runs_the_experiment(swept: tuple[Path, nbformat.NotebookNode]) -> None:
    results_dir, nb = swept
    assert "4 cells: 4 done, 0 failed" in text(nb)
    assert "= 4 runs\nmodels: fake/auto" in text(nb)  # what it runs, said before it starts
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs(nb))
    assert "final score mean" in html and images(nb) == 1  # the readable table: rounded, names spaced
    assert len(load(results_dir).runs) == 4


@pytest.mark.slow
def test_compare_notebook_draws_the_charts(swept: tuple[Path, nbformat.NotebookNode], tmp_path: Path) -> None:
    results_dir, _ = swept
    nb = execute("03_compare", tmp_path / "03.ipynb", results_dir=str(results_dir))
    assert images(nb) == 2  # trajectories, score vs cost (one pairing, one stop reason, no threshold column)
    shown = text(nb)
    assert "No pairing heatmap: one generator model only" in shown and "4 cells, 4 runs" in shown
    assert "Stop reasons: every run (4) stopped with" in shown  # one bar would say only this
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs(nb))  # browser


@pytest.mark.slow
def test_run_browser_notebook_runs(swept: tuple[Path, nbformat.NotebookNode], tmp_path: Path) -> None:
    results_dir, _ = swept
    nb = execute("05_runs", tmp_path / "05.ipynb", results_dir=str(results_dir))
    assert sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs(nb)) == 1


def test_generated_notebooks_are_lint_clean() -> None:
    import subprocess
    import sys

    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed in this environment (pip install -e '.[dev]')")
    done = subprocess.run([str(ruff), "check", str(NOTEBOOKS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def markdown(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("data", {}).get("text/markdown", "") for o in outputs(nb))


@pytest.mark.slow
def test_findings_notebook_on_a_grounded_directory(tmp_path: Path) -> None:
    from grounded import write_grounded_sweep

    results_dir = write_grounded_sweep(tmp_path / "results")
    nb = execute("04_findings", tmp_path / "04.ipynb", results_dir=str(results_dir))
    assert "12 runs" in text(nb) and "## Findings" in markdown(nb)
    assert "grounded data: yes" in text(nb) and "The best rule (stop at threshold 8, cap 3)" in markdown(nb)
    assert images(nb) == 4  # forest, calibration, grounded trajectories, one counterfactual heatmap


@pytest.mark.slow
def test_findings_notebook_on_the_sweep_results(swept: tuple[Path, nbformat.NotebookNode], tmp_path: Path) -> None:
    results_dir, _ = swept
    nb = execute("04_findings", tmp_path / "04.ipynb", results_dir=str(results_dir))
    assert "4 runs; grounded data: no" in text(nb) and "No grounded data" in markdown(nb)


@pytest.mark.slow
def test_findings_notebook_shows_the_people_section_once_judgments_exist(tmp_path: Path) -> None:
    from judging import CRITICS, WRITER, better_side, write_open_ended_sweep

    from promptlab import scripted
    from promptlab.people import Judgment, add_judgments, make_plan, write_plan
    from promptlab.people.reference import run_reference

    scripted("nb-judge", respond=lambda messages: '{"better": "tie", "reason": "alike"}')
    results_dir = write_open_ended_sweep(tmp_path / "results", writers=("fake/auto", WRITER))
    before = execute("04_findings", tmp_path / "04-before.ipynb", results_dir=str(results_dir))
    assert "no judgments: nobody has judged these runs" in text(before)
    assert "People and the critic" not in markdown(before)
    plan = make_plan(results_dir, seed=1, repeat_every=0)
    write_plan(results_dir, plan)
    rows = []
    for item in plan.items:
        side = better_side(item.texts)
        value = "tie" if side == "tie" else "A" if item.order[0] == side else "B"
        rows += [Judgment(item=item.id, person=p, value=value, shown=item.order, source="code") for p in ("ann", "bob")]
    add_judgments(results_dir, rows)
    run_reference(results_dir, "fake/nb-judge")
    after = execute("04_findings", tmp_path / "04-after.ipynb", results_dir=str(results_dir))
    section = markdown(after).split("## People and the critic", 1)[1]
    assert "48 judgments (pairs) by 2 people on 24 of 24 planned items" in section
    assert f"| {CRITICS[0]} | critic vs people |" in section and "| fake/nb-judge (reference judge) |" in section
    assert "Pairings ranked by the reference judge fake/nb-judge" in section
    assert images(after) == images(before) + 1  # people.png's chart: each critic's kappa beside the people's
    assert "no judgments" not in text(after)


SUPPORT = ROOT / "tests" / "support"
REGISTER_BIAS_MODELS = (
    f"import sys\nsys.path.insert(0, {str(SUPPORT)!r})\nfrom biased import register_models\n_ = register_models(2)"
)
"""Appended to 07_critic's parameters cell: the kernel knows the scripted models the runs were made with."""


def with_prelude(name: str, dest: Path, prelude: str) -> Path:
    """notebooks/<name> copied to dest with `prelude` appended to its parameters cell."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\n" + prelude
    nbformat.write(nb, dest)
    return dest


@pytest.mark.slow
def test_critic_notebook_runs_the_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from biased import PLANTED, write_biased_sweep

    monkeypatch.setenv("PROMPTLAB_CACHE_DIR", str(tmp_path / "cache"))
    results_dir, _ = write_biased_sweep(tmp_path / "results", samples=2)
    source = with_prelude("07_critic", tmp_path / "07_in.ipynb", REGISTER_BIAS_MODELS)
    pm.execute_notebook(
        str(source),
        str(tmp_path / "07.ipynb"),
        parameters={"results_dir": str(results_dir), "budget": 10},
        cwd=str(ROOT),
        progress_bar=False,
        extra_arguments=["--log-level=CRITICAL"],
    )
    nb = nbformat.read(tmp_path / "07.ipynb", as_version=4)
    shown = markdown(nb)
    names = model_names(["fake/bias-critic", PLANTED, "sim/oracle"])  # critics named as in 03's and 04's legends
    assert all(f"**{name}**" in shown for name in names.values()) and "sim/oracle" not in shown
    oracle = shown.split("**oracle**", 1)[1]  # a deterministic oracle's differences never vary: no verdict (#52)
    assert oracle.count("Not enough data") == 5 and "No evidence of bias" not in oracle
    # the scripted judge always names the first shown: +1 on both pairs, too few for a verdict (Tango's interval)
    assert "| order | +1.000 [-0.581, +1.000] | re-asks | 2 |" in shown
    assert "Not enough data: 2 pairs judged in both orders, the probe needs at least 10" in shown
    assert "bias-critic: 100% of 2 pairs flip under swapped order" in text(nb)
    assert images(nb) == 1


@pytest.mark.slow
def test_critic_notebook_without_results_says_to_run_the_demo(tmp_path: Path) -> None:
    with pytest.raises(pm.PapermillExecutionError) as e:
        execute("07_critic", tmp_path / "07.ipynb", results_dir=str(tmp_path / "nothing"))
    assert e.value.ename == "NoResultsError"  # a ConfigError: one line, as every notebook on a fresh clone says
    assert e.value.evalue == (
        f"No results in {tmp_path / 'nothing'} yet: run notebook 02 (or `promptlab sweep EXPERIMENT --out DIR`) first."
    )
    nb = nbformat.read(tmp_path / "07.ipynb", as_version=4)
    failed = [c for c in nb.cells if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.outputs)]
    assert len(failed) == 1 and "notebook_setup(results=results_dir)" in failed[0].source  # its first cell


@pytest.mark.slow
def test_baselines_notebook_on_a_budgeted_directory(tmp_path: Path) -> None:
    from wording import write_baselines_sweep

    results_dir = write_baselines_sweep(tmp_path / "results")
    nb = execute("06_baselines", tmp_path / "06.ipynb", results_dir=str(results_dir))
    assert "8 runs of 4 loop(s); budget in calls" in text(nb)
    table = markdown(nb)
    assert "### 4. Which loop leads at equal budget?" in table
    # OPRO's scripted optimizer climbs a keyword per candidate: at 94 calls it holds the best wording
    assert "| 94 | loop=opro: 1.000 [1.000, 1.000], n=2 | over loop=ape: +0.500 [+0.500, +0.500]" in table
    assert images(nb) == 1  # the dev and test curves in one figure
    assert "loop=resample - loop=protegi" in "".join(o.get("data", {}).get("text/html", "") for o in outputs(nb))


@pytest.mark.slow
def test_baselines_notebook_draws_gepa_beside_the_others_and_its_search_tree(tmp_path: Path) -> None:
    from wording import write_baselines_sweep, write_gepa_cell

    results_dir = write_gepa_cell(write_baselines_sweep(tmp_path / "results"))
    nb = execute("06_baselines", tmp_path / "06.ipynb", results_dir=str(results_dir))
    assert "10 runs of 5 loop(s); budget in calls" in text(nb)
    assert "loop=gepa" in markdown(nb) or "loop=gepa" in text(nb)
    assert images(nb) == 2  # the dev and test curves, and the search trees of the two GEPA runs
    assert "no GEPA run in this directory" not in text(nb)


@pytest.mark.slow
def test_baselines_notebook_says_when_no_run_records_incumbents(
    swept: tuple[Path, nbformat.NotebookNode], tmp_path: Path
) -> None:
    results_dir, _ = swept
    nb = execute("06_baselines", tmp_path / "06.ipynb", results_dir=str(results_dir))
    assert "budget in no unit: no run records its incumbents" in text(nb)
    assert "no equal-budget table" in text(nb) and images(nb) == 0


@pytest.mark.slow
def test_explore_notebook_autoruns_with_the_button_handler(tmp_path: Path) -> None:
    nb = execute(
        "01_explore", tmp_path / "01.ipynb", model="fake/auto", autorun=True, max_iterations=2, task_id="dates"
    )
    assert "p3ro on dates:" in text(nb) and "stop reason" in text(nb) and "best dev accuracy" in text(nb)
    assert "[it1] phase generator" in text(nb)  # the live log, as cell output under autorun
    assert "measuring the candidate on the dev examples" in text(nb)  # the grounded tasks are the default
    assert images(nb) == 1  # the trajectory chart (critic's score beside the dev accuracy)
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs(nb))
    assert "<b>original</b>" in html and "<b>final</b>" in html  # final prompt beside the original
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs(nb))


@pytest.mark.slow
def test_run_cell_notebook_by_hand(tmp_path: Path) -> None:
    experiment = ROOT / "experiments" / "tiny.yaml"
    cell = load_experiment(experiment).cells()[0]
    nb = execute(
        "run_cell",
        tmp_path / "cell.ipynb",
        experiment_path=str(experiment),
        cell_id=cell.cell_id,
        results_dir=str(tmp_path / "results"),
    )
    printed = json.loads(outputs(nb)[-1]["text"])
    assert printed["cell_id"] == cell.cell_id and printed["status"] == "ok"
    assert cell_status(tmp_path / "results", cell.cell_id)["params"] == cell.params  # type: ignore[index]
    assert (tmp_path / "results" / "experiment.yaml").is_file()


@pytest.mark.slow
def test_run_cell_from_the_notebooks_folder_reads_the_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As JupyterLab runs it: the kernel starts in notebooks/, the defaults are relative to the project root,
    and the call cache is the project's .promptlab/cache (no cache variable set)."""
    project = tmp_path / "project"
    for sub in ("experiments", "data", "notebooks"):
        (project / sub).mkdir(parents=True)
    shutil.copy(ROOT / "experiments" / "tiny.yaml", project / "experiments")
    shutil.copy(ROOT / "data" / "demo_tasks.jsonl", project / "data")
    monkeypatch.delenv("PROMPTLAB_CACHE_DIR")
    pm.execute_notebook(
        str(NOTEBOOKS / "run_cell.ipynb"),
        str(tmp_path / "cell.ipynb"),
        cwd=str(project / "notebooks"),
        progress_bar=False,
        extra_arguments=["--log-level=CRITICAL"],
    )
    printed = json.loads(outputs(nbformat.read(tmp_path / "cell.ipynb", as_version=4))[-1]["text"])
    first = load_experiment(ROOT / "experiments" / "tiny.yaml").cells()[0]
    assert printed["cell_id"] == first.cell_id and printed["status"] == "ok"
    assert cell_status(project / "results" / "manual", first.cell_id) is not None
    assert (project / ".promptlab" / "cache").is_dir()
    assert sorted(p.name for p in (project / "notebooks").iterdir()) == []  # nothing written under notebooks/


def test_notebooks_are_committed_clean_and_match_the_builder() -> None:
    spec = importlib.util.spec_from_file_location("_build", NOTEBOOKS / "_build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    from promptlab.sweeps.notebook import TEMPLATE, run_cell_notebook

    built = {
        "01_explore": build.EXPLORE,
        "02_sweep": build.SWEEP,
        "03_compare": build.COMPARE,
        "04_findings": build.FINDINGS,
        "05_runs": build.RUNS,
        "06_baselines": build.BASELINES,
        "07_critic": build.CRITIC,
        "08_judge": build.JUDGE,
        "run_cell": build.stable_ids(run_cell_notebook()),
    }
    for name in NAMES:
        path = NOTEBOOKS / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code), name
        assert sum("parameters" in c.metadata.get("tags", []) for c in code) == 1, name
        assert path.read_text(encoding="utf-8") == nbformat.writes(built[name]) + "\n", f"rebuild {name}"
    # the package's run_cell template (what the papermill executor runs) is the same file
    assert TEMPLATE.read_text(encoding="utf-8") == (NOTEBOOKS / "run_cell.ipynb").read_text(encoding="utf-8")
