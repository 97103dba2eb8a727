"""A cache and a results directory written before the call path moved into rooms (commit c9d31e1, `promptlab sweep
experiments/tiny.yaml --out results --cache cache`) still load and replay: the move changed module paths, and
nothing on disk may name one. The fixture is in tests/results/before_move/."""

from __future__ import annotations

import shutil
from pathlib import Path

import promptlab as pl
from promptlab.sweeps.run import sweep

BEFORE = Path(__file__).parent / "before_move"


def test_a_results_directory_written_before_the_move_loads_and_reports(tmp_path: Path) -> None:
    results = shutil.copytree(BEFORE / "results", tmp_path / "results")
    loaded = pl.load(results)
    assert len(loaded.runs) == 4 and set(loaded.runs["loop"]) == {"p3ro", "creator_critic"}
    assert len(loaded.trajectories) > 0
    report = pl.report(results)
    assert "summary.md" in report and report["summary.md"].read_text(encoding="utf-8").strip()


def test_a_cache_written_before_the_move_replays_every_call_of_a_fresh_sweep(tmp_path: Path) -> None:
    cache = shutil.copytree(BEFORE / "cache", tmp_path / "cache")
    experiment = BEFORE / "results" / "experiment.yaml"  # self-contained: its tasks.jsonl lies beside it
    result = sweep(experiment, tmp_path / "fresh", cache=cache, progress=False)
    assert result.done == 4 and result.failed == 0
    spend = result.spend
    assert spend.calls > 0 and spend.cache_hits == spend.calls  # 0 model calls: every one replayed
