"""Grounded loops on the scripted model: each score_source, the 1-10 mapping, dev-only scoring inside the
loop, baseline/final test and delta, provenance, replay equality, and config errors before any call."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

import promptlab
from promptlab.errors import ConfigError
from promptlab.eval.tasks import split_examples
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.loops.p3ro.config import P3ROConfig
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.loops.registry import get_loop
from promptlab.loops.runtime.grounding import grounded_decision_score
from promptlab.record import Example, Split, Task
from promptlab.reports.recorded_errors import errors_markdown
from promptlab.results import load
from promptlab.results.frames import tidy
from promptlab.results.store import write_cell

EXAMPLES = [Example(input=f"item {i}", target="yes") for i in range(10)]
TASK = Task(
    id="g",
    prompt="BAD prompt",
    goal="answer yes",
    examples=EXAMPLES,
    scorer={"kind": "exact"},
    split=Split(seed=0, dev=4),
)
DEV, TEST = split_examples(TASK)


def target_reply(messages: list[dict[str, Any]]) -> str:
    """'yes' for a GOOD prompt; for a HALF prompt only on even items; else 'no'."""
    text = messages[-1]["content"]
    item = int(text.rsplit("item ", 1)[1])
    if text.startswith("GOOD"):
        return "yes"
    if text.startswith("HALF"):
        return "yes" if item % 2 == 0 else "no"
    return "no"


def expected_dev(prompt: str) -> float:
    return sum(target_reply([{"content": f"{prompt}\n\nitem {i}"}]) == "yes" for i in DEV) / len(DEV)


def critique(score: float) -> str:
    return json.dumps({"score": score, "strengths": ["s"], "weaknesses": ["w"], "suggestions": ["t"]})


def cc_models(name: str, creator: list[str], critic: list[str]) -> tuple[Any, Any, Any]:
    def repeat(queue: list[str]) -> Any:
        return lambda messages: queue.pop(0) if len(queue) > 1 else queue[0]

    return (
        promptlab.scripted(f"{name}-creator", respond=repeat(list(creator))),
        promptlab.scripted(f"{name}-critic", respond=repeat(list(critic))),
        promptlab.scripted(f"{name}-target", respond=target_reply),
    )


def cc_run(name: str, source: str, **kw: Any) -> tuple[Any, Any]:
    """Creator/Critic on TASK: HALF v1, GOOD v2, GOOD v3, every critique 3; only rewrites are candidates
    unless `include_start` is given (the design document's behaviour, which these tests pin down)."""
    creator, critic, target = cc_models(name, ["HALF v1", "GOOD v2", "GOOD v3"], [critique(3)])
    kw.setdefault("include_start", False)
    cfg = CreatorCriticConfig(
        model=creator.name,
        critic_model=critic.name,
        target_model=target.name,
        score_source=source,
        finish_threshold=8.5,
        max_iterations=3,
        **kw,
    )
    return run_creator_critic(TASK, cfg, cache=kw.pop("cache", False)), target


def test_mapping_onto_the_critic_scale() -> None:
    assert grounded_decision_score(0.0) == 1.0 and grounded_decision_score(1.0) == 10.0
    assert grounded_decision_score(None) is None
    assert grounded_decision_score(5 / 6) == pytest.approx(8.5)  # threshold 8.5 <=> dev accuracy >= 0.833
    assert grounded_decision_score(0.8) < 8.5


@pytest.mark.parametrize(
    "source, decisions, stop, n_iter",
    [
        ("grounded", ["CONTINUE", "FINISH"], "threshold", 2),
        ("critic", ["CONTINUE", "CONTINUE", "FINISH"], "max_iterations", 3),
        ("both", ["CONTINUE", "CONTINUE", "FINISH"], "max_iterations", 3),
    ],
)
def test_creator_critic_score_sources(source: str, decisions: list[str], stop: str, n_iter: int) -> None:
    run, target = cc_run(f"g-cc-{source}", source)
    assert [it.decision for it in run.iterations] == decisions and run.stop_reason == stop
    assert [it.grounded.score for it in run.iterations if it.grounded] == [expected_dev("HALF v1"), 1.0, 1.0][:n_iter]
    assert all(it.grounded and it.grounded.n == len(DEV) and it.grounded.split == "dev" for it in run.iterations)
    want = (
        [1 + 9 * it.grounded.score for it in run.iterations if it.grounded] if source == "grounded" else [3.0] * n_iter
    )
    assert [it.decision_score for it in run.iterations] == pytest.approx(want)
    assert [it.average for it in run.iterations] == [3.0] * n_iter  # the critic ran in every mode
    # baseline and final on the test split, paired
    assert run.baseline_test.split == "test" and run.baseline_test.score == 0.0 and run.baseline_test.n == len(TEST)
    assert run.final_test.score == 1.0 and run.final_output.startswith("GOOD")
    assert run.delta.value == 1.0 and run.delta.n == len(TEST)
    # the test split is never used inside the loop: iteration target steps are dev items, in order
    for it in run.iterations:
        idx = [st.output["example"] for st in it.steps if st.phase == "score_dev"]
        assert idx == list(range(len(DEV))) and not any(st.phase == "score_test" for st in it.steps)
        inputs = {st.output["text"] for st in it.steps if st.role == "target"}
        assert inputs <= {"yes", "no"}
    test_steps = [st for st in run.final if st.phase == "score_test"]
    assert [st.output["example"] for st in test_steps] == list(range(len(TEST))) * 2
    assert [st.output["score"] for st in test_steps] == [0.0] * len(TEST) + [1.0] * len(TEST)
    inside = target.prompts[: len(DEV) * n_iter]  # the loop's calls come before the final measure
    assert {int(p.rsplit("item ", 1)[1]) for p in inside} == set(DEV)
    assert len(target.prompts) == len(DEV) * n_iter + 2 * len(TEST)
    # target calls count in the totals
    assert run.totals.calls == n_iter * 2 + n_iter * len(DEV) + 2 * len(TEST)


def test_grounded_without_examples_is_refused_before_any_call() -> None:
    creator, critic, target = cc_models("g-cc-noex", ["X"], [critique(3)])
    bare = Task(id="bare", prompt="p", goal="g")
    with pytest.raises(ConfigError, match="score_source"):
        run_creator_critic(
            bare, CreatorCriticConfig(model=creator.name, critic_model=critic.name, score_source="grounded")
        )
    with pytest.raises(ConfigError, match="score_source"):
        run_p3ro(bare, P3ROConfig(model=creator.name, score_source="grounded"))
    assert creator.requests == [] and critic.requests == []


def test_expected_mode_refused_for_a_model_without_logprobs(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptlab.llm.providers.own_models import ScriptedProvider

    monkeypatch.setattr(ScriptedProvider, "logprobs", lambda self, m: not m.endswith("blind-critic"))
    creator, critic, _ = cc_models("g-cc-blind", ["X"], [critique(3)])
    cfg = CreatorCriticConfig(
        model=creator.name, critic_model=promptlab.scripted("blind-critic").name, score_mode="expected"
    )
    with pytest.raises(ConfigError, match="score_mode"):
        run_creator_critic(TASK, cfg)
    assert creator.requests == []


def test_provenance_is_recorded() -> None:
    run, _ = cc_run("g-cc-prov", "critic")
    p = run.provenance
    assert p["promptlab_version"] == promptlab.__version__ and p["litellm_version"]
    assert set(p["prompt_hashes"]) == {"creator", "critic"} and all(len(h) == 16 for h in p["prompt_hashes"].values())
    assert p["models"]["creator"]["requested"] == "fake/g-cc-prov-creator"
    assert p["models"]["creator"]["reported"] and p["models"]["target"]["requested"] == "fake/g-cc-prov-target"
    other = TASK.model_copy(update={"split": Split(seed=1, dev=4)})
    assert promptlab.loops.runtime.provenance.base_provenance(other)["task_hash"] != p["task_hash"]
    assert run.info["final_iteration"] == 3


def test_replay_gives_the_same_run(tmp_path: Path) -> None:
    creator, critic, target = cc_models("g-cc-replay", ["HALF v1", "GOOD v2", "GOOD v3"], [critique(3)])
    cfg = CreatorCriticConfig(
        model=creator.name,
        critic_model=critic.name,
        target_model=target.name,
        score_source="both",
        max_iterations=2,
        eval_concurrency=3,
    )
    first = run_creator_critic(TASK, cfg, cache=tmp_path)
    n = len(target.requests)
    again = run_creator_critic(TASK, cfg, cache=tmp_path)
    assert len(target.requests) == n and again.comparable() == first.comparable()
    assert again.totals.cache_hits == again.totals.calls


def test_rescore_asks_the_critic_again_at_another_sample(tmp_path: Path) -> None:
    creator, critic, _ = cc_models("g-cc-rescore", ["V1", "V2"], [critique(4), critique(6), critique(9)])
    cfg = CreatorCriticConfig(model=creator.name, critic_model=critic.name, max_iterations=2)
    run = run_creator_critic(Task(id="t", prompt="p", goal="g"), cfg, cache=tmp_path)
    before = len(critic.requests)
    spec = get_loop("creator_critic")
    assert spec.rescore is not None
    scores = promptlab.aio.run_sync(spec.rescore(run, 1, sample=1, cache=tmp_path))
    assert [s.score for s in scores] == [9.0] and scores[0].judge == "critic[1]"
    assert len(critic.requests) == before + 1
    assert critic.prompts[-1] == critic.prompts[0]  # the same prompt as the loop's first critique
    again = promptlab.aio.run_sync(spec.rescore(run, 1, sample=1, cache=tmp_path))
    assert again == scores and len(critic.requests) == before + 1  # cached
    with pytest.raises(ConfigError, match="iteration"):
        promptlab.aio.run_sync(spec.rescore(run, 7, sample=1))
    assert not math.isnan(scores[0].score or 0)


def test_sweep_provenance_reaches_every_run() -> None:
    from promptlab.loops.runtime.provenance import provenance_scope

    with provenance_scope({"experiment_hash": "abc123"}):
        run, _ = cc_run("g-cc-exp", "critic")
    assert run.provenance["experiment_hash"] == "abc123"
    plain, _ = cc_run("g-cc-exp2", "critic")
    assert "experiment_hash" not in plain.provenance


def p3ro_script(name: str) -> Any:
    """One scripted model playing every P³RO role (by the start of its prompt) and the target."""
    crit = ["Clear instruction", "Names the answer format", "Short"]
    gens = iter(["HALF v1", "GOOD v2", "GOOD v3"])

    def respond(messages: list[dict[str, Any]]) -> str:
        first = messages[0]["content"]
        if first.startswith("You turn a vague goal"):
            return json.dumps({"criteria": crit})
        if first.startswith("You plan how"):
            return json.dumps({"plan": "1. be clear"})
        if first.startswith("You rewrite prompts"):
            return json.dumps({"prompt_text": next(gens), "reasoning": "r"})
        if first.startswith("You are a strict reviewer"):
            return json.dumps(
                {
                    "scores": [{"criterion": c, "score": 4, "justification": "j"} for c in crit],
                    "qualitative_feedback": "f",
                }
            )
        if first.startswith("You turn an evaluation"):
            return json.dumps({"summary": "lesson"})
        return target_reply(messages)

    return promptlab.scripted(name, respond=respond)


@pytest.mark.parametrize(
    "source, decisions, stop",
    [
        ("grounded", ["CONTINUE_PROBING", "FINISH"], "threshold"),
        ("critic", ["CONTINUE_PROBING", "REVISE_STRATEGY", "FINISH"], "max_iterations"),
        ("both", ["CONTINUE_PROBING", "REVISE_STRATEGY", "FINISH"], "max_iterations"),
    ],
)
def test_p3ro_score_sources(source: str, decisions: list[str], stop: str) -> None:
    model = p3ro_script(f"g-p3-{source}")
    run = run_p3ro(
        TASK, P3ROConfig(model=model.name, score_source=source, max_iterations=3, include_start=False), cache=False
    )
    assert [it.decision for it in run.iterations] == decisions and run.stop_reason == stop
    assert [it.grounded.score for it in run.iterations if it.grounded] == [expected_dev("HALF v1"), 1.0, 1.0][
        : len(decisions)
    ]
    assert [it.average for it in run.iterations] == [4.0] * len(decisions)
    want = (
        [1 + 9 * it.grounded.score for it in run.iterations if it.grounded]
        if source == "grounded"
        else [4.0] * len(decisions)
    )
    assert [it.decision_score for it in run.iterations] == pytest.approx(want)
    if source == "grounded":
        assert run.final_output == "GOOD v2" and run.info["final_iteration"] == 2
    else:  # every critic average ties: the earliest wins
        assert run.final_output == "HALF v1" and run.info["final_iteration"] == 1
    assert run.baseline_test.score == 0.0 and run.final_test.n == len(TEST)
    assert run.delta.value == pytest.approx(run.final_test.score - 0.0) and run.delta.n == len(TEST)
    assert all(st.phase != "score_test" for it in run.iterations for st in it.steps)
    assert run.models["target"] == model.name  # target defaults to the generator model


def test_p3ro_grounded_run_whose_critic_never_scores_still_finishes() -> None:
    """The demo's failure: with score_source='grounded' the chosen attempt can have no critic average (the
    evaluator's reply was unreadable); the run must still end with its summary, not raise."""
    base = p3ro_script("g-p3-blind")

    def respond(messages: list[dict[str, Any]]) -> str:
        if messages[0]["content"].startswith("You are a strict reviewer"):
            return "I cannot score this."
        return base.respond(messages)

    model = promptlab.scripted("g-p3-blind-wrap", respond=respond)
    run = run_p3ro(
        TASK, P3ROConfig(model=model.name, score_source="grounded", max_iterations=3, include_start=False), cache=False
    )
    assert [it.average for it in run.iterations] == [None, None]
    assert run.stop_reason == "threshold" and run.final_output == "GOOD v2"
    assert "critic average missing, dev score 1 (n=4)" in run.summary


def test_best_iteration_is_the_one_the_loop_chose_by_its_decision_score() -> None:
    """Every critic average ties, the dev scores do not: Run.best_iteration follows the decision score, and
    best_score stays that iteration's critic average (comparable across score sources)."""
    p3 = run_p3ro(
        TASK,
        P3ROConfig(model=p3ro_script("g-best-p3").name, score_source="grounded", max_iterations=3, include_start=False),
        cache=False,
    )
    assert p3.best_iteration == p3.info["final_iteration"] == 2 and p3.best_score == 4.0
    cc, _ = cc_run("g-best-cc", "grounded", final="best")
    assert cc.best_iteration == cc.info["final_iteration"] == 2 and cc.best_score == 3.0
    critic, _ = cc_run("g-best-cc-critic", "critic", final="best")
    assert critic.best_iteration == critic.info["final_iteration"] == 1  # ties go to the earliest


def test_replicates_share_the_measurement_of_a_prompt(tmp_path: Path) -> None:
    """An evaluation call is at temperature 0: replicate 1 measuring the same prompts as replicate 0 (here the
    scripted creator writes the same rewrite) finds every reply in the cache instead of paying again."""
    creator, critic, target = cc_models("g-cc-share", ["HALF v1"], [critique(3)])
    cfg = CreatorCriticConfig(model=creator.name, critic_model=critic.name, target_model=target.name, max_iterations=1)
    first = run_creator_critic(TASK, cfg, sample=0, cache=tmp_path)
    n = len(target.requests)
    assert n == 2 * len(DEV) + 2 * len(TEST)  # start and rewrite, on dev and on test
    second = run_creator_critic(TASK, cfg, sample=1, cache=tmp_path)
    assert len(target.requests) == n and len(creator.requests) == 2  # the creator draws again; nothing else
    assert second.delta == first.delta


@pytest.fixture
def crashing_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A python scorer that cannot score the reply "crash" (it raises), as a `module:function` name."""
    (tmp_path / "crashing_scorer_mod.py").write_text(
        "def score(output, target):\n"
        "    if output.strip() == 'crash':\n"
        "        raise ValueError('reply has no label')\n"
        "    return float(output.strip() == target)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "crashing_scorer_mod:score"
    sys.modules.pop("crashing_scorer_mod", None)


def test_unscored_examples_are_one_error_per_measurement_counted_in_n_errors(
    crashing_scorer: str, tmp_path: Path
) -> None:
    """A grounded measurement whose scorer cannot score some replies records one ScoreMissing error naming how
    many were unscored (the scores stay missing, never 0), so the run's n_errors counts it."""
    task = TASK.model_copy(update={"scorer": {"kind": "python", "function": crashing_scorer}})

    def reply(messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        return "yes" if text.startswith("GOOD") else "crash" if int(text.rsplit("item ", 1)[1]) % 2 else "no"

    creator, critic, _ = cc_models("g-cc-unscored", ["HALF v1", "GOOD v2"], [critique(3)])
    target = promptlab.scripted("g-cc-unscored-target", respond=reply)
    cfg = CreatorCriticConfig(
        model=creator.name,
        critic_model=critic.name,
        target_model=target.name,
        score_source="grounded",
        finish_threshold=8.5,
        max_iterations=2,
        include_start=False,
    )
    run = run_creator_critic(task, cfg, cache=False)
    odd = lambda idx: sum(i % 2 for i in idx)  # noqa: E731
    missing = [e for e in run.errors if e.kind == "ScoreMissing"]
    assert [(e.phase, e.iteration, e.role) for e in missing] == [
        ("score_dev", 1, "scorer"),
        ("score_test", None, "scorer"),
    ]
    assert missing[0].message.startswith(f"score_dev: {odd(DEV)} of {len(DEV)} example(s) could not be scored (")
    assert "ValueError: reply has no label" in missing[0].message
    assert missing[1].message.startswith(f"score_test: {odd(TEST)} of {len(TEST)} example(s) could not be scored")
    grounded = run.iterations[0].grounded
    assert grounded is not None and grounded.n == len(DEV) - odd(DEV)  # missing scores are left out, never counted as 0
    _, runs = tidy([run], {}, "cell")
    assert runs["n_errors"].tolist() == [len(run.errors)] and len(run.errors) >= 2
    write_cell(tmp_path, "unscored", {"loop": "creator_critic"}, [run])
    said = "\n".join(errors_markdown(load(tmp_path)))
    assert "## Errors recorded in runs" in said and f"`unscored`: {len(run.errors)} error(s) in 1 of 1 runs (" in said
    assert "ScoreMissing x2" in said
