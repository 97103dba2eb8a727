"""A sweep leaves the objects alive when it starts out of the garbage collector's passes while it runs (#19: a
full collection over litellm's ~400k objects stalled the event loop for 0.2 s), and gives them back after."""

from __future__ import annotations

import gc
from pathlib import Path

from promptlab.events import Event
from promptlab.sweeps.run import sweep

TINY = Path(__file__).resolve().parents[2] / "experiments" / "tiny.yaml"


def test_a_sweep_freezes_the_heap_while_it_runs_and_gives_it_back(tmp_path: Path) -> None:
    assert gc.get_freeze_count() == 0
    seen: list[int] = []

    def during(event: Event) -> None:
        if event.kind == "model_call":
            seen.append(gc.get_freeze_count())

    result = sweep(TINY, tmp_path / "out", on_event=during, progress=False)
    assert result.done == 4 and seen and min(seen) > 0
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_is_left_as_it_was(tmp_path: Path) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        result = sweep(TINY, tmp_path / "out", progress=False)
        # neither unfrozen (0) nor frozen further (more); frozen objects freed meanwhile leave the count
        assert result.done == 4 and 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
