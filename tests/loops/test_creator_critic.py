"""Creator/Critic: the stop rule, aggregation, several critics, failures, replay (scripted model), and one
short local run."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import promptlab
from promptlab.events import EventList
from promptlab.llm.call.settings import Settings
from promptlab.loops.creator_critic.config import CreatorCriticConfig, Critique, aggregate
from promptlab.loops.creator_critic.creator import clean_prompt_text
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.loops.creator_critic.router import route
from promptlab.loops.registry import get_loop, run_loop
from promptlab.record import Run, Task

TASK = Task(id="email", prompt="Write an email to my team.", goal="Say when the launch is and what to do.")


def critique(score: int, *, weak: str = "too vague", tip: str = "name the date") -> str:
    return json.dumps({"score": score, "strengths": ["short"], "weaknesses": [weak], "suggestions": [tip]})


def models(name: str, creator: list[Any], *critics: list[Any]) -> tuple[Any, list[Any]]:
    """A scripted creator and one scripted model per critic queue (the last reply of a queue repeats)."""

    def repeat(queue: list[Any]) -> Any:
        return lambda messages: queue.pop(0) if len(queue) > 1 else queue[0]

    c = promptlab.scripted(f"{name}-creator", respond=repeat(list(creator)))
    return c, [promptlab.scripted(f"{name}-critic{k}", respond=repeat(list(q))) for k, q in enumerate(critics, 1)]


def cfg_for(creator: Any, critics: list[Any], **kw: Any) -> CreatorCriticConfig:
    if len(critics) == 1:
        kw.setdefault("critic_model", critics[0].name)
    else:
        kw.setdefault("critic_models", [m.name for m in critics])
    return CreatorCriticConfig(model=creator.name, **kw)


# Pure parts -----------------------------------------------------------------------------------------
def test_aggregate_of_present_scores() -> None:
    assert aggregate([4.0, None, 6.0, 9.0], "mean") == pytest.approx(19 / 3)
    assert aggregate([4.0, None, 6.0, 9.0], "median") == 6.0
    assert aggregate([4.0, None, 6.0, 9.0], "min") == 4.0
    assert aggregate([None, None], "mean") is None


@pytest.mark.parametrize(
    "aggs, kw, expected, reason_part",
    [
        ([8.0], {"finish_threshold": 7.5}, "FINISH", ">= threshold 7.5 for 1 iteration(s)"),
        ([7.5], {"finish_threshold": 7.5}, "FINISH", "aggregate 7.5 >= threshold 7.5"),
        ([8.0], {"finish_threshold": 7.5, "patience": 2}, "CONTINUE", "for 1 of 2 iterations"),
        ([8.0, 8.0], {"finish_threshold": 7.5, "patience": 2}, "FINISH", "for 2 iteration(s) in a row"),
        ([8.0, None, 8.0], {"finish_threshold": 7.5, "patience": 2, "max_iterations": 5}, "CONTINUE", "for 1 of 2"),
        ([8.0, 6.0], {"finish_threshold": 7.5, "patience": 2}, "CONTINUE", "below threshold 7.5"),
        ([None], {"finish_threshold": 1.0}, "CONTINUE", "no critic score"),
        ([9.0], {}, "CONTINUE", "no early-stop threshold"),
        ([1.0, 2.0, 3.0], {}, "FINISH", "reached max_iterations 3"),
        ([9.0, 9.0, 9.0], {"finish_threshold": 9.5}, "FINISH", "reached max_iterations 3"),
    ],
)
def test_stop_rule(aggs: list[float | None], kw: dict[str, Any], expected: str, reason_part: str) -> None:
    cfg = CreatorCriticConfig(model="fake/auto", **kw)
    d = route(aggs, cfg)
    decision, reason = d.action, d.reason
    assert decision == expected
    assert reason_part in reason, reason


def test_the_router_names_the_stop_reason_of_a_finish() -> None:
    cfg = CreatorCriticConfig(model="fake/auto", finish_threshold=7.5, patience=2, max_iterations=3)
    assert route([8.0, 8.0], cfg).stop_reason == "threshold"
    assert route([9.0, 9.0, 9.0], cfg.model_copy(update={"finish_threshold": 9.5})).stop_reason == "max_iterations"
    assert route([8.0], cfg).stop_reason is None and route([None], cfg).action == "CONTINUE"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("  Plain prompt.  ", "Plain prompt."),
        ('"Quoted prompt."', "Quoted prompt."),
        ("“Curly quoted.”", "Curly quoted."),
        ("```\nFenced prompt.\n```", "Fenced prompt."),
        ("```text\nLine one.\nLine two.\n```", "Line one.\nLine two."),
        ("Improved prompt: Do the thing.", "Do the thing."),
        ("**Revised Prompt:** Do the thing.", "Do the thing."),
        ("Here is the improved prompt:\n\nWrite the email.", "Write the email."),
        ('Say "hi" to them.', 'Say "hi" to them.'),
        ('"Hi" and "bye"', '"Hi" and "bye"'),
    ],
)
def test_clean_prompt_text(raw: str, expected: str) -> None:
    assert clean_prompt_text(raw) == expected


# Whole runs -----------------------------------------------------------------------------------------
def test_early_stop_needs_patience_consecutive_iterations() -> None:
    creator, critics = models(
        "cc-patience", ["V1", "V2", "V3", "V4", "V5"], [critique(8), critique(6), critique(8), critique(8), critique(9)]
    )
    cfg = cfg_for(creator, critics, max_iterations=6, finish_threshold=7.5, patience=2)
    run = run_creator_critic(TASK, cfg)
    assert [it.average for it in run.iterations] == [8.0, 6.0, 8.0, 8.0]
    assert [it.decision for it in run.iterations] == ["CONTINUE"] * 3 + ["FINISH"]
    assert run.stop_reason == "threshold"
    assert run.final_output == "V4" and run.info["final_iteration"] == 4  # the seed returns the last prompt
    assert run.best_iteration == 1 and run.info["final"] == "last"
    best = run_creator_critic(TASK, cfg.model_copy(update={"final": "best"}))
    assert best.final_output == "V1" and best.info["final_iteration"] == 1  # ties go to the earliest

    creator, critics = models("cc-patience1", ["V1", "V2"], [critique(8)])
    run = run_creator_critic(TASK, cfg_for(creator, critics, finish_threshold=7.5))
    assert len(run.iterations) == 1 and run.stop_reason == "threshold"


def test_runs_to_max_iterations_and_keeps_history() -> None:
    creator, critics = models(
        "cc-max",
        ["V1", "V2", "V3"],
        [critique(5, weak="no date given", tip="add the launch date"), critique(7), critique(6)],
    )
    events = EventList(tokens=True)
    run = run_creator_critic(TASK, cfg_for(creator, critics), on_event=events)
    assert [it.candidate for it in run.iterations] == ["V1", "V2", "V3"]
    assert [it.average for it in run.iterations] == [5.0, 7.0, 6.0]
    assert run.stop_reason == "max_iterations" and run.final_output == "V3" and run.best_score == 7.0
    assert run.iterations[0].reflection == "add the launch date"
    # the creator saw the original, the latest version and the critique of it
    first, second = creator.prompts[:2]
    assert TASK.prompt in first and "(none yet" in first
    assert "V1" in second and "critic[1]: score 5/10" in second
    assert "weakness: no date given" in second and "suggestion: add the launch date" in second
    assert "Decision score by iteration: 5 -> 7 -> 6." in (run.summary or "")
    kinds = events.kinds()
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished" and kinds.count("decision") == 3
    assert {e.data["token_type"] for e in events if e.kind == "token"} == {"creator", "critic"}
    assert Run.model_validate_json(run.model_dump_json()) == run


@pytest.mark.parametrize("how, expected", [("mean", 19 / 3), ("median", 6.0), ("min", 4.0)])
def test_several_critics_one_failing(how: str, expected: float) -> None:
    creator, critics = models(
        f"cc-multi-{how}", ["V1"], [critique(4)], ["not json at all"], [critique(6)], [critique(9)]
    )
    run = run_creator_critic(
        TASK, cfg_for(creator, critics, max_iterations=1, aggregate=how), settings=Settings(parse_attempts=1)
    )
    it = run.iterations[0]
    assert [(sc.judge, sc.score) for sc in it.scores] == [
        ("critic[1]", 4.0),
        ("critic[2]", None),
        ("critic[3]", 6.0),
        ("critic[4]", 9.0),
    ]
    assert all(sc.criterion == "overall" for sc in it.scores)
    assert "missing" in it.scores[1].justification
    assert it.scores[0].justification == "strengths: short | weaknesses: too vague"
    assert it.average == expected and run.best_score == expected
    (err,) = run.errors
    assert (err.role, err.kind, err.raw) == ("critic[2]", "ParseError", "not json at all")
    assert [st.role for st in it.steps] == ["creator", "critic[1]", "critic[2]", "critic[3]", "critic[4]"]
    assert [st.model for st in it.steps[1:]] == [m.name for m in critics]
    assert run.info["per_critic"] == {"critic[1]": [4.0], "critic[2]": [None], "critic[3]": [6.0], "critic[4]": [9.0]}
    assert it.metrics == {"critics_scored": 3, "critics_missing": 1}
    assert run.models["critic[2]"] == critics[1].name
    assert run.models["critic"] == ", ".join(m.name for m in critics)


def test_all_critics_failing_gives_missing_aggregate() -> None:
    creator, critics = models("cc-allbad", ["V1", "V2"], ["bad", critique(7)])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2), settings=Settings(parse_attempts=1))
    assert [it.average for it in run.iterations] == [None, 7.0]
    assert run.iterations[0].decision == "CONTINUE" and run.final_output == "V2"
    assert "no usable critique" in creator.prompts[1]


def test_n_critics_are_independent_draws_of_one_model() -> None:
    creator, critics = models("cc-n", ["V1"], [critique(6)])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1, n_critics=3), sample=2)
    assert [sc.judge for sc in run.iterations[0].scores] == ["critic[1]", "critic[2]", "critic[3]"]
    assert sorted(r["params"]["seed"] for r in critics[0].requests) == [2, 3, 4]
    assert [c["sample_offset"] for c in run.info["critics"]] == [0, 1, 2]


def test_creator_failure_is_recorded_and_loop_goes_on() -> None:
    creator, critics = models("cc-badcreator", ["V2"], [critique(7)])
    creator.queue(RuntimeError("provider down"))
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2), settings=Settings(retries=0))
    first, second = run.iterations
    assert first.candidate is None and first.average is None
    assert [sc.score for sc in first.scores] == [None]
    assert run.errors[0].role == "creator" and run.errors[0].kind == "ProviderError"
    assert len(critics[0].requests) == 1  # nothing was critiqued in iteration 1
    assert second.candidate == "V2" and run.final_output == "V2"


def test_blank_creator_reply_is_an_error() -> None:
    creator, critics = models("cc-blank", ["```\n```", "V2"], [critique(7)])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2))
    assert run.iterations[0].candidate is None
    assert "no prompt text" in run.errors[0].message and run.errors[0].raw == "```\n```"
    assert run.final_output == "V2"
    # the retry is a fresh draw (a new sample), not the cached blank reply again
    assert [r["params"]["seed"] for r in creator.requests] == [0, 1]


def test_prompt_override_is_used() -> None:
    creator, critics = models("cc-override", ["V1"], [critique(7)])
    cfg = cfg_for(creator, critics, max_iterations=1, prompts={"creator": "REWRITE {original} for {goal}"})
    run_creator_critic(TASK, cfg)
    assert creator.prompts == [f"REWRITE {TASK.prompt} for {TASK.goal}"]


@pytest.mark.parametrize(
    "fields, name",
    [
        ({"finish_threshold": 11}, "finish_threshold"),
        ({"patience": 0}, "patience"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"n_critics": 0}, "n_critics"),
        ({"aggregate": "max"}, "aggregate"),
        ({"critic_models": []}, "critic_models"),
        ({"critic_models": ["fake/auto", "nonexistent-model-xyz"]}, "nonexistent-model-xyz"),
        ({"critic_models": ["fake/auto"], "n_critics": 2}, "n_critics"),
        ({"generator_model": "nonexistent-model-xyz"}, "nonexistent-model-xyz"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, Any], name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        CreatorCriticConfig(**{"model": "fake/auto", **fields})
    with pytest.raises(ValueError, match=name):
        run_creator_critic(TASK, {"model": "fake/auto", **fields})


def test_registered_and_replayed_from_cache(tmp_path: Path) -> None:
    assert get_loop("creator_critic").config_cls is CreatorCriticConfig
    creator, critics = models("cc-replay", ["V1", "V2"], [critique(5), critique(8)], [critique(6)])
    cfg = cfg_for(creator, critics, max_iterations=2)
    run1 = run_loop("creator_critic", TASK, cfg, cache=tmp_path / "c")
    asked = len(creator.requests) + sum(len(m.requests) for m in critics)
    run2 = run_loop("creator_critic", TASK, cfg, cache=tmp_path / "c")
    assert len(creator.requests) + sum(len(m.requests) for m in critics) == asked
    assert run2.totals.cache_hits == run2.totals.calls == 6
    assert run1.comparable() == run2.comparable()


def test_fake_auto_dry_run() -> None:
    run = run_creator_critic("Explain recursion.", {"model": "fake/auto", "n_critics": 2}, cache=False)
    assert len(run.iterations) == 3 and run.stop_reason == "max_iterations"
    assert all(it.average is not None for it in run.iterations) and run.final_output


@pytest.mark.local_model
def test_local_model_short_run(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    cfg = CreatorCriticConfig(model="local/smollm2", max_iterations=1, max_tokens=200)
    # one attempt per call: a reply cut off by max_tokens is recorded as an error instead of re-asked
    run = run_creator_critic(TASK, cfg, cache=tmp_path / "local", settings=Settings(parse_attempts=1))
    elapsed = time.perf_counter() - t0
    print(
        f"creator_critic local run: {elapsed:.1f}s, {run.totals.output_tokens} output tokens, errors {len(run.errors)}"
    )
    assert Run.model_validate_json(run.model_dump_json()) == run
    assert len(run.iterations) == 1 and run.stop_reason == "max_iterations"
    assert run.iterations[0].candidate


# Issue 9: the design document's rules ------------------------------------------------------------------
def test_critique_is_as_lenient_as_the_seed() -> None:
    """A score of 7.5, four weaknesses and a 151-character strength are a valid critique."""
    long = "x" * 151
    reply = json.dumps({"score": 7.5, "strengths": [long], "weaknesses": ["a", "b", "c", "d"], "suggestions": ["s"]})
    creator, critics = models("cc-lenient", ["V1"], [reply])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1))
    assert run.iterations[0].scores[0].score == 7.5 and run.errors == []
    assert run.final_output == "V1"


def test_every_critique_failing_still_returns_the_last_prompt() -> None:
    creator, critics = models("cc-allfail", ["V1", "V2"], ["not json at all"])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2), settings=Settings(parse_attempts=1))
    assert [it.average for it in run.iterations] == [None, None]
    assert run.final_output == "V2" and run.info["final_iteration"] == 2


def test_parse_failure_score_restores_the_seeds_fallback() -> None:
    creator, critics = models("cc-fallback", ["V1"], ["not json"])
    run = run_creator_critic(
        TASK, cfg_for(creator, critics, max_iterations=1, parse_failure_score=5), settings=Settings(parse_attempts=1)
    )
    score = run.iterations[0].scores[0]
    assert score.score == 5.0 and score.mode == "fallback" and "parse_failure_score 5" in score.justification
    assert run.errors and run.errors[0].kind == "ParseError"  # the failure is still recorded
    assert run.info["parse_failure_score"] == 5


def test_default_temperature_is_the_seeds() -> None:
    assert CreatorCriticConfig().temperature == 0.7
    creator, critics = models("cc-temp", ["V1"], [critique(6)])
    run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1))
    assert creator.requests[0]["params"]["temperature"] == 0.7


def test_expected_score_mode_weighs_the_critics_log_probabilities() -> None:
    from promptlab.llm.providers.scripted import ScriptedReply

    text = '{"score": 7, "strengths": [], "weaknesses": [], "suggestions": []}'
    head, tail = '{"score": ', ', "strengths": [], "weaknesses": [], "suggestions": []}'
    reply = ScriptedReply(
        text, logprobs=[(head, 0.0), ("7", -0.5, {"7": math.log(0.5), "9": math.log(0.5)}), (tail, 0.0)]
    )
    creator, critics = models("cc-expected", ["V1"], [reply])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1, score_mode="expected"))
    score = run.iterations[0].scores[0]
    assert score.mode == "expected" and score.score == pytest.approx(8.0)
    sampled = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1))
    assert sampled.iterations[0].scores[0].score == 7.0 and sampled.iterations[0].scores[0].mode == "sampled"


def test_a_critique_in_a_code_fence_or_with_other_keys_is_read() -> None:
    reply = json.dumps(
        {
            "score": 8,
            "strengths": ["clear"],
            "weaknesses": [],
            "suggestions": ["s"],
            "confidence": "high",
            "notes": {"k": 1},
        }
    )
    creator, critics = models("cc-extra-keys", ["V1"], [reply])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1), settings=Settings(parse_attempts=1))
    assert run.iterations[0].scores[0].score == 8.0 and run.errors == [] and run.final_output == "V1"
    assert Critique.model_json_schema()["additionalProperties"] is False  # the generation schema asks for none
    fenced = (
        f"Here is my critique:\n```json\n{critique(6)}\n```"  # the design document's json.loads would fall back to 5
    )
    creator, critics = models("cc-fenced", ["V1"], [fenced])
    run = run_creator_critic(
        TASK, cfg_for(creator, critics, max_iterations=1, parse_failure_score=5), settings=Settings(parse_attempts=1)
    )
    assert run.iterations[0].scores[0].score == 6.0 and run.iterations[0].scores[0].mode == "sampled"


# Issue 18 ---------------------------------------------------------------------------------------------
def test_a_score_just_below_the_threshold_does_not_stop_the_run() -> None:
    """Bug: the aggregate was rounded to 4 decimals before the threshold test, so 8.49996 stopped at 8.5."""
    creator, critics = models(
        "cc-unrounded",
        ["V1", "V2"],
        [json.dumps({"score": 8.49996, "strengths": [], "weaknesses": [], "suggestions": []})],
    )
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2, finish_threshold=8.5))
    assert run.iterations[0].average == 8.49996 and run.iterations[0].decision == "CONTINUE"
    assert run.stop_reason == "max_iterations" and len(run.iterations) == 2


def test_the_creator_sees_the_whole_critique_and_the_critic_the_whole_prompt() -> None:
    """The seed passes the creator the critique (strengths too) and the critic the whole prompt, uncut."""
    long = "Write the email. " + "Mention the launch date and the steps. " * 120  # about 4,700 characters
    creator, critics = models("cc-whole", [long, "V2"], [critique(6)])
    run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2))
    assert long.strip() in critics[0].prompts[0]
    second = creator.prompts[1]
    assert "strength: short" in second and "weakness: too vague" in second and long.strip() in second


def test_role_inputs_seed_restores_the_seeds_creator_and_critic() -> None:
    """Seed: the creator sees the original prompt and the previous critique (as the whole critique object), no
    goal and no latest version; the critic sees the prompt only."""
    creator, critics = models("cc-seed-inputs", ["V1", "V2"], [critique(6)])
    run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2, role_inputs="seed"))
    first, second = creator.prompts
    assert TASK.prompt in first and "None" in first.split("Previous critique:")[1]
    assert (
        json.dumps(
            {"score": 6.0, "strengths": ["short"], "weaknesses": ["too vague"], "suggestions": ["name the date"]}
        )
        in second
    )
    assert TASK.goal not in second and "V1" not in second  # no goal, no latest version
    assert TASK.goal not in critics[0].prompts[0] and "V1" in critics[0].prompts[0]
    extended = models("cc-ext-inputs", ["V1", "V2"], [critique(6)])
    run_creator_critic(TASK, cfg_for(extended[0], extended[1], max_iterations=2))
    assert TASK.goal in extended[0].prompts[1] and "V1" in extended[0].prompts[1]
    assert TASK.goal in extended[1][0].prompts[0]


def test_clean_creator_reply_false_keeps_the_reply_as_the_seed() -> None:
    reply = "Here is the improved prompt:\n\nWrite the email with the date."
    creator, critics = models("cc-raw", [reply], [critique(6)])
    cleaned = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1))
    assert cleaned.final_output == "Write the email with the date."
    raw = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=1, clean_creator_reply=False))
    assert raw.final_output == reply and raw.iterations[0].candidate == reply


def test_the_fallback_score_is_one_critic_call_and_the_creator_sees_the_seeds_critique() -> None:
    """With parse_failure_score: one critic call (the seed makes one), and the creator's next prompt holds the
    seed's fallback critique (weakness 'Critic returned invalid JSON')."""
    creator, critics = models("cc-fallback-once", ["V1", "V2"], ["not json"])
    run = run_creator_critic(TASK, cfg_for(creator, critics, max_iterations=2, parse_failure_score=5))
    assert len(critics[0].requests) == 2  # one per iteration: never re-asked (default settings: 3 attempts)
    assert [it.average for it in run.iterations] == [5.0, 5.0]
    assert "weakness: Critic returned invalid JSON" in creator.prompts[1]
    seed_creator, seed_critics = models("cc-fallback-seed", ["V1", "V2"], ["not json"])
    run_creator_critic(
        TASK, cfg_for(seed_creator, seed_critics, max_iterations=2, parse_failure_score=5, role_inputs="seed")
    )
    assert (
        json.dumps(
            {
                "score": 5.0,
                "strengths": [],
                "weaknesses": ["Critic returned invalid JSON"],
                "suggestions": [],
                "raw_output": "not json",
            }
        )
        in seed_creator.prompts[1]
    )
    missing_creator, missing_critics = models("cc-fallback-none", ["V1", "V2"], ["not json"])
    run_creator_critic(TASK, cfg_for(missing_creator, missing_critics, max_iterations=2))
    assert len(missing_critics[0].requests) == 6 and "no usable critique" in missing_creator.prompts[1]
