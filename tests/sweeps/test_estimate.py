"""The time estimate 02_sweep prints before it starts (issue #31 item 4)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from promptlab.results.store import write_cell
from promptlab.sweeps.estimate import duration, time_estimate


def test_the_estimate_comes_from_the_cells_finished_here(tmp_path: Path) -> None:
    cells = [SimpleNamespace(cell_id=c) for c in ("a", "b", "c", "d", "e")]
    assert "nothing measured to estimate from" in time_estimate(cells, tmp_path, workers=2)
    for cell_id in ("a", "b"):
        write_cell(tmp_path, cell_id, {"loop": "p3ro"}, [], wall_time_s=300.0)
    line = time_estimate(cells, tmp_path, workers=2)
    assert line == "time: about 8 min for the 3 unfinished cell(s), 2 at once (the 2 finished here took 5 min each)"
    for cell_id in ("c", "d", "e"):
        write_cell(tmp_path, cell_id, {"loop": "p3ro"}, [], wall_time_s=1.0)
    assert time_estimate(cells, tmp_path, workers=2).startswith("every cell is finished")


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (40, 720, 9000)] == ["40 s", "12 min", "2.5 h"]
