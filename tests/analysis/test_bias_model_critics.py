"""The critic-bias probes validated on scripted MODEL critics through the real call path (benchmarks/support/
model_critics.py, shared with the benchmark: Creator/Critic sweeps at one fixed sample, the loops' repeated candidates, a scripted critic that
reads its prompt and answers JSON, re-asked through the loop's rescore hook, then `probe_frames` and `bias_table`).

- An unbiased critic (one that reacts to particular padding sentences) is called "Biased" on some probe in at
  most 5% of replications, each probe in at most 1% (its share), and the Wilson upper bound of the family rate
  over REPLICATIONS is under 7% (slow; the benchmark's first scenario runs the same replications).
- Biases planted at sizes above the margins are covered by the 99% intervals at the stated rate (slow).
- A critic with about 60% of its scores at 10 never gets "No evidence of bias" for a planted size above the
  margin, and its rows name the saturation.
- A critic that reacts to particular padding sentences (no length preference) is not read as length-biased by
  the padding probe: each candidate's padding is its own draw (with the same five sentences on every candidate,
  as before issue #52, it was).
- Under history_chars=150, the length and padding probes read what the critic was shown and recover a planted
  0.6 (slow).

Seeds fix every draw (a replication's critic noise is a hash of its index, the sample and the text it is shown).
`benchmarks/bias_model_critics.py` runs the same scenarios at more replications for docs/analysis.md's tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from model_critics import Planted, Simulation
from scipy.stats import binomtest

REPLICATIONS = 400
"""Replications of the unbiased critic (at least 300; at 400 the Wilson bound is under 7% when at most 17 flag)."""
COVERAGE_REPLICATIONS = 100
"""Replications of a planted scenario: at 99% each probe's interval misses about 1 of them."""
PLANTED = Planted(per_100=0.6, anchor=0.4, first=0.3)
"""Length and padding 0.6 points per 100 characters shown, anchoring 0.4, order 0.3: each above its margin."""
TRUTH = {"length": 0.6, "padding": 0.6, "anchoring": 0.4, "order": 0.3, "inflation": 0.0}


def _coverage(sim: Simulation, reps: int, tmp_path: Path, probes: list[str]) -> dict[str, float]:
    covered = dict.fromkeys(probes, 0)
    for r in range(reps):
        table = sim.replicate(r, tmp_path / f"r{r}")[0].set_index("probe")
        for probe in probes:
            low, high = table.loc[probe, "ci_low"], table.loc[probe, "ci_high"]
            covered[probe] += bool(low <= TRUTH[probe] <= high)
    return {probe: k / reps for probe, k in covered.items()}


@pytest.mark.slow
def test_an_unbiased_model_critic_is_called_biased_at_most_5_percent_of_the_time(tmp_path: Path) -> None:
    # no bias, but each distinct padding sentence shifts its score by a fixed Normal(0, 0.2) draw (issue #52)
    sim = Simulation(Planted(sentence_sd=0.2))
    flagged, per_probe = 0, dict.fromkeys(TRUTH, 0)
    for r in range(REPLICATIONS):
        table = sim.replicate(r, tmp_path / f"r{r}")[0]
        assert len(table) == 5 and table["ci_low"].notna().all(), table
        biased = table["finding"].str.startswith("Biased")
        flagged += bool(biased.any())
        for probe in table.loc[biased, "probe"]:
            per_probe[str(probe)] += 1
    upper = binomtest(flagged, REPLICATIONS).proportion_ci(method="wilson").high
    assert flagged / REPLICATIONS <= 0.05 and upper < 0.07, f"{flagged} of {REPLICATIONS} called biased"
    # each probe at or under its share of the 5% (1%: 4 of 400)
    assert all(k <= REPLICATIONS // 100 for k in per_probe.values()), per_probe


@pytest.mark.slow
def test_planted_biases_are_covered_at_the_stated_rate(tmp_path: Path) -> None:
    coverage = _coverage(Simulation(PLANTED), COVERAGE_REPLICATIONS, tmp_path, list(TRUTH))
    # 99% intervals: at most 3 misses of 100 (a 95% interval would miss about 5)
    assert all(share >= 0.97 for share in coverage.values()), coverage


def test_a_saturated_critic_is_never_read_as_unbiased(tmp_path: Path) -> None:
    sim = Simulation(Planted(per_100=0.6, anchor=0.4, first=0.3, offset=6.0))
    for r in range(6):
        table, frames = sim.replicate(r, tmp_path / f"r{r}")
        top = float((frames["length"]["score"] >= 10).mean())
        assert 0.5 <= top <= 0.75, top  # about 60% of its scores at the top
        assert not table["finding"].str.startswith("No evidence of bias").any(), table["finding"].tolist()
        scored = table[table["probe"] != "order"]
        assert scored["finding"].str.contains("% at 10\\): the estimate likely understates", regex=True).all()
        assert not table["finding"].str.contains("lower bound").any()
        assert not table[table["finding"].str.startswith("Biased")]["finding"].str.contains("underpowered").any()
        assert (scored["at_top"].astype(float) > 0.3).all()


@pytest.mark.slow
def test_under_a_truncated_history_length_and_padding_read_what_the_critic_saw(tmp_path: Path) -> None:
    sim = Simulation(Planted(per_100=0.6), history_chars=150)
    coverage = _coverage(sim, COVERAGE_REPLICATIONS, tmp_path, ["length", "padding"])
    assert all(share >= 0.97 for share in coverage.values()), coverage


OLD_BANK = (
    "The task is described above.",
    "Please follow the instructions given above.",
    "The instructions above say what to do.",
    "Nothing else is required beyond the instructions above.",
    "This is the end of the instructions.",
)
"""The five sentences every candidate was padded with before issue #52."""


def test_a_critic_reacting_to_padding_sentences_is_not_read_as_length_biased(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from promptlab.analysis import bias_padding

    # each distinct padding sentence shifts the score by a fixed Normal(0, 1) draw; no length preference
    sim = Simulation(Planted(sentence_sd=1.0))
    reps = range(4)
    now = [sim.replicate(r, tmp_path / f"now{r}")[0].set_index("probe").loc["padding"] for r in reps]
    assert not any(row["finding"].startswith("Biased") for row in now), [row["finding"] for row in now]
    assert all(row["ci_low"] <= 0 <= row["ci_high"] for row in now)
    # the same critics with the same five sentences on every candidate: their reaction poses as length
    monkeypatch.setattr(bias_padding, "PAD_BANK", OLD_BANK)
    before = [sim.replicate(r, tmp_path / f"before{r}")[0].set_index("probe").loc["padding"] for r in reps]
    assert sum(row["finding"].startswith("Biased") for row in before) >= 3, [dict(row) for row in before]
