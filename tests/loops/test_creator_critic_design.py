"""Creator/Critic read as the PromptForge design document reads it (issue #29): the critic's reply is what the
seed's `json.loads` keeps, the creator sees all of it, the iteration ceiling, an empty creator reply, the
critic's schema hints and the creator-reply cleaning (scripted models)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

import promptlab
from promptlab.llm.call.settings import Settings
from promptlab.loops.creator_critic.config import CreatorCriticConfig, Critique, LongCritique
from promptlab.loops.creator_critic.creator import clean_prompt_text
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.record import Task

TASK = Task(id="email", prompt="Write an email to my team.", goal="Say when the launch is and what to do.")
ONE_CALL = Settings(parse_attempts=1)


def pair(name: str, creator: list[str], critic: list[str]) -> tuple[Any, Any]:
    """A scripted creator and critic (the last reply of each queue repeats)."""

    def repeat(queue: list[str]) -> Any:
        return lambda messages: queue.pop(0) if len(queue) > 1 else queue[0]

    return (
        promptlab.scripted(f"{name}-creator", respond=repeat(list(creator))),
        promptlab.scripted(f"{name}-critic", respond=repeat(list(critic))),
    )


def run(name: str, critic_reply: str, n: int = 2, **kw: Any) -> tuple[Any, Any, Any]:
    creator, critic = pair(name, ["V1", "V2", "V3"], [critic_reply])
    cfg = CreatorCriticConfig(model=creator.name, critic_model=critic.name, max_iterations=n, **kw)
    return run_creator_critic(TASK, cfg, settings=ONE_CALL), creator, critic


@pytest.mark.parametrize(
    "reply, score",
    [
        ({"score": "8", "strengths": ["clear"], "weaknesses": ["no date"], "suggestions": ["add it"]}, 8.0),
        ({"score": 7, "strengths": "clear", "weaknesses": "no date", "suggestions": "add it"}, 7.0),
    ],
)
def test_a_critique_the_seed_keeps_is_read_not_replaced_by_the_fallback(reply: dict[str, Any], score: float) -> None:
    """A score as a numeric string, and lists given as one string, are the critique the critic wrote: its
    score counts and the creator sees its words (before: 'invalid JSON', so the fallback or a missing score)."""
    r, creator, _ = run(f"cc-seedjson-{score:g}", json.dumps(reply), parse_failure_score=5)
    first = r.iterations[0]
    assert first.scores[0].score == score and first.scores[0].mode == "sampled" and r.errors == []
    assert "no date" in creator.prompts[1] and "add it" in creator.prompts[1]
    assert "invalid JSON" not in creator.prompts[1]


def test_a_critique_without_a_score_keeps_its_words_and_gives_a_missing_score() -> None:
    reply = json.dumps({"strengths": ["clear"], "weaknesses": ["no date"], "suggestions": ["add the date"]})
    r, creator, _ = run("cc-noscore", reply)
    assert r.iterations[0].scores[0].score is None
    assert "the critique gives no score" in r.iterations[0].scores[0].justification
    assert r.errors and "no score" in r.errors[0].message  # recorded, never an invented value
    assert "add the date" in creator.prompts[1]  # the creator still sees the critique


@pytest.mark.parametrize(
    "rule, expected, recorded", [("missing", None, True), ("clamp", 10.0, True), ("keep", 11.0, False)]
)
def test_a_score_outside_1_to_10_follows_out_of_range_score(rule: str, expected: float | None, recorded: bool) -> None:
    """Default 'missing' (the score is lost, the error recorded, the words reach the creator); 'clamp'
    records the change; 'keep' is the design document's json.loads (11 stays 11)."""
    reply = json.dumps({"score": 11, "strengths": [], "weaknesses": ["long"], "suggestions": ["cut it"]})
    r, creator, _ = run(f"cc-range-{rule}", reply, n=1, out_of_range_score=rule)
    score = r.iterations[0].scores[0]
    assert score.score == expected and "outside 1-10" in score.justification
    assert bool(r.errors) is recorded
    low = json.dumps({"score": 0, "suggestions": ["cut it"]})
    r0, _, _ = run(f"cc-range0-{rule}", low, n=1, out_of_range_score=rule)
    assert r0.iterations[0].scores[0].score == {"missing": None, "clamp": 1.0, "keep": 0.0}[rule]


