"""Every role's reply is read the way its design document's schema reads it (issue #29): a reply with an extra
key, at the top or in a nested object, is used as the same reply without it, in every role of P³RO,
Creator/Critic, PES and PCEE, and the extra key is kept in the step's recorded output (scripted models)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import promptlab as pl
from promptlab.llm.call.settings import Settings
from promptlab.llm.providers.scripted import get_scripted
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.loops.p3ro.loop import run_p3ro
from promptlab.loops.pcee.loop import run_pcee
from promptlab.loops.pes.agent import run_pes
from promptlab.record import Run, Step

EXTRA = {"confidence": 0.9, "note": {"why": "models add keys"}}
CRITERIA = ["Clarity of the task", "Names the target audience"]
P3RO = {
    "decomposer": {"criteria": CRITERIA},
    "strategist": {"plan": "name the audience, then the format"},
    "generator": {"prompt_text": "Write a poem about the sea for children.", "reasoning": "audience"},
    "evaluator": {
        "scores": [{"criterion": c, "score": 9, "justification": "good"} for c in CRITERIA],
        "qualitative_feedback": "fine",
    },
    "reflector": {"summary": "keep the audience explicit"},
}
CREATOR_CRITIC = {
    "critic": {"score": 9, "strengths": ["clear"], "weaknesses": ["no date"], "suggestions": ["add the date"]},
}
PES = {
    "planner": [
        {
            "title": "Sum",
            "intent": "a number",
            "plan": "compute",
            "thoughts": "use the calculator",
            "tool_calls": [{"tool": "calculator", "input": "6*7"}],
        },
        {"title": "Sum", "intent": "a number", "plan": "answer", "thoughts": "done", "tool_calls": []},
    ],
    "synthesizer": {"content": "42", "metadata": {"sources": ["calculator"], "suggestions": []}},
    "judge": {"justification": "right", "score": 9},
}
PCEE = {
    "planner": {
        "plan": [
            {"step_id": 1, "instruction": "add", "tool_name": "calculator", "tool_input": "2+3"},
            {"step_id": 2, "instruction": "double", "tool_name": "calculator", "tool_input": "{step_1_output}*2"},
        ]
    },
    "controller": {"value": "5"},
    "corrector": {"plan": [{"step_id": 1, "instruction": "warm up", "tool_name": "calculator", "tool_input": "1+1"}]},
    "evaluator": lambda text: {  # step 2 always fails: corrections, retries, then failed_step
        "verdict": "failure" if "Step instruction: double" in text else "success",
        "reason": "checked",
    },
}
NESTED = {  # where a nested object sits in each reply that has one
    ("p3ro", "evaluator"): ("scores", 0),
    ("pes", "planner"): ("tool_calls", 0),
    ("pes", "synthesizer"): ("metadata",),
    ("pcee", "planner"): ("plan", 0),
    ("pcee", "corrector"): ("plan", 0),
}


def with_extra(reply: Any, where: tuple[Any, ...]) -> Any:
    """`reply` (a dict, a list of them, or a function of the prompt giving one) with EXTRA's keys added to the
    object at path `where` (() is the top) wherever that path exists."""
    if isinstance(reply, list):
        return [with_extra(r, where) for r in reply]
    if callable(reply):
        return lambda text: with_extra(reply(text), where)
    out = copy.deepcopy(reply)
    target: Any = out
    for key in where:
        if not isinstance(target, dict | list) or key not in (
            target if isinstance(target, dict) else range(len(target))
        ):
            return out
        target = target[key]
    target.update(EXTRA)
    return out


def scripted(name: str, replies: dict[str, Any]) -> dict[str, str]:
    """One scripted model per role; a role given a list replies with its items in turn (the last repeats), one
    given a function replies with its value for the prompt's text."""
    names = {}
    for role, reply in replies.items():
        queue = list(reply) if isinstance(reply, list) else [reply]

        def respond(messages: list[dict[str, Any]], queue: list[Any] = queue) -> str:
            r = queue.pop(0) if len(queue) > 1 else queue[0]
            return json.dumps(r(messages[-1]["content"]) if callable(r) else r)

        names[role] = pl.scripted(f"{name}-{role}", respond=respond).name
    return names


def run_p3ro_with(name: str, replies: dict[str, Any], tmp_path: Path, **kw: Any) -> Run:
    roles = scripted(name, replies)
    return run_p3ro(
        {"id": "poem", "prompt": "Write a poem about the sea.", "goal": "Make it vivid."},
        {"role_models": roles, "max_iterations": 1, **kw},
        settings=Settings(parse_attempts=1),
    )


def run_cc_with(name: str, replies: dict[str, Any], tmp_path: Path, **kw: Any) -> Run:
    roles = scripted(name, replies)
    creator = pl.scripted(f"{name}-creator", respond=lambda m: "Write the launch email with the date.")
    return run_creator_critic(
        {"id": "email", "prompt": "Write an email.", "goal": "Say when the launch is."},
        {"model": creator.name, "critic_model": roles["critic"], "max_iterations": 2, **kw},
        settings=Settings(parse_attempts=1),
    )


