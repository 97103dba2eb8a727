"""#28 item 3 on the dask executor: a full results disk under a spending cap stops the sweep named (exit 4) with no
paid request uncounted beyond the one whose charge met the full disk: the task returns the error rather than raising
it (Dask would retry it, and a retry pays for the calls after the ones it replays), and no other cell starts."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import toyloop  # the "toy" loop; its folder goes on the workers' PYTHONPATH
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Reply
from full_disk import fill_up

from promptlab.cli import main
from promptlab.llm.spending.cap import SpendingCap
from promptlab.llm.spending.ledger import LEDGER_NAME
from promptlab.results.store import load

pytest.importorskip("distributed")

EACH = 0.0021
"""What gpt-4o-mini charges for each reply: 10,000 input tokens (0.0015) + 1,000 output (0.0006)."""


def distinct(body: dict[str, Any]) -> Reply:
    """A reply of its own for every request, so no later call is answered from the cache by an earlier one."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    text = json.dumps({"score": int(digest, 16) % 5 + 1}) if "Grade 1-10" in json.dumps(body) else digest[:16]
    return Reply(text, prompt_tokens=10_000, completion_tokens=1_000)


@pytest.mark.slow
def test_a_full_disk_stops_a_dask_sweep_without_retrying_its_cell(
    tmp_path: Path,
    tmpfs: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dask

    disk = tmpfs("2m")
    exp = write_experiment(
        tmp_path,
        {
            "name": "full",
            "loops": ["toy"],
            "config": {"model": "openai/gpt-4o-mini", "max_iterations": 3, "max_tokens": 2000},
            "grid": {"style": ["a", "b", "c"]},
        },
        topics(1),
    )
    out = disk / "out"
    args = ["sweep", str(exp), "--out", str(out), "--executor", "dask", "--workers", "1"]
    args += ["--cell-concurrency", "1", "--cache", str(tmp_path / "cache"), "--max-cost", "1", "--no-progress"]

    def full_from_the_second(index: int, address: tuple[str, int]) -> None:
        # the first charge writes the ledger and makes its reserve; the disk fills, and the second charge is
        # written into the reserve's room; that room is taken too, and the third charge fails
        if index in (1, 2):
            fill_up(disk)

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(toyloop.__file__).parent), os.getenv("PYTHONPATH", "")]))
    with (
        FaultServer(responder=distinct, on_request=full_from_the_second, model="gpt-4o-mini") as server,
        dask.config.set({"distributed.worker.preload": ["toyloop"]}),
    ):
        monkeypatch.setenv("OPENAI_API_BASE", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-disk")
        assert main(args) == 4
        err = capsys.readouterr().err.strip()
        assert str(out / LEDGER_NAME) in err and "no space left" in err and "run the same sweep again" in err, err
        assert "Traceback" not in err
        # the ledger counted 2 (the second in the reserve's room); the third reply was paid and kept, its charge
        # refused: the cell stopped there, was not retried, and no other cell started
        assert server.requests == 3
        assert SpendingCap(out / LEDGER_NAME, 1.0).spent() == pytest.approx(2 * EACH)
        assert not list(out.glob("cells/*/status.json"))  # no cell was marked failed for the full disk
        (disk / "filler").unlink()
        assert main(args) == 0
        assert sorted(load(out).cells["status"]) == ["ok", "ok", "ok"]
        assert server.requests == 18  # 3 cells x 3 iterations x 2 calls, each paid once: the third replayed
    assert SpendingCap(out / LEDGER_NAME, 1.0).spent() == pytest.approx(17 * EACH)
