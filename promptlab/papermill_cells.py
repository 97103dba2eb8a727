"""The papermill executor of a sweep: each cell runs notebooks/run_cell.ipynb in its own kernel.

`workers` threads each drive one papermill run at a time; the notebook writes the cell's results itself
(status.json last) and the executed notebook is kept as cells/<cell_id>/run_cell.ipynb. A notebook that
raises, or a kernel that dies, is recorded as a failed cell (cell index, ename, evalue) and the sweep
goes on. Each kernel gets PROMPTLAB_LOCAL_THREADS = cores // workers so workers share the cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .experiments import Cell
from .sweep_cell import CellOutcome, SweepPlan, cell_error, cell_outcome, write_text_atomic

TEMPLATE = Path(__file__).resolve().parents[1] / "notebooks" / "run_cell.ipynb"
"""The checkout's run_cell notebook (an installed package without the checkout uses a built-in copy)."""
KERNEL_ARGS = ["--log-level=CRITICAL"]
"""Arguments of each papermill cell's kernel (quiet: its warnings would repeat once per cell)."""

def run_papermill(pending: list[Cell], plan: SweepPlan, workers: int, template: Path | None) -> None:
    """`workers` daemon threads each run one papermill cell at a time. On Ctrl-C no further cell starts
    and the interrupt is raised at once: a running kernel either finishes its cell (inside Jupyter) or
    stops with this process (its kernel exits when its parent does); an unfinished cell is re-run later."""
    import queue

    nb = template or _template(plan.out)
    todo: queue.SimpleQueue[Cell] = queue.SimpleQueue()
    for cell in pending:
        todo.put(cell)
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        while not stop.is_set():
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            try:
                plan.record(_papermill_cell(cell, plan, nb))
            except BaseException as e:  # noqa: BLE001 -- a runner bug (not a cell failure): stop and re-raise
                errors.append(e)
                stop.set()

    threads = [threading.Thread(target=worker, name=f"promptlab-cell-{i}", daemon=True)
               for i in range(min(workers, len(pending)))]
    with _env("PROMPTLAB_LOCAL_THREADS", str(max(1, (os.cpu_count() or 1) // workers))):
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except KeyboardInterrupt:
            stop.set()
            raise
    if errors:
        raise errors[0]


def _papermill_cell(cell: Cell, plan: SweepPlan, template: Path) -> CellOutcome:
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from .results import cell_status, write_cell

    cell_dir = plan.out / "cells" / cell.cell_id
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "status.json").unlink(missing_ok=True)  # a failed earlier attempt; ok cells never get here
    final, partial = cell_dir / "run_cell.ipynb", cell_dir / ".run_cell.partial.ipynb"
    params = {"results_dir": str(plan.out), "cell_id": cell.cell_id, "params_json": json.dumps(cell.params),
              "experiment_path": str(plan.out / "experiment.yaml"), "cache_dir": plan.cache_dir,
              "notebook_path": str(final), "concurrency": plan.cell_concurrency}
    t0 = time.perf_counter()
    error: dict[str, Any] | None = None
    try:
        pm.execute_notebook(str(template), str(partial), parameters=params, progress_bar=False, log_output=False,
                            cwd=os.getcwd(), extra_arguments=KERNEL_ARGS)
    except PapermillExecutionError as e:
        error = cell_error(cell, notebook=str(final), cell_index=e.cell_index, ename=e.ename, evalue=e.evalue)
    except Exception as e:  # noqa: BLE001 -- a dead kernel, a kernel that did not start: the cell failed
        error = cell_error(cell, e, notebook=str(final))
    finally:
        if partial.exists():
            os.replace(partial, final)
    wall = round(time.perf_counter() - t0, 4)
    status = cell_status(plan.out, cell.cell_id)
    if status is None:  # the notebook did not record the cell itself
        error = error or cell_error(cell, notebook=str(final), ename="MissingStatus",
                                    evalue="the notebook finished without writing status.json")
        write_cell(plan.out, cell.cell_id, cell.params, [], error=error, wall_time_s=wall)
    return cell_outcome(plan, cell, wall)


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """Set an environment variable (kernels inherit it) unless the user set it; restore after."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


def _template(out: Path) -> Path:
    """The checkout's notebooks/run_cell.ipynb, else the built-in copy written into the results dir."""
    if TEMPLATE.is_file():
        return TEMPLATE
    import nbformat

    path = out / "run_cell_template.ipynb"
    write_text_atomic(path, nbformat.writes(run_cell_notebook()))
    return path


def run_cell_notebook() -> Any:
    """The run_cell notebook papermill executes for each cell (notebooks/_build.py writes it)."""
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    params = v4.new_code_cell(
        'results_dir = "results/manual"  # where the results of the cell go\n'
        'cell_id = ""  # the cell to run (promptlab sweep EXPERIMENT --list shows the ids)\n'
        'params_json = ""  # or the params of the cell as JSON (optional when cell_id is given)\n'
        'experiment_path = ""  # the experiment file (default: <results_dir>/experiment.yaml)\n'
        'cache_dir = ""  # the call cache (default: $PROMPTLAB_CACHE_DIR or ./.promptlab/cache)\n'
        'notebook_path = ""  # where this executed notebook is kept (recorded with a failure)\n'
        "concurrency = 4  # runs (tasks x replicates) at once"
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        v4.new_markdown_cell(
            "# One sweep cell\n\nThe sweep runner executes this notebook once per cell with papermill "
            "(`promptlab sweep EXPERIMENT --executor papermill`). It runs the cell's tasks x replicates, "
            "writes the cell's results (status.json last) and prints its status. By hand:\n\n"
            "```\npapermill notebooks/run_cell.ipynb out.ipynb -p experiment_path experiments/demo.yaml \\\n"
            "    -p cell_id <id> -p results_dir results/x\n```"
        ),
        params,
        v4.new_code_cell(
            "import json\n\nfrom promptlab.sweep import run_notebook_cell\n\n"
            "status = run_notebook_cell(results_dir, cell_id=cell_id, params_json=params_json,\n"
            "                           experiment_path=experiment_path, cache_dir=cache_dir,\n"
            "                           notebook_path=notebook_path, concurrency=concurrency)"
        ),
        v4.new_code_cell(
            'print(json.dumps({k: status.get(k) for k in ("cell_id", "status", "n_runs", "wall_time_s",\n'
            '                                             "litellm_imported")}))'
        ),
    ]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"  # stable ids keep the notebook file reviewable
    return nb
