"""What every notebook does first: work from the project root, and show promptlab's errors without frames."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from promptlab.errors import ConfigError
from promptlab.ui.notebook import NoResultsError, notebook_setup, project_root, short_errors


def test_the_project_root_is_found_from_the_root_or_its_notebooks_folder(tmp_path: Path) -> None:
    (tmp_path / "experiments").mkdir()
    (tmp_path / "notebooks").mkdir()
    assert project_root(tmp_path) == tmp_path.resolve()
    assert project_root(tmp_path / "notebooks") == tmp_path.resolve()  # where JupyterLab starts its kernel
    elsewhere = tmp_path / "scratch"
    elsewhere.mkdir()
    assert project_root(elsewhere) == elsewhere.resolve()  # anywhere else: where it is, nothing moves
    bare = tmp_path / "other" / "notebooks"  # a notebooks/ folder of a project without experiments/
    bare.mkdir(parents=True)
    assert project_root(bare) == (tmp_path / "other").resolve()


def test_notebook_setup_moves_to_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "experiments").mkdir()
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert notebook_setup() == tmp_path.resolve() and Path(os.getcwd()) == tmp_path.resolve()


def test_short_errors_show_a_promptlab_error_as_its_message_only(capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        short_errors(shell)
        capsys.readouterr()
        result = shell.run_cell(
            "from promptlab.errors import ConfigError\nraise ConfigError('config.model: bad\\nsecond line')"
        )
        shown = capsys.readouterr()
        assert isinstance(result.error_in_exec, ConfigError)  # the cell still fails
        text = re.sub(r"\x1b\[[0-9;]*m", "", shown.out + shown.err)  # without IPython's colours
        assert "ConfigError: config.model: bad\nsecond line" in text and "Traceback" not in text
        result = shell.run_cell("raise KeyboardInterrupt")  # an interrupt: one line, the sweep said what it kept
        shown = capsys.readouterr()
        text = re.sub(r"\x1b\[[0-9;]*m", "", shown.out + shown.err)
        assert isinstance(result.error_in_exec, KeyboardInterrupt)
        assert text.strip() == "KeyboardInterrupt" and "Traceback" not in text
        result = shell.run_cell("raise ValueError('not ours')")  # other errors keep their traceback
        shown = capsys.readouterr()
        assert isinstance(result.error_in_exec, ValueError) and "Traceback" in shown.out + shown.err
    finally:
        shell.set_custom_exc((), None)
        InteractiveShell.clear_instance()


@pytest.mark.parametrize(
    ("folder", "first"),
    [
        (
            "demo",
            "run notebook 02 (it plans the demo's sweep: its runs, model calls and time, then asks before it starts) or `scripts/demo` first.",
        ),
        ("baselines", "run `promptlab sweep experiments/baselines.yaml` first."),
        ("mine", "run notebook 02 (or `promptlab sweep EXPERIMENT --out DIR`) first."),
    ],
)
def test_a_notebook_on_a_fresh_clone_says_what_to_run_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, first: str
) -> None:
    (tmp_path / "experiments").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NoResultsError) as missing:
        notebook_setup(results=f"results/{folder}")
    text = str(missing.value)
    assert text == f"No results in results/{folder} yet: {first}"  # the words: one line
    (tmp_path / "results" / folder / "cells" / "abc").mkdir(parents=True)  # a cell that never finished
    with pytest.raises(NoResultsError, match=f"^No results in results/{folder} yet: "):
        notebook_setup(results=f"results/{folder}")


def test_a_results_directory_with_a_finished_cell_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from factories import write_sweep

    (tmp_path / "experiments").mkdir()
    write_sweep(tmp_path / "results" / "demo")
    monkeypatch.chdir(tmp_path)
    assert notebook_setup(results="results/demo") == tmp_path.resolve()
