"""The bias probes' re-asks on the embedded SmolLM2 (the real path of the demo's model critic): the loop's
critic re-scores padded and anchored candidates, the pairwise judge answers in both orders, and a second pass
is answered from the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from promptlab.analysis.bias import bias_table
from promptlab.analysis.bias_asks import probe_frames
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.results.store import load, write_cell

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "loops"))
from test_grounded_local import sentiment_task  # noqa: E402


@pytest.mark.local_model
def test_smollm2_critic_is_reasked_for_every_probe(tmp_path: Path) -> None:
    cfg = CreatorCriticConfig(
        model="local/smollm2",
        max_iterations=1,
        max_tokens=120,
        eval_max_tokens=6,
        finish_threshold=10.0,
        score_mode="expected",
    )
    runs = [run_creator_critic(sentiment_task(), cfg, sample=s) for s in (0, 1)]
    write_cell(tmp_path, "smollm2", {"loop": "creator_critic", "critic_model": "local/smollm2"}, runs)
    res = load(tmp_path)
    frames = probe_frames(res, budget=10)
    assert frames["skipped"].empty, frames["skipped"].to_dict("records")
    padded = frames["padding"]
    assert len(padded) >= 1 and padded[["plain", "padded"]].notna().all(axis=None)  # G-Eval scores, no gaps
    assert (frames["anchoring"]["anchored"].notna()).all()
    order = frames["order"]
    assert len(order) >= 2
    # every judgement is a verdict or a recorded error, never a silent gap
    assert (order["first_won"].notna() | order["error"].notna()).all()
    table = bias_table(frames)
    assert set(table["probe"]) >= {"padding", "anchoring", "order", "length", "inflation"}
    again = probe_frames(res, budget=10)  # the same re-asks again (from the cache): the same numbers
    assert again["padding"].equals(padded) and again["order"].equals(order)
