"""promptlab.analysis and promptlab.analysis.reliability on hand-made frames whose answers are known."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from factories import make_run
from statsmodels.stats.multitest import multipletests

from promptlab import analysis
from promptlab.analysis import consistency as reliability
from promptlab.record import Score


def traj(
    runs: dict[str, dict[str, list[Any]]],
    loop: str = "p3ro",
    critic: str = "fake/critic",
    criteria: tuple[str, ...] = ("clarity",),
) -> pd.DataFrame:
    """Trajectory rows: per run id {"decision": [...], "grounded": [...], "score": [...]?}; tokens 6+4, cost 0.01."""
    rows = []
    for run_id, r in runs.items():
        for i, (d, g) in enumerate(zip(r["decision"], r["grounded"], strict=True), start=1):
            for c in criteria:
                rows.append(
                    {
                        "cell_id": "c",
                        "run_id": run_id,
                        "loop": loop,
                        "task_id": r.get("task", "t"),
                        "sample": 0,
                        "iteration": i,
                        "criterion": c,
                        "judge": critic,
                        "score": r.get("score", r["decision"])[i - 1],
                        "average": d,
                        "decision_score": d,
                        "grounded_score": g,
                        "input_tokens": 6,
                        "output_tokens": 4,
                        "cost_usd": 0.01,
                        "critic_model": critic,
                    }
                )
    frame = pd.DataFrame(rows)
    return frame.astype(
        {"score": "Float64", "decision_score": "Float64", "grounded_score": "Float64", "cost_usd": "Float64"}
    )


LOGGED = {
    "A": {"decision": [5, 7, 6, 9], "grounded": [0.2, 0.5, 0.6, 0.8], "task": "t1"},
    "B": {"decision": [8, 4, 6], "grounded": [0.4, 0.1, 0.3], "task": "t2"},
}


def row(table: pd.DataFrame, t: float, cap: int) -> pd.Series:
    return table[(table["threshold"] == t) & (table["cap"] == cap)].iloc[0]


def test_counterfactual_table_matches_the_hand_computed_one() -> None:
    table = analysis.counterfactual_stopping(traj(LOGGED), thresholds=[7, 10], caps=[2, 4])
    assert len(table) == 4 and list(table["loop"].unique()) == ["p3ro"]
    # (threshold, cap): (grounded mean, tokens mean, cost mean, stopped early, n exact, iterations mean)
    expected = {
        (7, 2): (0.45, 15, 0.015, 0.5, 2, 1.5),
        (7, 4): (0.45, 15, 0.015, 1.0, 2, 1.5),
        (10, 2): (0.45, 20, 0.02, 0.0, 2, 2.0),
        (10, 4): (0.6, 35, 0.035, 0.0, 1, 3.5),
    }
    for (t, cap), (g, tok, cost, early, exact, its) in expected.items():
        r = row(table, t, cap)
        assert r["grounded_mean"] == pytest.approx(g) and r["grounded_n"] == 2 and r["n_runs"] == 2
        assert r["tokens_mean"] == pytest.approx(tok) and r["cost_usd_mean"] == pytest.approx(cost)
        assert r["stopped_early"] == pytest.approx(early) and r["n_exact"] == exact
        assert r["iterations_mean"] == pytest.approx(its)
        assert r["grounded_ci_low"] <= g <= r["grounded_ci_high"]
        assert r["tokens_ci_low"] <= tok <= r["tokens_ci_high"] and r["cost_usd_ci_low"] <= cost


def test_counterfactual_per_run_flags_and_the_last_rule() -> None:
    detail = analysis.counterfactual_stopping(traj(LOGGED), [10], [4], per_run=True).set_index("run_id")
    assert detail.loc["A", "exact"] and not detail.loc["B", "exact"]  # B would run past its 3 logged iterations
    assert detail.loc["A", "returned_iteration"] == 4 and detail.loc["B", "returned_iteration"] == 1
    runs = pd.DataFrame({"cell_id": ["c", "c"], "run_id": ["A", "B"], "final": ["best", "last"]})
    last = analysis.counterfactual_stopping(traj(LOGGED), [10], [2], runs=runs, per_run=True).set_index("run_id")
    assert last.loc["B", "grounded"] == pytest.approx(0.1) and last.loc["A", "grounded"] == pytest.approx(0.5)
    assert analysis.default_final("p3ro") == "best"
    pes = analysis.counterfactual_stopping(traj(LOGGED, loop="pes"), [7], [2], per_run=True)
    assert not pes["exact"].any()  # only loops whose prompts ignore threshold and cap are exact


def test_counterfactual_counts_each_task_and_sample_once() -> None:
    shorter = {"A2": {"decision": [5, 7], "grounded": [0.2, 0.5], "task": "t1"}}
    both = pd.concat([traj(LOGGED), traj(shorter)], ignore_index=True)
    table = analysis.counterfactual_stopping(both, [10], [4])
    assert table.iloc[0]["n_runs"] == 2 and table.iloc[0]["grounded_mean"] == pytest.approx(0.6)  # A kept, not A2
    assert analysis.counterfactual_stopping(both, [10], [4], dedupe=False).iloc[0]["n_runs"] == 3


def test_truncate_and_select_rules() -> None:
    assert analysis.truncate([5, 9, 9], 9, 3) == (2, True, True)
    assert analysis.truncate([5, 6], 9, 3) == (2, False, False)
    assert analysis.truncate([5, None, 6], 9, 2) == (2, False, True)
    assert analysis.truncate([9, 6, 9, 9, 5], 8, 5, patience=2) == (4, True, True)  # two in a row
    assert analysis.truncate([9, None, 9, 9], 8, 4, patience=3) == (4, False, True)  # a gap breaks the streak
    assert analysis.truncate([9, 9], 8, 5, patience=3) == (2, False, False)  # would run past the log
    assert analysis.select([7, 7, 3]) == 0 and analysis.select([None, 4, 5]) == 2
    assert analysis.select([7, 3], last=True) == 1 and analysis.select([]) is None


PATIENT = {"P": {"decision": [9, 6, 9, 9, 5], "grounded": [0.1, 0.2, 0.3, 0.4, 0.5]}}


def test_counterfactual_applies_creator_critics_patience() -> None:
    t = traj(PATIENT, loop="creator_critic")
    runs = pd.DataFrame({"cell_id": ["c"], "run_id": ["P"], "patience": [2]})
    by_column = analysis.counterfactual_stopping(t, [8, 10], [3, 5], runs=runs, per_run=True)
    by_config = analysis.counterfactual_stopping(
        t, [8, 10], [3, 5], configs={"P": {"patience": 2, "final": "last"}}, per_run=True
    )
    for detail in (by_column, by_config):
        r = detail.set_index(["threshold", "cap"])
        # patience 2: 9, 6 is no streak; 9, 9 at iterations 3-4 is; the last rule returns iteration 4
        assert (r.loc[(8, 5), "stop"], r.loc[(8, 5), "returned_iteration"]) == (4, 4)
        assert r.loc[(8, 5), "stopped_early"] and r.loc[(8, 5), "exact"]
        assert r.loc[(8, 5), "grounded"] == pytest.approx(0.4)
        assert r.loc[(8, 3), "stop"] == 3 and not r.loc[(8, 3), "stopped_early"] and r.loc[(8, 3), "exact"]
    best = analysis.counterfactual_stopping(
        t, [8], [5], configs={"P": {"patience": 2, "final": "best"}}, per_run=True
    ).iloc[0]
    assert best["returned_iteration"] == 1  # best of the four kept, ties to the earliest
    one = analysis.counterfactual_stopping(t, [8], [5], configs={"P": {"patience": 1}}, per_run=True).iloc[0]
    assert one["stop"] == 1 and one["exact"]
    # patience unknown (no column, no config): computed with 1, exact only where no patience changes the outcome
    unknown = analysis.counterfactual_stopping(t, [8, 10], [3, 5], per_run=True).set_index(["threshold", "cap"])
    assert unknown.loc[(8, 5), "stop"] == 1 and not unknown.loc[(8, 5), "exact"]
    assert unknown.loc[(10, 3), "stop"] == 3 and unknown.loc[(10, 3), "exact"]
    assert analysis.counterfactual_stopping(traj(PATIENT), [8], [5], per_run=True).iloc[0]["exact"]  # P3RO: 1


def test_counterfactual_reads_final_and_patience_from_the_logged_configs(tmp_path: Any) -> None:
    import promptlab
    from promptlab.loops.creator_critic.config import CreatorCriticConfig
    from promptlab.loops.creator_critic.loop import run_creator_critic
    from promptlab.record import Task
    from promptlab.results.store import load, write_cell

    queue = [json.dumps({"score": s, "strengths": [], "weaknesses": [], "suggestions": []}) for s in (9, 6, 9, 9)]
    creator = promptlab.scripted("cf-creator", respond=lambda messages: "A draft.")
    critic = promptlab.scripted("cf-critic", respond=lambda messages: queue.pop(0))
    cfg = CreatorCriticConfig(
        model=creator.name, critic_model=critic.name, max_iterations=4, finish_threshold=None, patience=2, final="best"
    )
    run = run_creator_critic(Task(id="t", prompt="p", goal="g"), cfg, cache=False)
    write_cell(tmp_path, "cell", {"loop": "creator_critic"}, [run])  # patience and final are not params
    detail = analysis.counterfactual_stopping(load(tmp_path), [8], [4], per_run=True).iloc[0]
    assert (detail["stop"], detail["returned_iteration"], detail["exact"]) == (4, 1, True)


def test_best_stopping_rule_picks_the_cheapest_rule_as_good_as_the_best() -> None:
    table = analysis.counterfactual_stopping(traj(LOGGED), thresholds=[7, 10], caps=[2, 4])
    best = analysis.best_stopping_rule(table)
    assert best is not None and best["cost"] == "cost_usd_mean"
    assert (best["best"]["threshold"], best["best"]["cap"]) == (7, 2)  # (10, 4) scores more but is not exact
    assert best["cheapest"]["cost_usd_mean"] == pytest.approx(0.015)


def test_calibration_perfect_and_anti_correlated() -> None:
    up = {"r": {"decision": [1, 2, 3, 4, 5, 6], "grounded": [0.1, 0.2, 0.25, 0.5, 0.7, 0.9]}}
    down = {"r": {"decision": [1, 2, 3, 4, 5, 6], "grounded": [0.9, 0.7, 0.5, 0.3, 0.2, 0.0]}}
    for data, sign in ((up, 1.0), (down, -1.0)):
        cal = analysis.calibration(traj(data, criteria=("clarity", "tone")))
        assert set(cal["criterion"]) == {"clarity", "tone", analysis.ALL}
        for r in cal.itertuples():
            assert r.n == 6 and r.spearman == pytest.approx(sign) and r.kendall == pytest.approx(sign)
            assert r.spearman_ci_low == pytest.approx(sign) and r.spearman_ci_high == pytest.approx(sign)


def test_calibration_per_critic_with_cis_and_no_grounded_data() -> None:
    rng = np.random.default_rng(1)
    g = rng.random(20)
    a = traj({"r": {"decision": list(g * 9 + 1), "grounded": list(g)}}, critic="crit-a")
    b = traj({"s": {"decision": list(rng.random(20) * 9 + 1), "grounded": list(g)}}, critic="crit-b")
    cal = analysis.calibration(pd.concat([a, b], ignore_index=True)).set_index(["critic_model", "criterion"])
    assert cal.loc[("crit-a", analysis.ALL), "spearman"] == pytest.approx(1.0)
    r_b = cal.loc[("crit-b", analysis.ALL)]
    assert abs(r_b["spearman"]) < 0.6 and r_b["spearman_ci_low"] < r_b["spearman"] < r_b["spearman_ci_high"]
    assert (analysis.ALL, analysis.ALL) not in cal.index  # two instruments are never pooled into one r
    assert analysis.calibration(a.drop(columns=["grounded_score"])).empty


def test_calibration_uses_the_critics_own_scores_never_the_decision_score() -> None:
    """Under score_source=grounded the decision score is 1 + 9 x the grounded score: correlating it with the
    grounded score measures the grounded score against itself. The critic here gave every candidate 1.0."""
    dev = [0.0, 0.1, 0.45, 0.2, 0.35, 0.3]
    frame = traj(
        {
            "r": {"decision": [1 + 9 * g for g in dev], "grounded": dev, "score": [1.0] * 6},
            "s": {"decision": [1 + 9 * g for g in dev], "grounded": dev, "score": [1.0] * 6},
        },
        critic="local/smollm2",
    )
    (row_,) = analysis.calibration(frame).itertuples()
    assert row_.criterion == analysis.ALL and row_.n == 12 and row_.critic_sd == 0
    assert pd.isna(row_.spearman) and pd.isna(row_.kendall) and pd.isna(row_.spearman_ci_low)
    assert row_.finding == (
        "the critic local/smollm2 gave every candidate 1 (n=12): it carries no information about accuracy"
    )


def test_calibration_says_why_there_is_no_r() -> None:
    flat = traj(
        {"r": {"decision": [5] * 5, "grounded": [0.1, 0.2, 0.3, 0.4, 0.5], "score": [1.0, 1.02, 1.0, 1.01, 1.0]}}
    )
    assert "barely vary (1 to 1.02" in analysis.calibration(flat)["finding"].iloc[0]
    same = traj({"r": {"decision": [5] * 4, "grounded": [0.35] * 4, "score": [2.0, 5.0, 7.0, 3.0]}})
    assert analysis.calibration(same)["finding"].iloc[0].startswith("every candidate had the same dev score (0.35")
    two = traj({"r": {"decision": [5, 6], "grounded": [0.1, 0.3], "score": [2.0, 5.0]}})
    assert analysis.calibration(two)["finding"].iloc[0].startswith("not enough candidates with both scores (n=2")
    one = traj(
        {"r": {"decision": [5], "grounded": [0.1], "score": [2.0]}}
    )  # one point: no verdict, not "no information"
    assert analysis.calibration(one)["finding"].iloc[0] == (
        "not enough candidates with both scores (n=1; a correlation needs at least 3)"
    )
    fine = analysis.calibration(
        traj({"r": {"decision": [5] * 4, "grounded": [0.1, 0.2, 0.4, 0.3], "score": [2.0, 5.0, 6.0, 7.0]}})
    )
    assert pd.isna(fine["finding"].iloc[0]) and fine["spearman"].iloc[0] == pytest.approx(0.8)


def test_vectorised_correlations_equal_scipys() -> None:
    from scipy.stats import kendalltau, spearmanr

    from promptlab.analysis.critic import kendall_along, spearman_along

    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, size=(5, 30)).astype(float)  # ties on both sides
    y = x + rng.integers(0, 3, size=(5, 30))
    for i in range(5):
        assert spearman_along(x, y)[i] == pytest.approx(spearmanr(x[i], y[i]).statistic)
        assert kendall_along(x, y)[i] == pytest.approx(kendalltau(x[i], y[i]).statistic)
    assert np.isnan(spearman_along(np.ones(5), np.arange(5.0)))


def paired_runs() -> pd.DataFrame:
    """Configurations base, better (+0.1 on every task) and same (zero-mean differences); one unpaired run."""
    rows = []
    base = [0.1, 0.2, 0.3, 0.0, 0.4, 0.2]
    noise = [0.05, -0.05, 0.1, -0.1, 0.02, -0.02]
    for i, b in enumerate(base):
        t = f"t{i}"
        rows += [
            {"loop": "p3ro", "variant": "base", "task_id": t, "sample": 0, "delta": b},
            {"loop": "p3ro", "variant": "better", "task_id": t, "sample": 0, "delta": b + 0.1},
            {"loop": "p3ro", "variant": "same", "task_id": t, "sample": 0, "delta": b + noise[i]},
        ]
    rows.append({"loop": "p3ro", "variant": "base", "task_id": "t9", "sample": 0, "delta": 0.9})
    return pd.DataFrame(rows)


def test_compare_on_a_designed_paired_set() -> None:
    out = analysis.compare(paired_runs(), by="variant", reference="variant=base").set_index("b")
    better, same = out.loc["variant=better"], out.loc["variant=same"]
    assert better["n"] == 6 and better["estimate"] == pytest.approx(0.1)
    assert better["ci_low"] == pytest.approx(0.1) and better["ci_high"] == pytest.approx(0.1)
    assert better["p_value"] == pytest.approx(2 / 64)  # exact sign-flip test: only all-+ and all-- are as extreme
    assert same["estimate"] == pytest.approx(0.0) and same["p_value"] > 0.5
    holm = multipletests([better["p_value"], same["p_value"]], method="holm")[1]
    assert [better["p_holm"], same["p_holm"]] == pytest.approx(list(holm))
    assert len(analysis.compare(paired_runs(), by="variant")) == 3  # every pair without a reference


def test_delta_table_per_configuration() -> None:
    table = analysis.delta_table(paired_runs(), by="variant").set_index("label")
    assert table.loc["variant=base", "n"] == 7
    assert table.loc["variant=better", "estimate"] == pytest.approx(np.mean([0.2, 0.3, 0.4, 0.1, 0.5, 0.3]))
    assert table.loc["variant=better", "p_value"] == pytest.approx(2 / 64)
    assert (table["ci_low"] <= table["estimate"]).all() and (table["estimate"] <= table["ci_high"]).all()
    assert analysis.delta_table(paired_runs().drop(columns=["delta"]), by="variant").empty


def test_a_configuration_with_one_run_gets_p_1_not_a_crash() -> None:
    """The demo's report crash: one run with a delta in a configuration (scipy refuses a 1-sample test)."""
    runs = paired_runs()
    one = runs[runs["variant"] == "better"].head(1)
    table = analysis.delta_table(one, by="variant")
    assert list(table["n"]) == [1] and list(table["p_value"]) == [1.0]
    assert analysis.sign_flip_p([0.3]) == 1.0 and analysis.sign_flip_p([]) is None


