"""promptlab's own warnings in a notebook are plain notes on stdout (one line each), not red stderr; they stay
visible, and other libraries' warnings are shown as before."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator

import pytest

from promptlab.errors import PromptlabWarning
from promptlab.ui.notes import LOGGER, NoteHandler, install_notes


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """install_notes for one test over a recording warnings hook (what showed warnings before), whose lines it
    yields; the hook and the logger's handlers are put back after it."""
    logger = logging.getLogger(LOGGER)
    before: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda m, c, *rest: before.append(f"{c.__name__}: {m}"))
    monkeypatch.setattr(logger, "handlers", list(logger.handlers))
    install_notes()
    install_notes()  # a second notebook_setup adds nothing
    yield before


def test_a_cache_warning_is_one_note_on_stdout(notes: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert sum(isinstance(h, NoteHandler) for h in logging.getLogger(LOGGER).handlers) == 1
    logging.getLogger("promptlab.llm.cache").warning(
        "promptlab cache: entry %s lost its value file; treating as a miss", "1a2b3c"
    )
    out, err = capsys.readouterr()
    assert out == "note: promptlab cache: entry 1a2b3c lost its value file; treating as a miss\n"
    assert "Traceback" not in err and "lost its value file" not in err


def test_a_promptlab_warning_is_a_note_and_another_warning_is_shown_as_before(
    notes: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("results: skipping cell a: ValueError: bad", PromptlabWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    out, err = capsys.readouterr()
    assert out == "note: results: skipping cell a: ValueError: bad\n"
    assert notes == ["UserWarning: something else"] and "skipping cell" not in err


def test_notebook_setup_installs_the_notes_only_inside_ipython(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptlab.ui import notebook

    calls: list[str] = []
    monkeypatch.setattr(notebook, "install_notes", lambda: calls.append("notes"))
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    notebook.install_notebook_notes()
    assert calls == []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    notebook.install_notebook_notes()
    assert calls == ["notes"]
