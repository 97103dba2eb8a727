"""The prompt-search baselines (opro, ape, protegi, resample) on scripted models: each finds the best wording of a
task whose accuracy is a known function of the wording, within its budget; each loop's own mechanism (OPRO's
meta-prompt, APE's demonstration sets and rounds, ProTeGi's errors, edits and bandits, resample's blindness);
candidate 0, the incumbent and its test scores; replays; refusals before any call; fake/auto dry runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import wording
from wording import BEST, KEYWORDS, START, TASK, accuracy, keywords_in

import promptlab
from promptlab.errors import ConfigError
from promptlab.eval.tasks import split_examples
from promptlab.loops.registry import get_loop, run_loop
from promptlab.record import Task

DEV, TEST = split_examples(TASK)
DEV_ITEMS = [int(TASK.examples[i].input.split()[1]) for i in DEV]  # type: ignore[union-attr]
TEST_ITEMS = [int(TASK.examples[i].input.split()[1]) for i in TEST]  # type: ignore[union-attr]
SEARCH = ("opro", "ape", "protegi", "resample")


def run_search(loop: str, name: str, budget: int = 400, cache: Any = False, **extra: Any) -> tuple[Any, Any, Any]:
    return wording.run_search(loop, name, cache=cache, budget_calls=budget, **extra)


@pytest.mark.parametrize("loop", SEARCH)
def test_each_optimizer_finds_the_best_wording_within_its_budget(loop: str) -> None:
    run, _, _ = run_search(loop, f"best-{loop}")
    assert keywords_in(run.final_output) == len(KEYWORDS), run.final_output
    best = run.iterations[run.info["final_iteration"]]
    assert best.candidate == run.final_output and best.grounded.score == accuracy(best.candidate, DEV_ITEMS) == 1.0
    assert run.final_test.score == 1.0 and run.baseline_test.score == accuracy(START, TEST_ITEMS)
    assert run.delta.value == pytest.approx(1.0 - run.baseline_test.score)
    assert run.spent.calls <= 400 and run.stop_reason == "max_iterations"
    # every candidate measured on dev has the dev score its wording implies (measured on dev, never on test)
    for it in run.iterations:
        if it.grounded is not None and it.grounded.n == len(DEV):
            assert it.grounded.score == accuracy(it.candidate, DEV_ITEMS)
            assert it.decision_score == pytest.approx(1 + 9 * it.grounded.score)
        assert not any(st.phase == "score_test" for st in it.steps)
    # candidate 0 is the start; the incumbent only ever moves to a better dev score; every incumbent has a test score
    assert run.iterations[0].index == 0 and run.iterations[0].candidate == START
    incumbents = [it.incumbent for it in run.iterations if it.decision is not None]
    by_index = {it.index: it for it in run.iterations}
    scores = [by_index[i].grounded.score for i in incumbents]
    assert scores == sorted(scores) and incumbents[-1] == run.info["final_iteration"]
    for i in set(incumbents):
        assert by_index[i].test is not None and by_index[i].test.score == accuracy(by_index[i].candidate, TEST_ITEMS)
    assert run.best_iteration == run.info["final_iteration"]


@pytest.mark.parametrize("loop", SEARCH)
def test_a_task_without_examples_is_refused_before_any_call(loop: str) -> None:
    model = promptlab.scripted(f"bare-{loop}", [])
    with pytest.raises(ConfigError, match=rf"task 'bare' has no examples: {loop} scores every candidate on the dev"):
        run_loop(loop, Task(id="bare", prompt="p", goal="g"), {"model": model.name})
    assert model.requests == []


@pytest.mark.parametrize("loop", SEARCH)
def test_a_replay_from_the_cache_is_the_same_run_without_a_call(loop: str, tmp_path: Path) -> None:
    first, w, target = run_search(loop, f"replay-{loop}", cache=tmp_path)
    assert w.requests and target.requests
    again, w2, target2 = run_search(loop, f"replay-{loop}", cache=tmp_path)  # the models registered afresh
    assert w2.requests == [] and target2.requests == []  # every call a cache hit
    assert again.comparable() == first.comparable() and again.run_id != first.run_id
    assert again.spent == first.spent and again.totals.cache_hits == again.totals.calls


@pytest.mark.parametrize("loop", SEARCH)
def test_fake_auto_dry_runs_give_schema_valid_replies(loop: str) -> None:
    run = run_loop(loop, TASK, {"model": "fake/auto", "budget_calls": 120, "max_iterations": 2})
    assert run.errors == [] and run.stop_reason in ("budget", "max_iterations")
    written = [it for it in run.iterations if it.index > 0]
    assert written and all(it.candidate for it in written)
    assert run.final_output is not None and run.final_test is not None


def meta_prompts(optimizer: Any) -> list[str]:
    return optimizer.prompts


def test_opro_shows_the_best_instructions_in_ascending_order_with_bucketed_scores_and_exemplars() -> None:
    run, w, _ = run_search("opro", "opro-meta", shown_instructions=2, exemplars=3, score_threshold=0.2)
    second = [p for p in w.prompts if p != w.prompts[0]][0]  # step 2's meta-prompt
    shown = re.findall(r"text:\n(.*?)\nscore:\n(\d+)", second, flags=re.DOTALL)
    scored = sorted({it.candidate: it.grounded.score for it in run.iterations[:3]}.items(), key=lambda kv: kv[1])
    want = [(text, str(round(100 * score))) for text, score in scored if score >= 0.2][-2:]
    assert shown == want  # the best 2 of those scored before step 2, at or above the threshold, the best last
    exemplars = re.findall(r"input:\n<INS>\n\n(item \d+)\noutput:\nyes", second)
    assert len(exemplars) == 3 and {int(x.split()[1]) for x in exemplars} <= set(DEV_ITEMS)  # dev only
    # the candidates of one step are draws of one request, each a fresh sample
    step1 = [r for r in w.requests if r["messages"][-1]["content"] == w.prompts[0]]
    assert [r["params"].get("temperature") for r in step1] == [1.0, 1.0]


def test_ape_takes_its_demonstration_sets_in_turn_from_dev_and_rounds_reword_the_best() -> None:
    run, w, _ = run_search("ape", "ape-sets")
    proposals = [it for it in run.iterations if "set" in it.metrics]
    assert [it.metrics["set"] for it in proposals] == [1, 2, 1, 2]
    demos = {p for p in w.prompts if '"instruction"' in p}
    assert len(demos) == 2  # one request per demonstration set
    for p in demos:
        shown = [int(x) for x in re.findall(r"Input: item (\d+)\nOutput: yes", p)]
        assert len(shown) == 5 and set(shown) <= set(DEV_ITEMS)
    rounds = [it for it in run.iterations if "round" in it.metrics]
    assert [it.metrics["round"] for it in rounds] == [1, 2] and run.info["rounds"] == 2
    for it in rounds:  # each rewords the best candidate before its round
        earlier = [i for i in run.iterations if i.index < it.index and i.grounded is not None]
        best = max(earlier, key=lambda i: (i.grounded.score, -i.index))
        assert it.metrics["parent"] == best.index


def test_ape_without_rounds_is_forward_generation_only() -> None:
    run, _, _ = run_search("ape", "ape-forward", max_iterations=0)
    assert run.info["rounds"] == 0 and all("round" not in it.metrics for it in run.iterations)
    assert keywords_in(run.final_output) == 1  # the proposals hold one keyword at most


def test_protegi_learns_from_the_wrong_dev_answers_of_its_beam() -> None:
    run, w, _ = run_search("protegi", "protegi-errors")
    gradients = [p for p in w.prompts if '"reasons"' in p]
    assert gradients
    for p in gradients:
        items = [int(x) for x in re.findall(r"Input: item (\d+)\nExpected output: yes\nThe model's answer: no", p)]
        prompt = wording.quoted(p, "The prompt:")
        # the errors shown are wrong answers of the beam prompt, on dev examples only
        assert items and set(items) <= set(DEV_ITEMS) and all(i % 4 > keywords_in(prompt) for i in items)
        assert len(items) <= 4
    edits = [p for p in w.prompts if '"prompts"' in p]
    assert all("A likely reason: it never says" in p for p in edits)
    assert run.info["beams"][0] == [0] and all(len(b) <= 2 for b in run.info["beams"])
    # the expansion's calls are steps of the parent's iteration; a successor's are its dev pulls
    parents = {it.metrics.get("parent") for it in run.iterations if it.index > 0}
    for it in run.iterations:
        phases = {st.phase for st in it.steps}
        assert phases <= ({"score_dev", "gradient", "edit", "paraphrase"} if it.index in parents else {"score_dev"})
    decided = {it.decision for it in run.iterations if it.index > 0}
    assert decided <= {"IN_BEAM", "OUT_OF_BEAM"}


@pytest.mark.parametrize("selection", ["ucb", "successive_rejects"])
def test_protegi_bandits_measure_arms_on_dev_examples_they_have_not_run(selection: str) -> None:
    run, _, target = run_search("protegi", f"protegi-{selection}", selection=selection, max_iterations=2)
    assert run.stop_reason == "max_iterations"
    for it in run.iterations:
        examples = [st.output["example"] for st in it.steps if st.phase == "score_dev"]
        assert len(examples) == len(set(examples)) and set(examples) <= set(range(len(DEV)))  # never twice
        if it.grounded is not None and it.grounded.n:
            ran = sorted(set(examples))
            assert it.grounded.n == len(ran)
            assert it.grounded.score == pytest.approx(accuracy(it.candidate, [DEV_ITEMS[i] for i in ran]))
    beam = run.info["beams"][-1]
    estimates = {it.index: it.grounded.score for it in run.iterations if it.grounded is not None}
    if selection == "ucb":  # the beam is the best estimates (ties to the earlier)
        ranked = sorted(estimates, key=lambda i: (-estimates[i], i))
        assert beam == ranked[: len(beam)]


def test_protegi_keeps_at_most_max_expansion_factor_successors_per_beam_prompt() -> None:
    run, _, _ = run_search("protegi", "protegi-cap", max_expansion_factor=1, mc_samples_per_step=2, max_iterations=1)
    kept = run.iterations[0].metrics
    assert kept["round_1_successors"] == 3 and kept["round_1_kept"] == 1  # an edit + 2 paraphrases, 1 kept
    assert sum(it.metrics.get("parent") == 0 for it in run.iterations) == 1


def test_resample_never_shows_a_score_to_its_paraphraser() -> None:
    run, w, _ = run_search("resample", "resample-blind")
    assert len(set(w.prompts)) == 1 and START in w.prompts[0]  # one request, drawn again and again
    samples = [r["params"].get("temperature") for r in w.requests]
    assert samples == [0.9] * len(w.requests)
    assert keywords_in(run.final_output) == 3 and run.info["final_iteration"] == 4


def test_a_duplicate_candidate_is_recorded_and_not_measured_again() -> None:
    w, target = wording.models("dup", wording.cycling("prompt", ["Be careful.", "Be careful."]))
    run = run_loop("resample", TASK, {"model": w.name, "target_model": target.name, "max_iterations": 2}, cache=False)
    first, second = run.iterations[1], run.iterations[2]
    assert second.decision == "DUPLICATE" and second.grounded == first.grounded
    assert [st.phase for st in second.steps] == ["paraphrase"]


def test_a_reply_without_prompt_text_is_an_error_and_no_candidate() -> None:
    w, target = wording.models("empty", wording.cycling("prompt", ["  ", BEST]))
    run = run_loop("resample", TASK, {"model": w.name, "target_model": target.name, "max_iterations": 2}, cache=False)
    assert run.iterations[1].decision == "NO_CANDIDATE" and run.iterations[1].candidate is None
    assert run.errors[0].message == "the reply holds no prompt text"
    assert run.final_output == BEST


def test_role_prompts_are_overridable_and_recorded_in_provenance() -> None:
    w, target = wording.models("override", wording.cycling("prompt", [BEST]))
    run = run_loop(
        "resample",
        TASK,
        {
            "model": w.name,
            "target_model": target.name,
            "max_iterations": 1,
            "prompts": {"paraphraser": "Say it again: {prompt}"},
        },
        cache=False,
    )
    assert w.prompts == [f"Say it again: {START}"]
    assert set(run.provenance["prompt_hashes"]) == {"paraphraser"}
    with pytest.raises(ValueError, match=r"unknown role\(s\) \['critic'\]; this loop's roles are \['optimizer'\]"):
        run_loop("opro", TASK, {"model": w.name, "prompts": {"critic": "x"}})


def test_the_four_loops_are_registered_with_paper_defaults() -> None:
    defaults = {name: get_loop(name).config_cls() for name in SEARCH}
    assert (
        defaults["opro"].max_iterations,
        defaults["opro"].candidates_per_step,
        defaults["opro"].shown_instructions,
        defaults["opro"].exemplars,
        defaults["opro"].temperature,
    ) == (200, 8, 20, 3, 1.0)
    assert (
        defaults["ape"].demo_sets,
        defaults["ape"].demos,
        defaults["ape"].proposals_per_set,
        defaults["ape"].max_iterations,
        defaults["ape"].temperature,
    ) == (5, 5, 50, 0, 0.9)
    p = defaults["protegi"]
    assert (
        p.max_iterations,
        p.beam_size,
        p.minibatch_size,
        p.n_gradients,
        p.errors_per_gradient,
        p.gradients_per_error,
        p.steps_per_gradient,
        p.mc_samples_per_step,
        p.max_expansion_factor,
        p.selection,
        p.eval_rounds,
        p.eval_prompts_per_round,
        p.samples_per_eval,
    ) == (6, 4, 64, 4, 4, 1, 1, 2, 8, "ucb", 8, 8, 32)
    assert all(d.test_incumbents for d in defaults.values())
    assert json.dumps(sorted(get_loop("resample").config_cls.ROLES)) == '["paraphraser"]'