def test_provenance_warnings_name_what_is_mixed() -> None:
    runs = pd.DataFrame(
        {
            "cell_id": ["a", "b", "c"],
            "loop": ["p3ro", "p3ro", "pes"],
            "task_id": ["t1", "t1", "t2"],
            "prompts_hash": ["p1", "p2", "p9"],
            "task_hash": ["h1", "h1", "h7"],
            "experiment_hash": ["e1", "e1", "e1"],
        }
    )
    warnings = analysis.provenance_warnings(runs)
    assert len(warnings) == 1 and "role prompts for loop p3ro" in warnings[0] and "cells a, b" in warnings[0]
    runs.loc[1, "task_hash"] = "h2"
    runs.loc[2, "experiment_hash"] = "e2"
    assert len(analysis.provenance_warnings(runs)) == 3
    assert analysis.provenance_warnings(runs.drop(columns=["prompts_hash", "task_hash", "experiment_hash"])) == []


def test_a_run_that_used_fewer_roles_is_not_a_prompt_mix() -> None:
    """The demo's false warning: a P3RO run that stopped before the reflector has another combined hash, but
    every role both runs used has the same template."""
    full = json.dumps({"evaluator": "e1", "generator": "g1", "reflector": "r1"})
    short = json.dumps({"evaluator": "e1", "generator": "g1"})
    runs = pd.DataFrame(
        {
            "cell_id": ["a", "b"],
            "loop": ["p3ro", "p3ro"],
            "task_id": ["t1", "t2"],
            "prompts_hash": ["x1", "x2"],
            "prompt_hashes": [full, short],
        }
    )
    assert analysis.provenance_warnings(runs) == []
    runs.loc[1, "prompt_hashes"] = json.dumps({"evaluator": "e2", "generator": "g1"})
    [warning] = analysis.provenance_warnings(runs)
    assert "roles evaluator" in warning and "cells a, b" in warning


