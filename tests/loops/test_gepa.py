"""The gepa loop: GEPA's own engine (the `gepa` library) on promptlab's grounded evaluation and call path.

On the wording task (tests/support/wording.py: the target's accuracy is a known function of the prompt's
keywords) a scripted reflection model that adds a missing keyword to the prompt GEPA shows it must be followed
by GEPA to the best wording; the record keeps GEPA's search (lineage, verdicts, minibatches); a replay makes no
call; no budget is ever passed; a Stop or a cancellation keeps what was decided."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from wording import KEYWORDS, START, TASK, accuracy, gepa_reflector, keywords_in, target_reply

import promptlab
from promptlab.errors import ConfigError
from promptlab.eval import read_tasks
from promptlab.eval.tasks import split_examples
from promptlab.events import Event
from promptlab.loops.gepa import REFLECTOR_PROMPT, GEPAConfig, metric_calls
from promptlab.loops.registry import arun_loop, get_loop, run_loop
from promptlab.loops.runtime.interrupt import stop_scope
from promptlab.record import Run

DEV, TEST = split_examples(TASK)
DEV_ITEMS = [int(TASK.examples[i].input.split()[1]) for i in DEV]  # type: ignore[union-attr]
TEST_ITEMS = [int(TASK.examples[i].input.split()[1]) for i in TEST]  # type: ignore[union-attr]


reflector = gepa_reflector
"""Adds the first keyword the prompt GEPA shows lacks (tests/support/wording.py)."""


def run_gepa(
    name: str, cache: Any = False, sample: int = 0, on_event: Any = None, **extra: Any
) -> tuple[Run, Any, Any]:
    writer = promptlab.scripted(f"{name}-reflector", respond=reflector)
    target = promptlab.scripted(f"{name}-target", respond=target_reply)
    cfg = {"model": writer.name, "target_model": target.name, "budget_calls": 200, **extra}
    return run_loop("gepa", TASK, cfg, cache=cache, sample=sample, on_event=on_event), writer, target


def test_gepa_accepts_the_better_prompts_its_reflection_proposes_and_returns_the_best() -> None:
    run, writer, _ = run_gepa("accept")
    assert keywords_in(run.final_output) == len(KEYWORDS), run.final_output
    its = {it.index: it for it in run.iterations}
    final = its[run.info["final_iteration"]]
    assert final.candidate == run.final_output and final.decision == "NEW_BEST"
    assert final.grounded.score == accuracy(final.candidate, DEV_ITEMS) == 1.0 > its[0].grounded.score
    assert its[0].candidate == START and its[0].decision == "START" and its[0].grounded.n == len(DEV)
    # GEPA's own choice: its best candidate index is the final iteration's, and the reflection saw GEPA's prompt
    assert run.info["gepa_best_candidate"] == final.metrics["gepa_candidate"]
    assert writer.prompts and all(p.startswith(REFLECTOR_PROMPT.split("```", 1)[0]) for p in writer.prompts)
    assert "Expected Output" in writer.prompts[0] and "Feedback" in writer.prompts[0]
    # lineage: each accepted candidate was made from the one before it, one keyword more, a higher dev score
    accepted = [it for it in run.iterations if it.decision == "NEW_BEST"]
    assert [keywords_in(it.candidate) for it in accepted] == [1, 2, 3]
    assert [it.parents for it in accepted] == [[0], [accepted[0].index], [accepted[1].index]]
    for it in accepted:
        assert it.grounded.score == accuracy(it.candidate, DEV_ITEMS) and it.grounded.n == len(DEV)
        assert it.metrics["minibatch_after"] > it.metrics["minibatch_before"]
        assert it.incumbent == it.index
    # measured on the held-out test split like every loop
    assert run.final_test.score == accuracy(run.final_output, TEST_ITEMS) == 1.0
    assert run.baseline_test.score == accuracy(START, TEST_ITEMS)
    assert all(its[i].test is not None for i in {it.incumbent for it in run.iterations})


def test_every_gepa_iteration_records_its_parent_minibatch_and_verdict() -> None:
    run, _, _ = run_gepa("verdicts", budget_calls=120, reflection_minibatch_size=2)
    decided = [it for it in run.iterations if it.index > 0]
    assert decided and {it.decision for it in decided} <= {"NEW_BEST", "ACCEPTED", "REJECTED", "NO_CANDIDATE"}
    for it in decided:
        minibatch = [int(i) for i in str(it.metrics["minibatch"]).split(",")]
        assert len(minibatch) == 2 and all(0 <= i < len(DEV) for i in minibatch)
        assert len(it.parents) == 1 and it.parents[0] < it.index
        if it.decision == "NO_CANDIDATE":  # GEPA skips a minibatch its parent already answers perfectly
            assert it.metrics["minibatch_before"] == 2 and it.candidate is None
    # the tidy frame carries the lineage
    from promptlab.results.frames import tidy

    traj, _ = tidy([run], {"loop": "gepa"}, "c1")
    rows = traj.drop_duplicates("iteration").set_index("iteration")
    assert rows.loc[0, "parents"] is pd_na() and rows.loc[decided[0].index, "parents"] == "0"


def pd_na() -> Any:
    import pandas as pd

    return pd.NA


def test_a_rejected_child_is_measured_on_its_minibatch_only() -> None:
    def worse(messages: list[dict[str, Any]]) -> str:
        return "```\nSay something.\n```"  # no keyword: never better than the start on any minibatch

    writer = promptlab.scripted("reject-reflector", respond=worse)
    target = promptlab.scripted("reject-target", respond=target_reply)
    run = run_loop("gepa", TASK, {"model": writer.name, "target_model": target.name, "budget_calls": 60}, cache=False)
    rejected = [it for it in run.iterations if it.decision == "REJECTED"]
    assert rejected and run.final_output == START and run.info["final_iteration"] == 0
    for it in rejected:
        assert it.candidate == "Say something." and it.grounded.n == 3 and it.decision_score is None
        assert it.incumbent == 0 and "not better" in (it.reason or "")


def test_a_replay_from_the_cache_makes_no_model_call(tmp_path: Path) -> None:
    first, writer, target = run_gepa("replay", cache=tmp_path, sample=1)
    assert writer.requests and target.requests
    again, writer2, target2 = run_gepa("replay", cache=tmp_path, sample=1)
    assert writer2.requests == [] and target2.requests == []
    assert again.comparable() == first.comparable() and again.spent == first.spent
    assert again.totals.cache_hits == again.totals.calls


def test_replicates_seed_gepa_with_their_sample() -> None:
    runs = [run_gepa(f"seed{s}", sample=s, budget_calls=80)[0] for s in (0, 1)]
    assert [r.info["seed"] for r in runs] == [0, 1]
    minibatches = [[it.metrics.get("minibatch") for it in r.iterations if it.index > 0] for r in runs]
    assert minibatches[0] != minibatches[1]
    assert run_gepa("seed-fixed", sample=1, budget_calls=40, seed=7)[0].info["seed"] == 7


@pytest.mark.parametrize("budget", [21, 30, 47, 64, 100, 157])
@pytest.mark.parametrize("merge", [False, True])
def test_a_gepa_run_never_passes_its_budget_of_calls(budget: int, merge: bool) -> None:
    run, _, _ = run_gepa(f"calls{budget}{merge}", budget_calls=budget, use_merge=merge, max_metric_calls=10_000)
    assert run.spent.calls <= budget and run.stop_reason == "budget"
    assert all(it.spent is None or it.spent.calls <= budget for it in run.iterations)
    assert budget - run.spent.calls < 2 * 3 + 1 + len(DEV)  # it stops only when the next piece does not fit


@pytest.mark.parametrize("budget", [2000, 3500, 6000])
def test_a_gepa_run_never_passes_its_budget_of_tokens(budget: int) -> None:
    run, _, _ = run_gepa(f"tokens{budget}", budget_calls=None, budget_tokens=budget)
    assert run.spent.tokens <= budget and run.stop_reason == "budget"
    assert run.info["max_metric_calls"] is None  # with tokens only, promptlab's budget ends GEPA


def test_gepas_metric_call_budget_is_derived_from_budget_calls() -> None:
    assert metric_calls(GEPAConfig(budget_calls=70)) == 70 * 6 // 7 == 60
    assert metric_calls(GEPAConfig(budget_calls=70), calls_per_example=2) == 70 * 6 // 13
    assert metric_calls(GEPAConfig(budget_calls=70, reflection_minibatch_size=5)) == 70 * 10 // 11
    assert metric_calls(GEPAConfig(budget_calls=70, max_metric_calls=9)) == 9
    assert metric_calls(GEPAConfig(budget_tokens=5000)) is None
    run, _, _ = run_gepa("derived", budget_calls=70)
    assert run.info["max_metric_calls"] == 60 and run.spent.calls <= 70


def test_a_stop_ends_the_run_as_interrupted_and_keeps_what_gepa_decided() -> None:
    flag = threading.Event()

    def stop_after_two(event: Event) -> None:
        if event.kind == "decision" and (event.iteration or 0) >= 2:
            flag.set()

    with stop_scope(flag):
        run, writer, target = run_gepa("stop", on_event=stop_after_two)
    assert run.stop_reason == "interrupted"
    decided = [it for it in run.iterations if it.decision is not None]
    assert [it.index for it in decided][:3] == [0, 1, 2] and run.iterations[-1].index <= 3
    assert run.final_output == run.iterations[run.info["final_iteration"]].candidate
    assert run.final_test is not None  # measured like every loop's returned prompt


def test_a_cancelled_run_ends_its_gepa_thread_and_makes_no_call_after() -> None:
    async def scenario() -> tuple[int, int]:
        writer = promptlab.scripted("cancel-reflector", respond=reflector)
        target = promptlab.scripted("cancel-target", respond=target_reply)
        decided = asyncio.Event()

        def on_event(event: Event) -> None:
            if event.kind == "decision" and (event.iteration or 0) >= 1:
                decided.set()

        cfg = {"model": writer.name, "target_model": target.name, "budget_calls": 400}
        task = asyncio.ensure_future(arun_loop("gepa", TASK, cfg, cache=False, on_event=on_event))
        await decided.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        calls = len(writer.requests) + len(target.requests)
        await asyncio.sleep(0.2)
        return calls, len(writer.requests) + len(target.requests)

    calls, later = asyncio.run(scenario())
    assert calls == later  # the optimizer's thread has ended: nothing calls a model after the cancellation


def test_a_reflector_prompt_without_gepas_placeholders_is_refused_before_any_call() -> None:
    writer = promptlab.scripted("badtemplate-reflector", respond=reflector)
    target = promptlab.scripted("badtemplate-target", respond=target_reply)
    cfg = {"model": writer.name, "target_model": target.name, "prompts": {"reflector": "Improve: <curr_param>"}}
    with pytest.raises(ConfigError, match="prompts.reflector: GEPA's reflection template needs <side_info>"):
        run_loop("gepa", TASK, cfg, cache=False)
    assert writer.requests == [] and target.requests == []


def test_gepa_is_registered_with_gepas_defaults() -> None:
    spec = get_loop("gepa")
    cfg = spec.config_cls()
    assert isinstance(cfg, GEPAConfig)
    assert (cfg.reflection_minibatch_size, cfg.candidate_selection_strategy, cfg.use_merge) == (3, "pareto", False)
    assert (cfg.max_merge_invocations, cfg.frontier_type, cfg.skip_perfect_score) == (5, "instance", True)
    with pytest.raises(ConfigError, match="task 'bare' has no examples: gepa scores every candidate"):
        run_loop("gepa", {"id": "bare", "prompt": "p"}, {"model": "fake/auto"})


@pytest.mark.slow
@pytest.mark.local_model
def test_gepa_runs_on_the_embedded_local_model_at_a_small_budget() -> None:
    task = read_tasks("data/grounded_tasks.jsonl")[0]
    cfg = {"model": "local/smollm2", "budget_tokens": 4000, "eval_max_tokens": 32, "max_tokens": 200}
    run = run_loop("gepa", task, cfg)
    assert run.stop_reason == "budget" and run.spent.tokens <= 4000 and run.errors == []
    assert run.iterations[0].grounded.n == 20 and len(run.iterations) >= 2
    assert any(st.phase == "reflect" for it in run.iterations for st in it.steps)
    assert run.final_test is not None and run.final_test.n > 0


def test_a_reply_without_a_score_is_missing_in_the_record_and_zero_for_gepa() -> None:
    failing = DEV_ITEMS[0]

    def target(messages: list[dict[str, Any]]) -> str:
        if messages[-1]["content"].endswith(f"item {failing}"):
            raise ValueError("the server failed")
        return target_reply(messages)

    writer = promptlab.scripted("missing-reflector", respond=reflector)
    promptlab.scripted("missing-target", respond=target)
    cfg = {"model": writer.name, "target_model": "fake/missing-target", "budget_calls": 60}
    run = run_loop("gepa", TASK, cfg, cache=False, settings=promptlab.Settings(retries=0))
    start = run.iterations[0]
    assert start.grounded.n == len(DEV) - 1 and start.grounded.scores[0] is None
    present = [s for s in start.grounded.scores if s is not None]
    assert start.grounded.score == pytest.approx(sum(present) / len(present))
    assert start.metrics["gepa_val_score"] == pytest.approx(sum(present) / len(DEV))  # GEPA counted it 0


def test_the_search_tree_joins_each_candidate_to_its_parent() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from promptlab.reports import plot_search_tree
    from promptlab.results.frames import tidy

    run, _, _ = run_gepa("tree", reflection_minibatch_size=2, budget_calls=150)
    traj, _ = tidy([run], {"loop": "gepa"}, "c1")
    ax = plot_search_tree(traj, budget="calls")
    measured = {it.index for it in run.iterations if it.grounded is not None}
    edges = [it for it in run.iterations if it.index in measured and set(it.parents) <= measured and it.parents]
    assert len(ax.lines) == len(edges) + 1  # an edge per measured child, and the incumbent's step line
    kept, rejected = ax.collections[0].get_offsets(), ax.collections[1].get_offsets()
    assert len(kept) == sum(it.decision in ("START", "NEW_BEST", "ACCEPTED") for it in run.iterations)
    assert len(rejected) == sum(it.decision == "REJECTED" for it in run.iterations) > 0
    bottom, top = plot_search_tree(traj.assign(grounded_score=0.0), budget="calls").get_ylim()
    assert (bottom, top) == (0.0, pytest.approx(0.1))  # every dev score 0: no negative accuracy on the axis
    with pytest.raises(ValueError, match="no run 'nope'"):
        plot_search_tree(traj, run_id="nope")


def test_more_concurrent_gepa_runs_than_the_default_executor_has_threads_all_finish(tmp_path: Path) -> None:
    """Each run's optimizer has a thread of its own: were they in the loop's default executor, runs enough to
    fill it would wait there for model calls whose cache writes need its threads (a sweep's cell, deadlocked)."""
    import os

    n = min(32, (os.cpu_count() or 1) + 4) + 2  # the default executor's threads, and more

    async def many() -> list[Run]:
        writer = promptlab.scripted("many-reflector", respond=reflector)
        target = promptlab.scripted("many-target", respond=target_reply)
        cfg = {"model": writer.name, "target_model": target.name, "budget_calls": 40}
        runs = (arun_loop("gepa", TASK, cfg, sample=s, cache=tmp_path) for s in range(n))
        return await asyncio.wait_for(asyncio.gather(*runs), timeout=300)

    runs = asyncio.run(many())
    assert len(runs) == n and all(r.stop_reason == "budget" and r.spent.calls <= 40 for r in runs)
