"""The run_cell notebook: what papermill executes for each cell of a sweep (`promptlab.sweeps.papermill`).

`TEMPLATE` is the copy shipped inside the package (package data); `notebooks/run_cell.ipynb` in the checkout
is the same file, for the by-hand command in its first cell. `notebooks/_build.py` writes both from
`run_cell_notebook()`, and a test checks that they match it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parent / "run_cell.ipynb"
"""The run_cell notebook shipped with the package."""


def run_cell_notebook() -> Any:
    """The run_cell notebook papermill executes for each cell (notebooks/_build.py writes it)."""
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    params = v4.new_code_cell(
        'results_dir = "results/manual"  # where the results of the cell go\n'
        'cell_id = ""  # the cell to run (promptlab sweep EXPERIMENT --list shows the ids; empty: the first)\n'
        'params_json = ""  # or the params of the cell as JSON (optional when cell_id is given)\n'
        'experiment_path = "experiments/tiny.yaml"  # the experiment file (empty: <results_dir>/experiment.yaml)\n'
        'cache_dir = ""  # the call cache (default: $PROMPTLAB_CACHE, $PROMPTLAB_CACHE_DIR or .promptlab/cache)\n'
        'notebook_path = ""  # where this executed notebook is kept (recorded with a failure)\n'
        "concurrency = None  # runs (tasks x replicates) at once (None: as many as the cell's models take calls)"
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        v4.new_markdown_cell(
            "# One sweep cell\n\nThe sweep runner executes this notebook once per cell with papermill "
            "(`promptlab sweep EXPERIMENT --executor papermill`). It runs the cell's tasks x replicates, "
            "writes the cell's results (status.json last) and prints its status. Relative paths are read from "
            "the project root, as in the other notebooks, and the call cache is the project's. By hand (the "
            "defaults run the first cell of `experiments/tiny.yaml` into `results/manual`):\n\n"
            "```\npapermill notebooks/run_cell.ipynb out.ipynb -p experiment_path experiments/tiny.yaml \\\n"
            "    -p cell_id <id> -p results_dir results/tiny\n```"
        ),
        params,
        v4.new_code_cell(
            "from promptlab.ui.notebook import notebook_setup\n\n"
            "# work from the project root; full tracebacks kept, since a failed cell's notebook is its record\n"
            "notebook_setup(tracebacks=True)"
        ),
        v4.new_code_cell(
            "import json\n\nfrom promptlab.sweeps.execute import run_notebook_cell\n\n"
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