def scores_frame(matrix: list[list[float | None]], judge: str = "crit") -> pd.DataFrame:
    """Items x samples matrix -> the tidy score frame of `agreement`."""
    return pd.DataFrame(
        [
            {"run_id": "r", "iteration": i, "criterion": "c", "judge": judge, "sample": s, "score": v}
            for i, row in enumerate(matrix)
            for s, v in enumerate(row)
        ]
    ).astype({"score": "Float64"})


def interval_alpha(m: np.ndarray) -> float:
    """Krippendorff's interval alpha written out for a complete matrix: 1 - D_o / D_e."""
    values = m.ravel()
    n = values.size
    d_o = sum(((u[:, None] - u[None, :]) ** 2).sum() / (len(u) - 1) for u in m) / n
    d_e = ((values[:, None] - values[None, :]) ** 2).sum() / (n * (n - 1))
    return float(1 - d_o / d_e)


def test_agreement_on_designed_matrices() -> None:
    perfect = reliability.agreement(scores_frame([[3, 3, 3], [5, 5, 5], [8, 8, 8], [6, 6, 6]])).iloc[0]
    assert perfect["alpha"] == pytest.approx(1.0) and perfect["mean_abs_change"] == 0.0
    assert perfect["n_items"] == 4 and perfect["n_raters"] == 3 and perfect["mean_abs_change_n"] == 8
    m = [[5, 6], [6, 6], [7, 5], [2, 3], [9, 8]]
    noisy = reliability.agreement(scores_frame(m)).iloc[0]
    assert noisy["alpha"] == pytest.approx(interval_alpha(np.array(m, dtype=float)))
    assert noisy["mean_abs_change"] == pytest.approx(np.mean([1, 0, 2, 1, 1]))
    assert noisy["alpha_ci_low"] <= noisy["alpha"] <= noisy["alpha_ci_high"]
    anti = reliability.agreement(scores_frame([[1, 9], [9, 1], [2, 8], [8, 2]])).iloc[0]
    assert anti["alpha"] < 0
    constant = reliability.agreement(scores_frame([[5, 5], [5, 5]])).iloc[0]
    assert pd.isna(constant["alpha"])  # no variation: alpha is undefined, not 1


