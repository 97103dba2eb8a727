"""PES as its design document resolves settings (issue #29): a thread's provider config wins over the
instance's, whatever level the instance set a model at (scripted models)."""

from __future__ import annotations

import json
from typing import Any

import promptlab as pl
from promptlab.loops.pes.agent import PESAgent
from promptlab.loops.pes.config import PESConfig, with_provider


def is_planning(messages: list[dict[str, Any]]) -> bool:
    return "Plan the next round" in messages[-1]["content"]


def agent_model(name: str, answer: str) -> Any:
    def respond(messages: list[dict[str, Any]]) -> str:
        if is_planning(messages):
            return json.dumps({"title": "t", "intent": "i", "plan": "p", "thoughts": "t", "tool_calls": []})
        return json.dumps({"content": answer, "metadata": {"sources": [], "suggestions": []}})

    return pl.scripted(name, respond=respond)


def test_a_threads_model_wins_over_the_instances_role_models() -> None:
    """The instance sets the planner and synthesizer in `role_models`; a thread's `provider_config={"model": X}`
    makes X play them (call -> thread -> instance), where before it was silently ignored."""
    instance = agent_model("pes-inst-roles", "instance")
    thread = agent_model("pes-thread-wins", "thread")
    roles = {"planner": instance.name, "synthesizer": instance.name}
    agent = PESAgent("a", config=PESConfig(model=instance.name, role_models=roles))
    agent.set_thread("t", provider_config={"model": thread.name})
    run = agent.process("q", thread_id="t")
    assert run.final_output == "thread" and len(thread.requests) == 2 and not instance.requests
    assert agent.process("q", thread_id="u").final_output == "instance"  # other threads keep the instance's


def test_each_thread_level_overrides_only_the_roles_it_covers() -> None:
    for name in ("gen", "crit", "syn"):
        pl.scripted(name, ["{}"])
    cfg = PESConfig(model="fake/auto", role_models={"planner": "fake/auto", "judge": "fake/auto"})
    gen = with_provider(cfg, {"generator_model": "fake/gen"})
    assert gen.model_for("planner") == "fake/gen" and gen.model_for("judge") == "fake/auto"
    crit = with_provider(cfg, {"critic_model": "fake/crit"})
    assert crit.model_for("judge") == "fake/crit" and crit.model_for("planner") == "fake/auto"
    one = with_provider(cfg, {"role_models": {"synthesizer": "fake/syn"}})
    assert one.role_models == {"planner": "fake/auto", "judge": "fake/auto", "synthesizer": "fake/syn"}


def test_planning_and_synthesis_fields_the_seed_makes_optional_may_be_left_out() -> None:
    """The seed's `planningOutput` has every field optional (`plan?: any`) and extracts the synthesis metadata
    where the reply gives it: a plan of tool calls only, a plan given as a list, and an answer without
    metadata are used (before: refused, so the run ended in error)."""
    replies = [
        json.dumps({"tool_calls": [{"tool": "calculator", "input": "6*7"}]}),
        json.dumps({"plan": ["answer", "stop"], "tool_calls": []}),
        json.dumps({"content": "42"}),
    ]
    m = pl.scripted("pes-optional", replies)
    run = PESAgent("a", config=PESConfig(model=m.name)).process("What is 6*7?")
    assert run.errors == [] and run.stop_reason == "no_tool_calls" and run.final_output == "42"
    assert run.iterations[1].candidate == '["answer", "stop"]' and run.info["metadata"]["sources"] == []