@pytest.mark.parametrize("role_inputs", ["seed", "extended"])
def test_the_creator_sees_the_critiques_other_keys(role_inputs: str) -> None:
    """The seed passes the whole critique dict to the creator: other keys included."""
    reply = json.dumps(
        {
            "score": 6,
            "strengths": [],
            "weaknesses": ["vague"],
            "suggestions": [],
            "tone": "too formal",
            "meta": {"k": 1},
        }
    )
    r, creator, _ = run(f"cc-otherkeys-{role_inputs}", reply, role_inputs=role_inputs)
    assert r.iterations[0].scores[0].score == 6.0
    assert "too formal" in creator.prompts[1] and '"k": 1' in creator.prompts[1]
    crit_output = r.iterations[0].steps[-1].output
    assert "too formal" in json.dumps(crit_output)  # and kept in the record


def test_max_iterations_over_the_seeds_ceiling_of_25_is_refused_unless_the_ceiling_is_lifted() -> None:
    with pytest.raises(ValidationError, match="iteration_ceiling"):
        CreatorCriticConfig(max_iterations=26)
    with pytest.raises(ValidationError, match="iteration_ceiling"):
        run_creator_critic(TASK, {"model": "fake/auto", "max_iterations": 30})
    assert CreatorCriticConfig(max_iterations=25).max_iterations == 25
    r, _, _ = run("cc-ceiling", json.dumps({"score": 5}), n=27, iteration_ceiling=None)
    assert len(r.iterations) == 27 and r.stop_reason == "max_iterations"


def test_an_empty_creator_reply_is_scored_when_clean_creator_reply_is_false() -> None:
    """The seed stores `response.content` as it is and the critic scores it; the default (cleaning) makes an
    empty reply no candidate, with the error recorded."""
    creator, critic = pair("cc-empty", [""], [json.dumps({"score": 2, "weaknesses": ["empty"]})])
    kept = run_creator_critic(
        TASK,
        CreatorCriticConfig(model=creator.name, critic_model=critic.name, max_iterations=1, clean_creator_reply=False),
    )
    assert kept.iterations[0].candidate == "" and kept.iterations[0].scores[0].score == 2.0
    assert len(critic.requests) == 1 and kept.final_output == ""
    cleaned = run_creator_critic(
        TASK, CreatorCriticConfig(model=creator.name, critic_model=critic.name, max_iterations=1)
    )
    assert cleaned.iterations[0].candidate is None and len(critic.requests) == 1  # the critic was not asked again
    assert "no prompt text" in cleaned.errors[0].message


def test_schema_hints_false_offers_lists_of_any_length() -> None:
    """The default generation schema offers at most 3 items of 150 characters (a local grammar keeps to
    it); `schema_hints=False` sends a schema without those limits, and the critic's request carries it."""
    hinted = Critique.model_json_schema()["properties"]["weaknesses"]
    assert hinted["maxItems"] == 3 and hinted["items"]["maxLength"] == 150
    free = LongCritique.model_json_schema()["properties"]["weaknesses"]
    assert "maxItems" not in free and "maxLength" not in free["items"]
    r, _, critic = run(
        "cc-hints", json.dumps({"score": 6, "weaknesses": ["a", "b", "c", "d"]}), n=1, schema_hints=False
    )
    sent = json.dumps(critic.requests[0]["params"].get("response_format", {}))
    assert '"maxItems"' not in sent and "weaknesses" in sent
    assert r.iterations[0].scores[0].score == 6.0


def test_a_lead_in_at_the_end_of_a_preamble_is_cleaned() -> None:
    reply = "This is the first rewritten version... Here is the improved prompt:\n\nWrite the email with the date."
    assert clean_prompt_text(reply) == "Write the email with the date."
    kept = "Summarize the article. Here is the article:\n{article}"  # a prompt's own 'here is' stays
    assert clean_prompt_text(kept) == kept