def test_inter_critic_agreement_with_two_critics() -> None:
    both = pd.concat([scores_frame([[4, 4], [6, 6], [8, 8]], "a"), scores_frame([[5, 5], [7, 7], [9, 9]], "b")])
    out = reliability.agreement(both).set_index("kind")
    inter = out.loc["inter-critic"]
    assert inter["n_raters"] == 2 and inter["mean_abs_change"] == pytest.approx(1.0)
    assert inter["alpha"] == pytest.approx(interval_alpha(np.array([[4, 5], [6, 7], [8, 9]], dtype=float)))
    assert list(out.loc["test-retest", "critic"]) == ["a", "b"]


def test_reliability_rescores_through_the_loop_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int, int]] = []

    class Spec:
        async def rescore(
            self, run: Any, iteration: int, *, sample: int, cache: Any = None, settings: Any = None
        ) -> list[Score]:
            calls.append((run.run_id, iteration, sample))
            logged = run.iterations[iteration - 1].scores
            return [Score(criterion=s.criterion, judge=s.judge, score=s.score + (sample % 2)) for s in logged]

    import promptlab.loops.registry

    monkeypatch.setattr(promptlab.loops.registry, "get_loop", lambda name: Spec())
    run = make_run([[4.0, 6.0], [7.0, 8.0]])
    out = reliability.reliability([run], k=2).iloc[0]
    assert sorted(calls) == [(run.run_id, i, s) for i in (1, 2) for s in (1, 2)]
    assert out["n_items"] == 4 and out["n_raters"] == 3
    assert out["mean_abs_change"] == pytest.approx(0.5)  # +1 at sample 1, +0 at sample 2

    monkeypatch.setattr(promptlab.loops.registry, "get_loop", lambda name: object())
    with pytest.raises(Exception, match="no rescore hook"):
        reliability.reliability([run], k=1)


