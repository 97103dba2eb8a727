"""promptlab's own warnings in a notebook as plain notes: a cache entry it treats as a miss, a results file it
skips. Unhandled, a `logging` warning reaches stderr (Python's last-resort handler) and a `warnings.warn` warning
prints with its file and source line, and a Jupyter frontend draws both in red, as if the cell had failed.
`install_notes` (which `notebook_setup` calls inside IPython) prints them to stdout instead, one line each:
"note: promptlab cache: entry 1a2b3c lost its value file; treating as a miss". They stay visible; other
libraries' warnings are shown as before. The `promptlab` command shows them on stderr, one bounded line each
(`notes_on_stderr`)."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from ..errors import PromptlabWarning
from ..reading import bounded

LOGGER = "promptlab"
"""The logger whose records (and its children's: promptlab.llm.cache, ...) are shown as notes."""


class NoteHandler(logging.Handler):
    """Prints each record at WARNING or above as "note: <message>" to the current stdout (read when the
    record is emitted, so a Jupyter kernel's per-cell stream gets it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("note: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stdout, flush=True)
        except Exception:  # a logging handler never raises into the code that logged
            self.handleError(record)


def note_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
    *,
    shown: Any = None,
) -> None:
    """`warnings.showwarning` for a notebook: a PromptlabWarning as "note: <message>" on stdout; any other
    warning through `shown` (the hook that was installed before)."""
    if issubclass(category, PromptlabWarning):
        print(f"note: {message}", file=sys.stdout, flush=True)
        return
    (shown or warnings.showwarning)(message, category, filename, lineno, file, line)


def install_notes() -> None:
    """Show promptlab's logging warnings and PromptlabWarnings as notes on stdout (see the module doc); calling
    it again changes nothing."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(h, NoteHandler) for h in logger.handlers):
        logger.addHandler(NoteHandler())
    if getattr(warnings.showwarning, "promptlab_notes", False):
        return
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        note_warning(message, category, filename, lineno, file, line, shown=shown)

    show.promptlab_notes = True  # type: ignore[attr-defined]
    warnings.showwarning = show


@contextlib.contextmanager
def notes_on_stderr() -> Iterator[None]:
    """Within the block, a PromptlabWarning (a damaged record skipped, a value read as missing) is shown as one
    line "promptlab: note: <message>" on stderr, cut to `reading.MAX_MESSAGE_CHARS`; other warnings as before."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *where: Any, **kw: Any) -> None:
            if issubclass(category, PromptlabWarning):
                print(f"promptlab: note: {bounded(str(message))}", file=sys.stderr, flush=True)
            else:
                shown(message, category, *where, **kw)

        warnings.showwarning = show
        yield


__all__ = ["LOGGER", "NoteHandler", "install_notes", "note_warning", "notes_on_stderr"]
