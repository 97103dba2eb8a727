"""The critic-bias probes (promptlab.analysis.bias) on small known data, and their data from a results
directory of real runs (promptlab.analysis.bias_asks): the planted sizes found, the budget kept, and a second
pass answered from the cache."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from biased import PLANTED, write_biased_sweep

from promptlab.analysis.bias import (
    PROBES,
    anchoring_bias,
    bias_table,
    bias_verdict,
    flip_rate,
    inflation,
    length_bias,
    order_bias,
    padding_bias,
    planted,
)
from promptlab.analysis.bias_asks import SIM_DRAWS, probe_frames
from promptlab.analysis.bias_intervals import Estimate
from promptlab.analysis.bias_padding import PAD_BANK, pad, pad_draw
from promptlab.results.store import load


def test_length_slope_is_read_at_equal_accuracy() -> None:
    # within each accuracy level, +100 characters adds 0.5 points; across levels accuracy moves the score a lot
    rows = [
        {"run_id": f"r{i % 4}", "iteration": i % 3, "accuracy": acc, "chars": c, "score": 2 + 8 * acc + 0.5 * c / 100}
        for i, (acc, c) in enumerate((a, c) for a in (0.1, 0.4, 0.8) for c in (100, 250, 400, 900))
    ]
    frame = pd.DataFrame(rows)
    frame["score"] += [0.01 * (-1) ** i for i in range(len(frame))]  # a little noise: a CI of some width
    est = length_bias(frame)
    assert est.n == 12 and est.value == pytest.approx(0.5, abs=0.01) and est.low < 0.5 < est.high
    assert bias_verdict("length", est).startswith("Biased: the CI excludes 0 (above)")


def test_inflation_is_the_intercept_of_score_change_on_accuracy_change() -> None:
    rows = []
    for r, accs in enumerate(([0.2, 0.3, 0.3, 0.25], [0.5, 0.4, 0.45, 0.6], [0.1, 0.1, 0.2, 0.15])):
        for t, a in enumerate(accs):
            rows.append(
                {"run_id": f"r{r}", "iteration": t, "accuracy": a, "score": 1 + 9 * a + 0.3 * t + 0.02 * (r - t)}
            )
    est = inflation(pd.DataFrame(rows))
    assert est.n == 9 and est.value == pytest.approx(0.3, abs=0.05)
    tracking = pd.DataFrame(rows).assign(score=lambda d: 1 + 9 * d["accuracy"])  # moves only with accuracy
    assert inflation(tracking).value == pytest.approx(0.0, abs=1e-9)


def test_padding_order_and_anchoring_estimates() -> None:
    padded = pd.DataFrame({"plain": [5.0, 6.0, 4.0], "padded": [6.5, 7.0, 5.5], "added_chars": [300, 200, 300]})
    assert padding_bias(padded).value == pytest.approx(0.5)
    # pair p0: first wins both orders (+1); p1: same candidate both times (0); p2: incomplete (left out)
    pairs = pd.DataFrame(
        {
            "pair": ["p0", "p0", "p1", "p1", "p2"],
            "swapped": [0, 1, 0, 1, 0],
            "first_won": [True, True, True, False, True],
        }
    )
    assert order_bias(pairs).value == pytest.approx(0.5) and order_bias(pairs).n == 2
    assert flip_rate(pairs) == (0.5, 2)
    plain = [5.0, 3.0, 7.0, 6.0, 4.0, 8.0]
    anchors = [9.0, 2.0, 5.0, 8.0, 3.0, 2.0]
    anchored = [0.7 * p + 0.3 * a + 0.01 * (-1) ** i for i, (p, a) in enumerate(zip(plain, anchors, strict=True))]
    est = anchoring_bias(pd.DataFrame({"plain": plain, "anchored": anchored, "anchor": anchors}))
    assert est.value == pytest.approx(0.3, abs=0.05)


def test_verdicts_need_the_ci_inside_the_margin_to_say_no_bias() -> None:
    assert bias_verdict("order", Estimate(0.01, 50, -0.05, 0.07)).startswith("No evidence of bias: the CI lies within")
    assert bias_verdict("order", Estimate(0.01, 50, -0.05, 0.15)).startswith("Inconclusive: the CI spans 0")
    assert bias_verdict("order", Estimate(-0.2, 50, -0.3, -0.1)) == "Biased: the CI excludes 0 (below)"
    assert bias_verdict(
        "length", length_bias(pd.DataFrame(columns=["run_id", "iteration", "score", "accuracy", "chars"]))
    ) == ("Not enough data: 0 distinct candidates, the probe needs at least 10")


def test_pad_adds_whole_neutral_sentences_drawn_for_each_candidate() -> None:
    text = pad("Answer yes or no.", key="k1")
    added = text.removeprefix("Answer yes or no. ")
    assert text.startswith("Answer yes or no. " + pad_draw("k1")[0]) and len(text) - len("Answer yes or no.") >= 300
    assert all(s.endswith(".") and s in PAD_BANK for s in added.replace(". ", ".\n").splitlines())
    assert pad("Answer yes or no.", key="k1") == text  # the same candidate: the same padding (a cache hit)
    # another candidate gets other sentences: a bank of 1,152, about 5 drawn each
    assert len(PAD_BANK) == len(set(PAD_BANK)) == 1152
    others = {pad("Answer yes or no.", key=f"k{i}") for i in range(40)}
    assert len(others) == 40
    sentences = [s for t in others for s in t.removeprefix("Answer yes or no. ").replace(". ", ".\n").splitlines()]
    assert len(set(sentences)) > 0.9 * len(sentences)  # few sentences shared between candidates


@pytest.fixture
def swept(tmp_path: Path):  # type: ignore[no-untyped-def]
    return write_biased_sweep(tmp_path / "results")


def test_probes_find_planted_biases_and_none_in_the_oracle(swept) -> None:  # type: ignore[no-untyped-def]
    results_dir, _ = swept
    table = bias_table(probe_frames(load(results_dir), budget=20))
    oracle = table[table["critic_model"] == "sim/oracle"].set_index("probe")
    assert set(oracle.index) == {"length", "inflation", "padding", "order", "anchoring"}
    assert (oracle["estimate"].abs() < 1e-9).all()
    # a critic without noise: every difference exactly 0, an interval of width zero, so no verdict
    assert oracle["finding"].str.startswith("Not enough data: the ").all(), oracle["finding"].tolist()
    assert (
        oracle["finding"].str.contains("(an interval of width zero); a verdict needs data that vary", regex=False).all()
    )
    assert oracle["ci_low"].isna().all()
    planted = table[table["critic_model"] == PLANTED].set_index("probe")
    sizes = {"padding": 0.3, "anchoring": 0.5, "order": 0.6, "inflation": 0.3}
    for probe, size in sizes.items():
        row = planted.loc[probe]
        assert row["ci_low"] <= size <= row["ci_high"], (probe, row.to_dict())
        # inflation over 26 steps of 9 runs: its 99.4% interval just reaches 0 (read below as inconclusive)
        assert row["finding"].startswith("Biased" if probe != "inflation" else "Inconclusive"), (probe, row["finding"])
    # the table carries the size each simulated critic was built with; a model critic's is unknown
    assert planted.loc[list(sizes), "planted"].astype(float).tolist() == list(sizes.values())
    assert (oracle["planted"] == 0).all()
    assert table[table["critic_model"] == "fake/bias-critic"]["planted"].isna().all()
    # five probes per critic: each interval at 1 - 0.05 / 5, and wider than the probe's own 95% interval
    assert table["ci_level"].astype(float).tolist() == pytest.approx([0.994] * len(table))
    alone = PROBES["order"](probe_frames(load(results_dir), budget=20)["order"].query("critic_model == @PLANTED"), 0.95)
    assert alone.low is not None and alone.high is not None
    assert planted.loc["order", "ci_high"] - planted.loc["order", "ci_low"] > alone.high - alone.low


def test_planted_sizes_of_each_kind_of_simulated_critic() -> None:
    zero = dict.fromkeys(PROBES, 0.0)
    assert planted("sim/oracle") == zero and planted("sim/noisy?sd=2&seed=0") == zero
    assert planted("sim/length?per_100=0.7") == {**zero, "length": 0.7, "padding": 0.7}
    assert planted("sim/biased?per_100=0.3&inflation=0.2&first=0.6&anchor=0.5") == {
        "length": 0.3,
        "padding": 0.3,
        "inflation": 0.2,
        "order": 0.6,
        "anchoring": 0.5,
    }
    assert planted("local/smollm2") is None and planted("fake/auto") is None


def test_pairs_judged_several_times_are_averaged_per_order() -> None:
    # p0: draw 0 first wins both orders, draw 1 the same candidate both times: per order 1.0 and 0.5 -> +0.5;
    # p1: the same candidate in both orders and draws -> 0
    pairs = pd.DataFrame(
        {
            "pair": ["p0"] * 4 + ["p1"] * 4,
            "draw": [0, 0, 1, 1] * 2,
            "swapped": [0, 1] * 4,
            "first_won": [True, True, True, False, True, False, True, False],
        }
    )
    assert order_bias(pairs).value == pytest.approx(0.25) and order_bias(pairs).n == 2
    assert flip_rate(pairs) == (0.25, 2)  # one of four judgements in both orders changed candidate


def test_a_simulated_critic_is_asked_several_draws_a_model_critic_once(swept, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import promptlab.analysis.bias_asks as asks

    results_dir, _ = swept
    frames = probe_frames(load(results_dir), budget=14)
    draws = frames["order"].groupby("critic_model")["draw"].nunique().to_dict()
    assert draws == {"fake/bias-critic": 1, "sim/oracle": SIM_DRAWS, PLANTED: SIM_DRAWS}

    def spread(f: pd.DataFrame) -> float:  # sd over candidates of the padding effect: noise, averaged over draws
        d = f.query("critic_model == @PLANTED")
        return float(((d["padded"] - d["plain"]) / (d["added_chars"] / 100)).std())

    monkeypatch.setattr(asks, "SIM_DRAWS", 1)
    single = probe_frames(load(results_dir), budget=14)
    assert single["order"].groupby("critic_model")["draw"].nunique().max() == 1
    # the planted critic's noise (sd 0.3) averaged over 5 draws: about 1/sqrt(5) = 0.45 of one draw's spread
    assert spread(frames["padding"]) < 0.7 * spread(single["padding"])


def test_reasks_keep_the_budget_and_a_second_pass_costs_nothing(swept) -> None:  # type: ignore[no-untyped-def]
    results_dir, model_critic = swept
    res = load(results_dir)
    logged = len(model_critic.requests)
    frames = probe_frames(res, budget=14)
    first = len(model_critic.requests) - logged
    mine = {k: f[f["critic_model"] == "fake/bias-critic"] for k, f in frames.items() if k != "skipped"}
    # 14 calls: 2 candidates x 3 re-scores and 4 pairs x 2 orders
    assert first == 14 and len(mine["padding"]) == 2 and len(mine["order"]) == 8
    assert mine["order"]["first_won"].all()  # the scripted judge always says A
    again = probe_frames(res, budget=14)
    assert len(model_critic.requests) - logged == first  # every re-ask was a cache hit
    pd.testing.assert_frame_equal(again["padding"], frames["padding"])


def test_a_critic_whose_reasks_fail_is_reported_not_measured(swept, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from promptlab.errors import ConfigError
    from promptlab.loops.creator_critic import loop

    results_dir, _ = swept

    async def broken(*_a, **_k):  # type: ignore[no-untyped-def]
        raise ConfigError("critic_model: no longer configured")

    monkeypatch.setattr(loop, "critique_all", broken)
    table = bias_table(probe_frames(load(results_dir), budget=6))
    row = table[(table["critic_model"] == "fake/bias-critic") & (table["probe"] == "padding")].iloc[0]
    assert row["finding"] == "Not measured: the re-asks failed: ConfigError: critic_model: no longer configured"
    logged = table[(table["critic_model"] == "fake/bias-critic") & (table["probe"] == "length")].iloc[0]
    assert not logged["finding"].startswith("Not measured")  # the logs still answer


def test_padding_counts_only_the_characters_the_critic_is_shown(swept) -> None:  # type: ignore[no-untyped-def]
    from promptlab.results.store import read_runs, write_cell

    results_dir, _ = swept
    for cell, critic in (("model", "fake/bias-critic"), ("oracle", "sim/oracle")):
        runs = read_runs(results_dir, cell)
        for run in runs:
            run.config["history_chars"] = 60  # a model critic sees at most 60 characters of a candidate
        write_cell(results_dir, cell, {"loop": "creator_critic", "critic_model": critic}, runs)
    padded = probe_frames(load(results_dir), budget=6)["padding"].set_index("critic_model")["added_chars"]
    assert (padded.loc[["fake/bias-critic"]] < 60).all()  # the candidates are 60+ characters: little pad shown
    assert (padded.loc[["sim/oracle"]] >= 300).all()  # a simulated critic scores the whole text


def test_runs_of_an_unknown_loop_are_read_from_the_logs_only(swept) -> None:  # type: ignore[no-untyped-def]
    from promptlab.results.store import read_runs, write_cell

    results_dir, _ = swept
    runs = read_runs(results_dir, "oracle")
    for run in runs:
        run.loop = "retired_loop"  # made by a loop this installation no longer has
    write_cell(results_dir, "oracle", {"loop": "retired_loop", "critic_model": "sim/oracle"}, runs)
    table = bias_table(probe_frames(load(results_dir), budget=0))
    oracle = table[table["critic_model"] == "sim/oracle"]
    assert set(oracle["probe"]) == {"length", "inflation"}  # no re-ask, no error


def test_reasks_need_only_the_critic_model_not_the_generator(swept) -> None:  # type: ignore[no-untyped-def]
    from promptlab.results.store import read_runs, write_cell

    results_dir, model_critic = swept
    runs = read_runs(results_dir, "model")
    for run in runs:  # made by a generator this process never registered: a re-ask never calls it
        run.config["model"] = "fake/bias-generator-not-registered"
    write_cell(results_dir, "model", {"loop": "creator_critic", "critic_model": model_critic.name}, runs)
    frames = probe_frames(load(results_dir), budget=6)
    assert frames["skipped"].empty, frames["skipped"].to_dict("records")
    assert (frames["padding"]["critic_model"] == model_critic.name).sum() == 1  # budget 6: 1 candidate, 1 pair


def test_bias_table_and_probe_frames_are_exported_where_the_docs_name_them() -> None:
    import promptlab
    from promptlab import analysis

    assert promptlab.bias_table is analysis.bias_table is bias_table
    assert promptlab.probe_frames is analysis.probe_frames is probe_frames
    assert {"bias_table", "probe_frames"} <= set(promptlab.__all__) & set(analysis.__all__)


def test_the_oracle_flips_no_pair_on_a_tie() -> None:
    """A perfect critic (sim/oracle) judging candidates of equal dev accuracy sees a tie, in both orders: no
    position preference, no flip (a coin on ties read as 'x% of pairs flip')."""
    import asyncio

    import pandas as pd

    from promptlab.analysis.bias import flip_rate, order_bias
    from promptlab.eval.pairwise import ajudge_pair

    rows = []
    for i, (acc_a, acc_b) in enumerate([(0.5, 0.5), (0.2, 0.2), (0.3, 0.7), (0.0, 0.0), (0.9, 0.1)]):
        shown = [((acc_a, f"a{i}"), (acc_b, f"b{i}")), ((acc_b, f"b{i}"), (acc_a, f"a{i}"))]
        for swapped, (x, y) in enumerate(shown):
            got = asyncio.run(ajudge_pair("sim/oracle", "goal", x[1], y[1], accuracies=(x[0], y[0]), sample=0))
            first_won = None if got.preferred is None else got.preferred == 0
            rows.append({"pair": i, "swapped": swapped, "first_won": first_won, "tie": got.tie})
    frame = pd.DataFrame(rows)
    assert frame["tie"].tolist() == [True, True, True, True, False, False, True, True, False, False]
    assert flip_rate(frame) == (0.0, 5)  # 0% of 5 pairs: the three ties are consistent verdicts
    assert order_bias(frame).value == 0.0  # no first-position preference from the ties
    # a tie in one order and a winner in the other is a flip
    frame.loc[0, ["first_won", "tie"]] = [True, False]
    assert flip_rate(frame) == (0.2, 5)


def test_a_text_logged_again_at_the_same_sample_is_one_observation() -> None:
    from promptlab.analysis.bias import distinct_asks

    rows = [
        {"run_id": f"r{r}", "iteration": t, "accuracy": a, "chars": c, "score": s, "key": k}
        for r in range(4)
        for t, (a, c, s, k) in enumerate(
            [(0.2, 100, 3.0, "start"), (0.4, 150 + 40 * r, 4.0 + 0.3 * r + 0.05 * (-1) ** r, f"r{r}-1")]
            + [(0.4, 300 - 30 * r, 5.0 - 0.2 * r, f"r{r}-2"), (0.6, 120 + 20 * r, 6.0 + 0.1 * r, f"r{r}-3")]
        )
    ]
    frame = pd.DataFrame(rows)
    one = distinct_asks(frame)
    assert len(one) == 13 and (one["key"] == "start").sum() == 1  # the starting prompt, in all 4 runs: once
    assert one.set_index("key").loc["start", "run_id"] == "r0"  # clustered with the run that logged it first
    assert length_bias(frame).n == 13 and length_bias(frame.drop(columns="key")).n == 16
    # a step between the same two asks in two runs counts once
    steps = frame.assign(key=frame["key"].where(frame["iteration"] > 0, "start"))
    twice = pd.concat([steps, steps.assign(run_id=steps["run_id"] + "-again")])
    assert inflation(twice).n == inflation(steps).n == 12


def test_padding_goes_where_the_critic_sees_it() -> None:
    from promptlab.analysis.bias_padding import pad_within
    from promptlab.loops.runtime.toolkit import cut

    def view(text: str) -> str:
        return cut(text, 150)

    short = "Answer yes or no."
    padded = pad_within(short, view)
    assert padded is not None and padded.startswith(short) and view(padded) == padded  # all of it in view
    # a sentence that would be cut is passed over for a shorter one that fits: no room left for the shortest
    assert 150 - min(map(len, PAD_BANK)) - 2 < len(padded) <= 150
    assert pad_within("x" * 140, view) is None  # no whole sentence fits in the window: not padded
    assert pad_within(short, str.strip) == pad(short)  # no cut: the full padding


def test_a_saturated_or_underpowered_probe_says_so() -> None:
    from promptlab.analysis.bias_limits import detectable, end_shares, limited_verdict

    scores = pd.DataFrame({"score": [10.0] * 6 + [7.0, 8.0, 9.0, 1.0]})
    assert end_shares("length", scores) == (0.1, 0.6) and end_shares("order", scores) == (None, None)
    fine = "No evidence of bias: the CI lies within +/-0.2"
    said = limited_verdict(fine, 0.2, (0.1, 0.6), 0.1, (30, "candidates"))
    assert said.startswith("Inconclusive")
    assert "saturated (10% at 1 and 60% at 10): the estimate likely understates the bias's size" in said
    assert "lower bound" not in said
    assert limited_verdict(fine, 0.2, (0.0, 0.05), 0.1, (30, "candidates")) == fine  # 5% at the ends: as it is
    # (z_0.995 + z_0.8) x SE, the SE from the 99% interval's half-width
    assert detectable(-0.258, 0.258, 0.99) == pytest.approx(0.1 * (2.5758 + 0.8416), abs=1e-3)
    unsure = "Inconclusive: the CI spans 0 but reaches beyond +/-0.2"
    assert limited_verdict(unsure, 0.2, (0.0, 0.0), 0.342, (30, "candidates")) == (
        f"{unsure}; underpowered: it detects 0.35 or more with 80% power, above the margin 0.2 "
        "(about 88 candidates would reach it)"
    )


def test_power_qualifies_only_an_inconclusive_row_and_never_rounds_to_the_margin() -> None:
    from promptlab.analysis.bias_limits import limited_verdict

    biased = "Biased: the CI excludes 0 (above)"
    assert limited_verdict(biased, 0.2, (0.0, 0.0), 0.9, (30, "candidates")) == biased  # a finding, not a caveat
    fine = "No evidence of bias: the CI lies within +/-0.2"
    assert limited_verdict(fine, 0.2, (0.0, 0.0), 0.24, (30, "candidates")) == fine
    unsure = "Inconclusive: the CI spans 0 but reaches beyond +/-0.2"
    said = limited_verdict(unsure, 0.2, (0.0, 0.0), 0.2004, (30, "candidates"))
    assert "it detects 0.21 or more with 80% power, above the margin 0.2" in said  # rounded up, never "0.2"
    assert limited_verdict(unsure, 0.2, (0.0, 0.0), 0.19, (30, "candidates")) == unsure
    saturated = limited_verdict(biased, 0.2, (0.0, 0.6), 0.9, (30, "candidates"))
    assert saturated == f"{biased}; saturated (60% at 10): the estimate likely understates the bias's size"


def test_two_pairs_and_three_candidates_are_not_enough_data() -> None:
    """Data that do not vary give an interval of width zero (the t interval of the past read [0, 0] as "No
    evidence of bias"); and fewer observations than a probe's minimum give no verdict either."""
    from promptlab.analysis.bias import MIN_N

    pairs = pd.DataFrame({"pair": [0, 0, 1, 1], "swapped": [0, 1, 0, 1], "first_won": [True, False, False, True]})
    padded = pd.DataFrame({"plain": [5.0, 6.0, 4.0], "padded": [5.0, 6.0, 4.0], "added_chars": [300, 310, 290]})
    frames = {"order": pairs.assign(critic_model="m"), "padding": padded.assign(critic_model="m")}
    table = bias_table(frames).set_index("probe")
    assert table.loc["order", "finding"] == (
        "Not enough data: 2 pairs judged in both orders, the probe needs at least 10; 0% of 2 pairs flip under swap"
    )
    assert table.loc["padding", "finding"] == "Not enough data: 3 padded candidates, the probe needs at least 10"
    assert not table["finding"].str.contains("No evidence").any()
    # at the minimum, data that do not vary still give no verdict
    flat = pd.DataFrame({"plain": [5.0] * 12, "padded": [5.0] * 12, "added_chars": [300] * 12})
    est = padding_bias(flat)
    assert est.n == 12 >= MIN_N["padding"] and est.low is None and "interval of width zero" in str(est.why)
    assert bias_verdict("padding", est).startswith("Not enough data: the 12 candidates with a plain and a padded")
    # twelve pairs that each split one-one do vary as the score interval reads them: a verdict
    twelve = pd.concat([pairs.assign(pair=pairs["pair"] + 2 * k) for k in range(6)])
    assert order_bias(twelve, 0.994).low is not None and order_bias(twelve).n == 12


def test_under_a_window_the_candidates_that_can_be_padded_are_asked_first(swept) -> None:  # type: ignore[no-untyped-def]
    from promptlab.results.store import read_runs, write_cell

    results_dir, model_critic = swept
    runs = read_runs(results_dir, "model")
    for run in runs:
        run.config["history_chars"] = 60  # only the 9-character starting prompts leave room for a sentence
    write_cell(results_dir, "model", {"loop": "creator_critic", "critic_model": model_critic.name}, runs)
    padding = probe_frames(load(results_dir), budget=10)["padding"].query("critic_model == @model_critic.name")
    # budget 10: 2 candidates re-asked, and both are ones the window leaves room to pad (drawn at random, the
    # first two were not: 21-28 of 30 re-asked candidates went unpadded under history_chars=150, issue #52)
    assert len(padding) == 2 and padding["why_not"].isna().all() and (padding["added_chars"] > 0).all()