def test_reliability_is_in_analysis_and_works_inside_a_running_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import promptlab.loops.registry
    from promptlab.analysis.consistency import reliability as from_analysis

    class Spec:
        async def rescore(
            self, run: Any, iteration: int, *, sample: int, cache: Any = None, settings: Any = None
        ) -> list[Score]:
            return [s.model_copy(update={"score": s.score + sample}) for s in run.iterations[iteration - 1].scores]

    monkeypatch.setattr(promptlab.loops.registry, "get_loop", lambda name: Spec())
    run = make_run([[4.0, 6.0], [7.0, 8.0]])

    async def in_a_kernel() -> pd.DataFrame:  # a Jupyter cell: sync code on the thread of a running loop
        asyncio.get_running_loop()
        return from_analysis([run], k=1)

    out = asyncio.run(in_a_kernel()).iloc[0]
    assert out["n_items"] == 4 and out["mean_abs_change"] == pytest.approx(1.0)


def test_reliability_rescores_are_new_draws_for_every_critic_and_replicate(tmp_path: Any) -> None:
    import promptlab
    from promptlab.loops.creator_critic.config import CreatorCriticConfig
    from promptlab.loops.creator_critic.loop import run_creator_critic
    from promptlab.record import Task

    answered: list[float] = []

    def critic_reply(messages: list[dict[str, Any]]) -> str:  # every call that reaches the model: a new score
        answered.append(1 + 0.5 * len(answered))
        return json.dumps({"score": answered[-1], "strengths": [], "weaknesses": [], "suggestions": []})

    drafts = ["Draft for sample 0.", "Draft for sample 1."]
    creator = promptlab.scripted("rel-draw-creator", respond=lambda messages: drafts.pop(0))
    critic = promptlab.scripted("rel-draw-critic", respond=critic_reply)
    cfg = CreatorCriticConfig(model=creator.name, critic_model=critic.name, n_critics=2, max_iterations=1)
    runs = [run_creator_critic(Task(id="t", prompt="p", goal="g"), cfg, sample=s, cache=tmp_path) for s in (0, 1)]
    assert len(critic.requests) == 4  # 2 runs x 2 critics, each a call of its own
    frame = promptlab.aio.run_sync(reliability.ascores(runs, k=2, cache=tmp_path))
    # k=2 new calls per critic per candidate: 2 runs x 1 candidate x 2 critics x 2, none a cache hit
    assert len(critic.requests) == 4 + 8 and len(answered) == 12
    assert len(frame) == 12 and frame["score"].is_unique  # no re-score repeats a logged or another draw
    assert set(frame["sample"]) == {0, 1, 2} and set(frame["judge"]) == {"critic[1]", "critic[2]"}
    promptlab.aio.run_sync(reliability.ascores(runs, k=2, cache=tmp_path))
    assert len(critic.requests) == 12  # a re-run replays the re-scores from the cache