def run_pes_with(name: str, replies: dict[str, Any], tmp_path: Path, **kw: Any) -> Run:
    roles = scripted(name, replies)
    return run_pes("What is 6*7?", {"role_models": roles, "judge": True, **kw}, settings=Settings(parse_attempts=1))


def run_pcee_with(name: str, replies: dict[str, Any], tmp_path: Path, **kw: Any) -> Run:
    roles = scripted(name, replies)
    cfg = {"role_models": roles, "workspace_base": str(tmp_path / "ws"), "tools": ["calculator"], **kw}
    return run_pcee("Add 2 and 3, then double it.", cfg, settings=Settings(parse_attempts=1))


LOOPS: dict[str, tuple[dict[str, Any], Callable[..., Run]]] = {
    "p3ro": (P3RO, run_p3ro_with),
    "creator_critic": (CREATOR_CRITIC, run_cc_with),
    "pes": (PES, run_pes_with),
    "pcee": (PCEE, run_pcee_with),
}
CASES = [(loop, role, ()) for loop, (replies, _) in LOOPS.items() for role in replies] + [
    (loop, role, where) for (loop, role), where in NESTED.items()
]


def steps_of(run: Run) -> list[Step]:
    return [*run.setup, *(s for it in run.iterations for s in it.steps), *run.final]


def outcome(run: Run) -> tuple[Any, ...]:
    scores = [[(s.criterion, s.score) for s in it.scores] for it in run.iterations]
    return run.stop_reason, run.final_output, len(run.iterations), scores


@pytest.mark.parametrize("loop, role, where", CASES, ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else v)
def test_a_reply_with_an_extra_key_is_taken_as_the_seeds_schema_takes_it(
    loop: str, role: str, where: tuple[Any, ...], tmp_path: Path
) -> None:
    replies, run_with = LOOPS[loop]
    plain = run_with(f"x-{loop}-{role}-{len(where)}-plain", replies, tmp_path / "plain")
    assert plain.errors == [], plain.errors  # the script itself is a clean run
    changed = with_extra(replies[role], where)
    extra = run_with(f"x-{loop}-{role}-{len(where)}", {**replies, role: changed}, tmp_path / "extra")
    assert extra.errors == [], extra.errors
    assert outcome(extra) == outcome(plain)
    recorded = [s.output for s in steps_of(extra) if s.role == role or s.role.startswith(f"{role}[")]
    assert recorded and "models add keys" in json.dumps(recorded)  # the extra key is kept in the record


def test_an_empty_reflection_summary_is_taken_as_the_seeds_summary_str(tmp_path: Path) -> None:
    """P³RO's seed declares `summary: str` and `plan: str`: an empty one is a reflection (a plan), not a reply to
    ask for again."""
    run = run_p3ro_with("x-empty-reflection", {**P3RO, "reflector": {"summary": ""}}, tmp_path)
    assert run.errors == [] and run.iterations[-1].reflection == ""
    planless = run_p3ro_with("x-empty-plan", {**P3RO, "strategist": {"plan": ""}}, tmp_path)
    assert planless.errors == [] and planless.iterations[-1].candidate == P3RO["generator"]["prompt_text"]


@pytest.mark.parametrize(
    "schema, reply",
    [
        ("pcee.Verdict", {"verdict": "maybe", "reason": "unsure", "confidence": 0.5}),
        ("pes.PlanningOutput", {"title": "t", "intent": "i", "plan": "p", "thoughts": "t", "tool_calls": "calculator"}),
        ("p3ro.GeneratedPrompt", {"prompt_text": ["a", "list"], "reasoning": "r"}),
    ],
)
def test_the_types_the_seed_declares_are_still_checked(schema: str, reply: dict[str, Any]) -> None:
    """Extra keys are accepted; a declared field of the wrong type or value is not."""
    package, name = schema.split(".")
    model = getattr(import_module(f"promptlab.loops.{package}.schemas"), name)
    with pytest.raises(ValidationError):
        model.model_validate_json(json.dumps(reply), strict=True)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_max_tokens_none_sends_no_cap_as_the_seeds(loop: str, tmp_path: Path) -> None:
    """Every loop caps each reply at 400 tokens by default (a table row says so); the design documents set no cap, and
    `max_tokens=None` sends none, to any role."""
    replies, run_with = LOOPS[loop]
    capped = run_with(f"tok-{loop}-400", replies, tmp_path / "a")
    free = run_with(f"tok-{loop}-none", replies, tmp_path / "b", max_tokens=None)
    assert capped.config["max_tokens"] == 400 and free.config["max_tokens"] is None
    for prefix, want in ((f"tok-{loop}-400", 400), (f"tok-{loop}-none", None)):
        sent = [r["params"].get("max_tokens") for role in replies for r in get_scripted(f"{prefix}-{role}").requests]
        assert sent and set(sent) == {want}, (prefix, sent)
