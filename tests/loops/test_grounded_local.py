"""A grounded loop on the embedded local model: every scoring step is the reply llama.cpp gives directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import promptlab
from promptlab.eval.scorers import get_scorer
from promptlab.eval.tasks import examples_of
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.record import Example, Split, Step, Task

ROOT = Path(__file__).resolve().parents[2]
SCORER = {"kind": "choice", "labels": ["positive", "negative"]}
CANDIDATE = (
    "Classify the sentiment of this product review. Answer with one word: positive or negative.\n\nReview: {input}"
)
EVAL_MAX_TOKENS = 6


def sentiment_task(per_label: int = 4) -> Task:
    """The first `per_label` positive and negative reviews of data/grounded/sentiment.jsonl, 4 dev + 4 test."""
    rows = [json.loads(line) for line in (ROOT / "data/grounded/sentiment.jsonl").read_text().splitlines()]
    chosen = [r for r in rows if r["target"] == "positive"][:per_label]
    chosen += [r for r in rows if r["target"] == "negative"][:per_label]
    return Task(
        id="sentiment-local",
        prompt="Is this review positive or negative?\n\n{input}",
        goal="Label a product review as positive or negative with exactly one word.",
        examples=[Example(**r) for r in chosen],
        scorer=SCORER,
        split=Split(seed=0, dev=4, test=4),
    )


def direct_replies(prompt: str, examples: list[Example]) -> list[str]:
    """llama.cpp called directly with the loop's evaluation settings (temperature 0, the reply cap, seed 0)."""
    from promptlab.llm.local import pool as local

    llm, lock = local.load("smollm2")
    out = []
    for ex in examples:
        messages = [{"role": "user", "content": promptlab.format_prompt(prompt, ex.input)}]
        with lock:
            reply = llm.create_chat_completion(messages=messages, temperature=0.0, max_tokens=EVAL_MAX_TOKENS, seed=0)
        out.append(reply["choices"][0]["message"]["content"] or "")
    return out


def texts(steps: list[Step], phase: str, n: int) -> list[str | None]:
    """The reply texts of the `phase` steps, checked to be in example order (0..n-1 per prompt measured)."""
    mine = [s for s in steps if s.phase == phase]
    assert all(s.error is None and s.role == "target" and s.model == "local/smollm2" for s in mine)
    assert [s.output["example"] for s in mine] == [i % n for i in range(len(mine))]
    return [s.output["text"] for s in mine]


@pytest.mark.local_model
@pytest.mark.parametrize("engine", ["pool", "batch"])
def test_grounded_creator_critic_on_the_local_model_scores_what_llama_cpp_replies(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool replies exactly as llama-cpp-python does one call at a time; the batching engine may differ at
    near-ties (docs/calls.md), so there every score is the scorer's verdict on the reply the run recorded."""
    monkeypatch.setenv("PROMPTLAB_LOCAL_ENGINE", engine)
    task = sentiment_task()
    dev, test = examples_of(task, "dev"), examples_of(task, "test")
    creator = promptlab.scripted("grounded-local-creator", respond=lambda messages: CANDIDATE)
    critic = promptlab.scripted(
        "grounded-local-critic",
        respond=lambda messages: json.dumps(
            {"score": 6, "strengths": ["names the labels"], "weaknesses": ["terse"], "suggestions": ["none"]}
        ),
    )
    cfg = CreatorCriticConfig(
        model=creator.name,
        critic_model=critic.name,
        target_model="local/smollm2",
        score_source="grounded",
        max_iterations=1,
        finish_threshold=8.5,
        eval_max_tokens=EVAL_MAX_TOKENS,
        eval_concurrency=2,
        include_start=False,
    )  # one candidate: the scripted creator's (candidate 0 elsewhere)
    run = run_creator_critic(task, cfg, cache=False)

    [it] = run.iterations
    assert it.candidate == CANDIDATE and run.errors == []
    scorer = get_scorer(SCORER)

    def scores(replies: list[str], examples: list[Example]) -> list[float | None]:
        return [scorer.score_example(r, ex).value for r, ex in zip(replies, examples, strict=True)]

    if engine == "batch":
        dev_seen = texts(it.steps, "score_dev", len(dev))
        assert all(isinstance(r, str) for r in dev_seen)
        assert it.grounded is not None and it.grounded.scores == scores(dev_seen, dev)  # type: ignore[arg-type]
        test_seen = texts(run.final, "score_test", len(test))
        assert run.baseline_test is not None and run.final_test is not None
        assert run.baseline_test.scores + run.final_test.scores == scores(test_seen, test + test)  # type: ignore[arg-type]
        return
    # dev: the candidate on the dev split, inside the iteration
    dev_direct = direct_replies(CANDIDATE, dev)
    assert texts(it.steps, "score_dev", len(dev)) == dev_direct
    assert it.grounded is not None and it.grounded.scores == scores(dev_direct, dev)
    assert [s.output["score"] for s in it.steps if s.phase == "score_dev"] == it.grounded.scores
    # test: the original prompt, then the final one, after the loop
    base_direct, final_direct = direct_replies(task.prompt, test), direct_replies(CANDIDATE, test)
    assert run.final_output == CANDIDATE
    assert texts(run.final, "score_test", len(test)) == base_direct + final_direct
    assert run.baseline_test is not None and run.baseline_test.scores == scores(base_direct, test)
    assert run.final_test is not None and run.final_test.scores == scores(final_direct, test)
    # the router decided on the grounded dev score: 1 + 9 x accuracy against the 8.5 threshold
    dev_score = sum(it.grounded.scores) / len(dev)  # type: ignore[arg-type]
    assert it.decision_score == pytest.approx(1 + 9 * dev_score)
    assert run.stop_reason == ("threshold" if 1 + 9 * dev_score >= 8.5 else "max_iterations")