@pytest.mark.slow
def test_default_final_registers_the_built_in_loops_in_a_fresh_interpreter() -> None:
    import subprocess
    import sys

    code = (
        "from promptlab.analysis import default_final; "
        "print(default_final('creator_critic'), default_final('p3ro'), default_final('no-such-loop'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["last", "best", "best"]


def test_reliability_end_to_end_through_creator_critic_rescore(tmp_path: Any) -> None:
    import json

    import promptlab
    from promptlab.loops.creator_critic.config import CreatorCriticConfig
    from promptlab.loops.creator_critic.loop import run_creator_critic
    from promptlab.record import Task

    def critique(score: float) -> str:
        return json.dumps({"score": score, "strengths": ["s"], "weaknesses": ["w"], "suggestions": ["t"]})

    # the loop's two critiques, then the re-scores in order: it1 at samples 1, 2; it2 at samples 1, 2
    queue = [critique(s) for s in (4, 6, 5, 4, 6, 7)]
    drafts = ["Draft one.", "Draft two."]
    creator = promptlab.scripted("rel-creator", respond=lambda messages: drafts.pop(0))
    critic = promptlab.scripted("rel-critic", respond=lambda messages: queue.pop(0))
    cfg = CreatorCriticConfig(model=creator.name, critic_model=critic.name, max_iterations=2, finish_threshold=10)
    run = run_creator_critic(Task(id="t", prompt="p", goal="g"), cfg, cache=tmp_path)
    assert [it.average for it in run.iterations] == [4.0, 6.0]
    out = reliability.reliability([run], k=2, cache=tmp_path)
    assert len(out) == 1 and out.iloc[0]["kind"] == "test-retest"  # one critic: no inter-critic row
    r = out.iloc[0]
    assert r["n_items"] == 2 and r["n_raters"] == 3 and queue == []
    assert r["mean_abs_change"] == pytest.approx(0.5)
    assert r["alpha"] == pytest.approx(interval_alpha(np.array([[4, 5, 4], [6, 6, 7]], dtype=float)))
    again = reliability.reliability([run], k=2, cache=tmp_path)  # cached: no new critic call (queue is empty)
    assert again.equals(out)


def test_truncate_with_candidate_0() -> None:
    """The starting prompt (candidate 0) is kept by every rule, ends the run at the threshold, counts in the
    patience streak, and is not counted by the cap (cap 0: the start alone)."""
    scores = [9.0, 4.0, 9.5]
    assert analysis.truncate(scores, 8.0, 2, start=True) == (1, True, True)  # the start reaches 8
    assert analysis.truncate(scores, 9.2, 0, start=True) == (1, False, True)  # cap 0: no rewrite
    assert analysis.truncate(scores, 9.2, 2, start=True) == (3, False, True)  # the second rewrite reaches 9.2
    assert analysis.truncate(scores, 9.8, 3, start=True) == (3, False, False)  # a third rewrite was never logged
    assert analysis.truncate([8.0, 9.0], 8.0, 2, 2, start=True) == (2, True, True)  # streak: start + rewrite 1
    assert analysis.select([9.0, 4.0, 9.5][:1]) == 0


def test_counterfactual_reads_candidate_0() -> None:
    frame = traj({"r": {"decision": [6.0, 4.0, 7.0], "grounded": [0.5, 0.2, 0.6]}})
    frame["iteration"] = frame["iteration"] - 1  # iterations 0, 1, 2: the first is the starting prompt
    detail = analysis.counterfactual_stopping(frame, [10.0], [0, 1, 2], per_run=True, configs={"r": {"final": "best"}})
    assert detail["returned_iteration"].tolist() == [0, 0, 2] and detail["grounded"].tolist() == [0.5, 0.5, 0.6]
    assert detail["stop"].tolist() == [0, 1, 2] and detail["exact"].tolist() == [True, True, True]
    assert detail["tokens"].tolist() == [10, 20, 30]  # candidate 0's calls are paid under every rule


def test_holm_equals_statsmodels() -> None:
    rng = np.random.default_rng(5)
    for m in (1, 2, 6, 15):
        ps = list(rng.uniform(0, 0.2, m)) + [0.03, 0.03][: m // 6]  # ties too
        assert analysis.holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))
