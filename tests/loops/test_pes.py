"""PES: planning with tools, errors fed back, stop rules, observations, personas, threads, delegation."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import promptlab as pl
from promptlab.events import EventList
from promptlab.loops.pes.a2a import A2ATaskRepository, AgentDirectory
from promptlab.loops.pes.agent import PESAgent, run_pes
from promptlab.loops.pes.config import Persona, PESConfig
from promptlab.loops.pes.observe import TOKEN_KINDS, ObservationType
from promptlab.loops.registry import get_loop, run_loop
from promptlab.record import Run


def plan(*calls: tuple[str, Any], text: str = "look it up") -> str:
    return json.dumps(
        {
            "title": "Sums",
            "intent": "get a number",
            "plan": text,
            "thoughts": "need a tool",
            "tool_calls": [{"tool": t, "input": i} for t, i in calls],
        }
    )


def answer(content: str, sources: tuple[str, ...] = ()) -> str:
    return json.dumps({"content": content, "metadata": {"sources": list(sources), "suggestions": ["more?"]}})


def is_planning(messages: list[dict[str, Any]]) -> bool:
    return "Plan the next round" in messages[-1]["content"]


def system_of(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def test_a_tool_error_is_fed_to_the_next_planning_call_and_no_tool_calls_ends_the_loop() -> None:
    m = pl.scripted(
        "pes-err",
        [
            plan(("calculator", {"expression": "1/0"}), ("weather", {"city": "Oslo"})),
            plan(("calculator", "6*7")),
            plan(),
            answer("42", ("calculator",)),
        ],
    )
    run = run_pes("What is 6*7?", PESConfig(model=m.name))
    second = m.prompts[1]
    assert "calculator" in second and "ERROR: division by zero in '1/0'" in second
    assert "ERROR: unknown tool 'weather'; known tools: calculator, search_docs" in second
    assert "-> 42" in m.prompts[2] and "Round 2" in m.prompts[2]
    assert run.stop_reason == "no_tool_calls" and run.final_output == "42" and len(run.iterations) == 3
    assert [it.metrics for it in run.iterations] == [
        {"tool_calls": 2, "tool_successes": 0, "tool_errors": 2},
        {"tool_calls": 1, "tool_successes": 1, "tool_errors": 0},
        {"tool_calls": 0, "tool_successes": 0, "tool_errors": 0},
    ]
    assert [it.average for it in run.iterations] == [0.0, 10.0, None]
    assert [it.decision for it in run.iterations] == ["continue", "continue", "synthesize"]
    assert run.best_iteration == 2 and run.best_score == 10.0
    assert [e.kind for e in run.errors] == ["ToolError", "ToolError"] and run.errors[0].role == "calculator"
    tool_steps = [s for s in run.iterations[0].steps if s.phase == "tool"]
    assert tool_steps[0].output["status"] == "error" and tool_steps[0].error is not None
    assert run.info["metadata"] == {"sources": ["calculator"], "suggestions": ["more?"]}
    assert run.info["planning_stop"] == "no_tool_calls"
    assert "-> 42" in m.prompts[3] and "Write the final answer" in m.prompts[3]  # synthesis sees every round
    assert Run.model_validate_json(run.model_dump_json()) == run


def test_max_iterations_ends_the_loop_and_synthesis_still_runs() -> None:
    def reply(messages: list[dict[str, Any]]) -> str:
        return plan(("calculator", "2+2")) if is_planning(messages) else answer("four")

    m = pl.scripted("pes-max", respond=reply)
    run = run_pes({"id": "t", "prompt": "Add 2 and 2", "goal": "a number"}, {"model": m.name, "max_iterations": 2})
    assert run.stop_reason == "max_iterations" and len(run.iterations) == 2 and run.final_output == "four"
    assert [it.decision for it in run.iterations] == ["continue", "synthesize"]
    assert all(it.average == 10.0 for it in run.iterations)
    assert "Guidance on a good answer: a number" in m.prompts[0] and len(m.requests) == 3


SEED_OBSERVATIONS = {
    "INTENT",
    "TITLE",
    "PLAN",
    "THOUGHTS",
    "TOOL_CALL",
    "TOOL_EXECUTION",
    "SYNTHESIS",
    "ERROR",
    "FINAL_RESPONSE",
    "STATE_UPDATE",
}
"""The design document's observation types, plus its LLM_STREAM_* family."""
SEED_TOKEN_KINDS = {
    "AGENT_THOUGHT_LLM_THINKING",
    "AGENT_THOUGHT_LLM_RESPONSE",
    "FINAL_SYNTHESIS_LLM_THINKING",
    "FINAL_SYNTHESIS_LLM_RESPONSE",
}


def test_every_observation_type_of_the_design_is_recorded_and_emitted() -> None:
    m = pl.scripted("pes-obs", [plan(("calculator", "1/0")), plan(), answer("cannot divide by zero")])
    events = EventList(tokens=True)
    run = run_pes("1/0?", PESConfig(model=m.name), on_event=events)
    kinds = [o["type"] for o in run.info["observations"]]
    assert SEED_OBSERVATIONS <= set(kinds)
    assert {k for k in kinds if k.startswith("LLM_STREAM_")} == {
        "LLM_STREAM_START",
        "LLM_STREAM_METADATA",
        "LLM_STREAM_END",
    }
    assert {t.value for t in ObservationType} == SEED_OBSERVATIONS | {
        "LLM_STREAM_START",
        "LLM_STREAM_METADATA",
        "LLM_STREAM_END",
        "LLM_STREAM_ERROR",
    }
    assert kinds[:5] == ["LLM_STREAM_START", "LLM_STREAM_METADATA", "LLM_STREAM_END", "TITLE", "INTENT"]
    assert kinds[-3:] == ["SYNTHESIS", "FINAL_RESPONSE", "STATE_UPDATE"]
    emitted = [e for e in events if e.kind == "observation"]
    assert [e.data["type"] for e in emitted] == kinds
    call = next(o for o in run.info["observations"] if o["type"] == "TOOL_CALL")
    assert call["content"] == {"tool": "calculator", "input": "1/0"} and call["iteration"] == 1
    error = next(o for o in run.info["observations"] if o["type"] == "ERROR")
    assert error["content"]["tool"] == "calculator" and "division by zero" in error["content"]["message"]
    final = next(o for o in run.info["observations"] if o["type"] == "FINAL_RESPONSE")
    assert final["content"] == "cannot divide by zero"
    state = run.info["observations"][-1]["content"]
    assert state == {"thread_id": "default", "title": "Sums", "turn": 1, "history_messages": 2}
    meta = next(o for o in run.info["observations"] if o["type"] == "LLM_STREAM_METADATA")
    assert meta["content"]["stage"] == "planning" and meta["content"]["input_tokens"] > 0
    tokens = [e for e in events if e.kind == "token"]
    assert {e.data["token_type"] for e in tokens} == {"AGENT_THOUGHT_LLM_RESPONSE", "FINAL_SYNTHESIS_LLM_RESPONSE"}
    assert {k for pair in TOKEN_KINDS.values() for k in pair} == SEED_TOKEN_KINDS
    text = "".join(e.data["text"] for e in tokens if e.data["stage"] == "synthesis")
    assert text == answer("cannot divide by zero")
    assert {"tool_call", "tool_result", "run_started", "run_finished"} <= set(events.kinds())
    json.dumps(run.info)  # JSON-safe


def test_thinking_tokens_are_told_apart_from_response_tokens() -> None:
    thinking = "<think>I need the calculator? No: 2+2 is 4.</think>"
    m = pl.scripted("pes-think", [thinking + plan(), "<think>say it</think>" + answer("4")])
    events = EventList(tokens=True)
    run = run_pes("2+2?", PESConfig(model=m.name), on_event=events)
    assert run.final_output == "4" and run.stop_reason == "no_tool_calls"
    by_kind: dict[str, str] = {}
    for e in events:
        if e.kind == "token":
            by_kind[e.data["token_type"]] = by_kind.get(e.data["token_type"], "") + e.data["text"]
    assert by_kind["AGENT_THOUGHT_LLM_THINKING"] == "I need the calculator? No: 2+2 is 4."
    assert by_kind["AGENT_THOUGHT_LLM_RESPONSE"] == plan()
    assert by_kind["FINAL_SYNTHESIS_LLM_THINKING"] == "say it"
    assert by_kind["FINAL_SYNTHESIS_LLM_RESPONSE"] == answer("4")
    raw = run.info["execution_steps"][0]["planning_context"]["raw_planning_text"]
    assert raw == thinking + plan()  # the raw planning text is kept on success


def test_system_prompts_resolve_call_then_thread_then_instance() -> None:
    def reply(messages: list[dict[str, Any]]) -> str:
        return plan() if is_planning(messages) else answer("ok")

    m = pl.scripted("pes-sys", respond=reply)
    agent = PESAgent("a", Persona(planning="INSTANCE-PLAN", synthesis="INSTANCE-SYNTH"), config=PESConfig(model=m.name))
    agent.process("q1", thread_id="t1")
    agent.set_thread("t1", persona=Persona(planning="THREAD-PLAN"))
    run2 = agent.process("q2", thread_id="t1")
    run3 = agent.process("q3", thread_id="t1", persona=Persona(planning="CALL-PLAN", synthesis="CALL-SYNTH"))
    run4 = agent.process("q4", thread_id="other")
    systems = [system_of(r) for r in m.requests]
    assert systems == [
        "INSTANCE-PLAN",
        "INSTANCE-SYNTH",
        "THREAD-PLAN",
        "INSTANCE-SYNTH",
        "CALL-PLAN",
        "CALL-SYNTH",
        "INSTANCE-PLAN",
        "INSTANCE-SYNTH",
    ]
    assert run2.info["system_prompt_source"] == {"planning": "thread", "synthesis": "instance"}
    assert run3.info["system_prompt_source"] == {"planning": "call", "synthesis": "call"}
    assert run4.info["system_prompt_source"] == {"planning": "instance", "synthesis": "instance"}
    bare = PESAgent("b", config=PESConfig(model=m.name)).process("q5")
    assert bare.info["system_prompt_source"] == {"planning": "default", "synthesis": "default"}
    assert "plans before answering" in system_of(m.requests[-2])


def test_thread_history_is_kept_across_calls_and_trimmed() -> None:
    answers = iter(["first answer", "second answer", "third answer"])

    def reply(messages: list[dict[str, Any]]) -> str:
        return plan() if is_planning(messages) else answer(next(answers))

    m = pl.scripted("pes-hist", respond=reply)
    agent = PESAgent("a", config=PESConfig(model=m.name, history_limit=2))
    agent.process("first question")
    assert agent.history("default") == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
    ]
    agent.process("second question")
    second_planning = m.prompts[2]
    assert "user: first question\nassistant: first answer" in second_planning
    assert [h["content"] for h in agent.history("default")] == ["second question", "second answer"]
    agent.process("third question")
    assert "first question" not in m.prompts[4] and "user: second question" in m.prompts[4]
    assert "(no earlier messages)" in m.prompts[0]
    agent.set_thread("default", history_limit=1)
    assert agent.history("default") == [{"role": "assistant", "content": "third answer"}]
    assert agent.history("elsewhere") == []


def test_delegation_returns_the_other_agents_answer(tmp_path: Path) -> None:
    helper = pl.scripted("pes-helper", [plan(), answer("Paris is the capital of France.")])
    boss = pl.scripted(
        "pes-boss", [plan(("delegate", {"agent": "geo", "task": "Capital of France?"})), plan(), answer("Paris.")]
    )
    directory = AgentDirectory()
    lead = directory.register(PESAgent("lead", config=PESConfig(model=boss.name, a2a_dir=str(tmp_path))))
    directory.register(PESAgent("geo", config=PESConfig(model=helper.name)))
    run = lead.process("Where is the French government seated?")
    assert "- delegate:" in boss.prompts[0] and "Agents: geo" in boss.prompts[0]
    assert helper.prompts[0].count("Capital of France?") == 1
    assert "geo answered: Paris is the capital of France." in boss.prompts[1]
    assert run.final_output == "Paris." and run.iterations[0].metrics["tool_successes"] == 1
    task = run.info["a2a_tasks"][0]
    assert task["status"] == "completed" and task["result"] == "Paris is the capital of France."
    assert task["thread_id"] == f"a2a:lead:{task['task_id']}" and task["iteration"] == 1
    assert run.info["execution_steps"][0]["a2a_tasks"] == [task]
    persisted = A2ATaskRepository.load(run.info["a2a_tasks_file"])
    assert persisted[0]["status"] == "completed" and persisted[0]["polls"] >= 1
    assert Path(run.info["a2a_tasks_file"]).parent == tmp_path
    assert "delegate" in run.info["tools"]
    assert "Agents: lead" in helper.prompts[0]  # a delegated agent may delegate again (no depth in the seed)


def test_delegation_by_task_type_in_parallel_each_in_its_own_thread(tmp_path: Path) -> None:
    # the two delegations overlap: each answer waits at a barrier until the other one is being answered too (run
    # one after the other, the first would wait alone and break it), however slow the machine
    both = threading.Barrier(2, timeout=60)
    threads: set[str] = set()

    def slow_answer(text: str) -> Any:
        def reply(messages: list[dict[str, Any]]) -> str:
            if is_planning(messages):
                return plan()
            threads.add(threading.current_thread().name)
            both.wait()
            return answer(text)

        return reply

    pl.scripted("pes-geo2", respond=slow_answer("Paris"))
    pl.scripted("pes-math2", respond=slow_answer("42"))
    boss = pl.scripted(
        "pes-boss2",
        [
            plan(
                ("delegate", {"task_type": "geography", "task": "Capital of France?"}),
                ("delegate", {"task_type": "math", "task": "6*7?"}),
                ("delegate", {"task_type": "poetry", "task": "A haiku"}),
            ),
            plan(),
            answer("Paris, 42"),
        ],
    )
    directory = AgentDirectory()
    lead = directory.register(
        PESAgent("lead", config=PESConfig(model=boss.name, a2a_dir=str(tmp_path), delegate_poll_s=0.05))
    )
    geo = directory.register(PESAgent("geo", config=PESConfig(model="fake/pes-geo2"), task_types=["geography"]))
    directory.register(PESAgent("calc", config=PESConfig(model="fake/pes-math2"), task_types=["math"]))
    run = lead.process("Capital and product")
    assert not both.broken and len(threads) == 2  # both answered at once, each in its own thread
    tasks = run.info["a2a_tasks"]
    assert [(t["agent"], t["status"]) for t in tasks] == [("geo", "completed"), ("calc", "completed")]
    assert "'poetry' is not one of ['geography', 'math']" in boss.prompts[1]  # refused by the tool's schema
    assert run.iterations[0].metrics == {"tool_calls": 3, "tool_successes": 2, "tool_errors": 1}
    with pytest.raises(
        pl.PromptlabError, match="no agent handles task type 'poetry'; known task types: geography, math"
    ):
        directory.discover("poetry", exclude="lead")
    assert len({t["thread_id"] for t in tasks[:2]}) == 2  # no shared delegated thread
    assert geo.history(tasks[0]["thread_id"])[0]["content"] == "Capital of France?"
    assert "Agents you can delegate to:\n- geo (task types: geography)\n- calc (task types: math)" in boss.prompts[0]


def test_a_delegate_that_takes_too_long_times_out(tmp_path: Path) -> None:
    release, finished = threading.Event(), threading.Event()

    def slow(messages: list[dict[str, Any]]) -> str:
        release.wait(30)  # held until the lead has returned
        finished.set()
        return plan()

    pl.scripted("pes-slow", [slow, answer("late")])
    boss = pl.scripted(
        "pes-impatient", [plan(("delegate", {"agent": "slow", "task": "think hard"})), plan(), answer("gave up")]
    )
    directory = AgentDirectory()
    lead = directory.register(
        PESAgent("lead", config=PESConfig(model=boss.name, delegate_timeout_s=0.1, a2a_dir=str(tmp_path)))
    )
    directory.register(PESAgent("slow", config=PESConfig(model="fake/pes-slow")))
    run = lead.process("Ask the slow one")
    assert not finished.is_set()  # the lead gave up while the delegate was still working, not after it
    release.set()
    assert "ERROR: agent 'slow' did not finish within 0.1 s" in boss.prompts[1]
    assert run.iterations[0].metrics == {"tool_calls": 1, "tool_successes": 0, "tool_errors": 1}
    assert run.info["a2a_tasks"][0]["status"] == "timeout" and run.final_output == "gave up"
    assert A2ATaskRepository.load(run.info["a2a_tasks_file"])[0]["status"] == "timeout"
    bad = pl.scripted("pes-wrong-agent", [plan(("delegate", {"agent": "nobody", "task": "x"})), plan(), answer("no")])
    lead.config = PESConfig(model=bad.name, a2a_dir=str(tmp_path))
    lead.process("Ask nobody")
    assert "'nobody' is not one of ['slow']" in bad.prompts[1]


def test_judge_grade_is_recorded_or_missing_when_unparseable() -> None:
    m = pl.scripted("pes-judged", [plan(), answer("fine")])
    critic = pl.scripted("pes-critic", [json.dumps({"justification": "complete", "score": 8})])
    run = run_pes("q", PESConfig(model=m.name, critic_model=critic.name, judge=True))
    assert [(s.score, s.justification, s.judge) for s in run.final_scores] == [(8.0, "complete", critic.name)]
    assert run.models["judge"] == critic.name and run.final[-1].role == "judge"
    m2 = pl.scripted("pes-judged2", [plan(), answer("fine")])
    garbled = pl.scripted("pes-garbled", respond=lambda msgs: "I would say about eight out of ten")
    run = run_pes("q", PESConfig(model=m2.name, critic_model=garbled.name, judge=True))
    assert len(run.final_scores) == 1 and run.final_scores[0].score is None
    assert "judge output unusable" in run.final_scores[0].justification
    assert run.errors[-1].kind == "ParseError" and run.errors[-1].role == "judge"
    assert run.final_output == "fine" and run.stop_reason == "no_tool_calls"
    assert [o["type"] for o in run.info["observations"][-2:]] == ["ERROR", "STATE_UPDATE"]


def test_planning_and_synthesis_failures_are_recorded() -> None:
    m = pl.scripted("pes-broken", respond=lambda msgs: "not json at all")
    run = run_pes("q", PESConfig(model=m.name))
    assert run.stop_reason == "error" and run.final_output is None and run.info["planning_stop"] == "error"
    assert [e.kind for e in run.errors] == ["ParseError", "ParseError"]
    assert [o["type"] for o in run.info["observations"] if o["type"] in ("ERROR", "LLM_STREAM_ERROR")] == [
        "LLM_STREAM_ERROR",
        "ERROR",
        "LLM_STREAM_ERROR",
        "ERROR",
    ]
    assert run.iterations[0].decision == "synthesize"


def test_an_answer_after_a_planning_failure_in_round_two_is_not_an_error() -> None:
    m = pl.scripted("pes-late", [plan(("calculator", "6*7")), "not json", "still not", "nope", answer("42")])
    run = run_pes("6*7?", PESConfig(model=m.name))
    assert run.final_output == "42" and run.stop_reason == "planning_error"
    assert run.info["planning_stop"] == "error" and len(run.iterations) == 2
    assert "-> 42" in m.prompts[-1]  # synthesis saw round 1's result


def test_a_plan_with_more_tool_calls_than_the_schema_offers_is_still_run() -> None:
    calls = [("calculator", f"{k}+{k}") for k in range(1, 6)]
    m = pl.scripted("pes-many", [plan(*calls), plan(), answer("done")])
    run = run_pes("Add them", PESConfig(model=m.name))
    assert run.stop_reason == "no_tool_calls" and run.iterations[0].metrics["tool_calls"] == 5
    assert all(f"-> {2 * k}" in m.prompts[1] for k in range(1, 6))
    long_title = json.dumps({"title": "T" * 500, "intent": "i", "plan": "p", "thoughts": "t", "tool_calls": []})
    m2 = pl.scripted("pes-long", [long_title, answer("x" * 5000)])
    run2 = run_pes("q", PESConfig(model=m2.name))
    assert run2.final_output == "x" * 5000 and run2.info["observations"][3]["content"] == "T" * 500


def test_turns_of_a_thread_have_distinct_ids_and_share_the_threads_workspace(tmp_path: Path) -> None:
    m = pl.scripted(
        "pes-turns",
        [
            plan(("write_file", {"path": "note.txt", "content": "hello"})),
            plan(),
            answer("saved"),
            plan(("read_file", "note.txt")),
            plan(),
            answer("hello"),
        ],
    )
    agent = PESAgent(
        "a", tools=["write_file", "read_file"], config=PESConfig(model=m.name, workspace_base=str(tmp_path))
    )
    first = agent.process("same question")
    second = agent.process("same question")
    assert first.run_id != second.run_id and (first.info["turn"], second.info["turn"]) == (1, 2)
    assert first.info["workspace"] == second.info["workspace"]
    assert "-> hello" in m.prompts[4] and second.final_output == "hello"  # turn 2 read turn 1's file
    other = PESAgent(
        "b",
        Persona(planning="Be brief."),
        tools=["write_file"],
        config=PESConfig(model=m.name, workspace_base=str(tmp_path)),
    )
    assert other.thread("default").workspace is None
    plain = PESAgent("a", config=PESConfig(model="fake/auto")).process("q")
    brief = PESAgent("a", Persona(planning="Be brief."), config=PESConfig(model="fake/auto")).process("q")
    assert plain.run_id != brief.run_id  # the persona is recorded by its system prompts' hashes
    assert plain.info["system_prompt_hashes"]["planning"] != brief.info["system_prompt_hashes"]["planning"]


def test_thread_level_enabled_tools_and_provider_config() -> None:
    m = pl.scripted("pes-thread-cfg", respond=lambda msgs: plan() if is_planning(msgs) else answer("ok"))
    other = pl.scripted("pes-thread-model", respond=lambda msgs: plan() if is_planning(msgs) else answer("other"))
    agent = PESAgent("a", config=PESConfig(model=m.name))
    agent.set_thread("t", enabled_tools=["calculator"], provider_config={"model": other.name, "temperature": 0.3})
    run = agent.process("q", thread_id="t")
    assert run.final_output == "other" and run.info["tools"] == ["calculator"]
    assert run.config["temperature"] == 0.3 and other.requests[0]["params"]["temperature"] == 0.3
    assert "search_docs" not in other.prompts[0]
    assert agent.process("q", thread_id="u").final_output == "ok"
    with pytest.raises(ValueError, match="provider_config: unknown field.*'tools'"):
        agent.set_thread("t", provider_config={"tools": []})
    with pytest.raises(ValueError, match="enabled_tools: \\['shell'\\] not among"):
        agent.set_thread("t", enabled_tools=["shell"])


def test_registered_by_name_with_workspace_tools(tmp_path: Path) -> None:
    assert get_loop("pes").config_cls is PESConfig
    m = pl.scripted(
        "pes-ws",
        [plan(("write_file", {"path": "n.txt", "content": "hi"}), ("read_file", "../x")), plan(), answer("done")],
    )
    run = run_loop(
        "pes", "note it", {"model": m.name, "tools": ["write_file", "read_file"], "workspace_base": str(tmp_path)}
    )
    ws = Path(run.info["workspace"])
    assert ws.parent == tmp_path.resolve() and ws.name == "pes-default-1" and (ws / "n.txt").read_text() == "hi"
    assert "refused path '../x'" in m.prompts[1]
    with pytest.raises(ValueError, match="unknown tool.*teleport"):
        PESConfig(tools=["teleport"])
    with pytest.raises(ValueError, match="unknown role"):
        PESConfig(prompts={"critic": "x"})


def test_prompt_override_per_role() -> None:
    m = pl.scripted("pes-override", [plan(), answer("ok")])
    run_pes("hello", PESConfig(model=m.name, prompts={"planner": "PLAN FOR: {query} with {tools}"}))
    assert m.prompts[0].startswith("PLAN FOR: hello with - calculator")


def test_a_replay_from_the_cache_is_comparable(tmp_path: Path) -> None:
    m = pl.scripted("pes-replay", [plan(("calculator", "2+3"), ("search_docs", "few-shot")), plan(), answer("5")])
    cfg = PESConfig(model=m.name, tools=["calculator", "search_docs", "shell"], workspace_base=str(tmp_path))
    first = run_pes("2+3?", cfg)
    again = run_pes("2+3?", cfg)  # the script is used up: every call must come from the cache
    assert again.totals.cache_hits == again.totals.calls == 3 and again.comparable() == first.comparable()


@pytest.mark.local_model
def test_a_short_real_run_on_the_local_model(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    run = run_pes(
        "What is 12 times 7?",
        PESConfig(model="local/smollm2", max_iterations=1, max_tokens=200, tools=["calculator"]),
        cache=tmp_path,
        settings=pl.Settings(parse_attempts=1),
    )  # one try per call keeps it short
    elapsed = time.perf_counter() - t0
    # a run whose calls all failed has stop reason "error" and no answer: that fails here
    assert run.stop_reason in {"no_tool_calls", "max_iterations"}, (run.stop_reason, run.errors)
    assert len(run.iterations) == 1 and run.totals.calls >= 2 and run.final_output
    assert Run.model_validate_json(run.model_dump_json()) == run
    print(f"PES local run: {elapsed:.1f} s, stop {run.stop_reason}, output {run.final_output!r}")


# Issue 18 ---------------------------------------------------------------------------------------------
def test_a_second_identical_run_keeps_the_first_runs_delegated_task_records(tmp_path: Path) -> None:
    """Bug: run ids were a hash of the run's inputs, so an identical second run overwrote
    `<a2a_dir>/<run_id>.json` and the first run's delegated tasks were gone."""
    pl.scripted("pes-twice-helper", [plan(), answer("Paris")])
    boss = pl.scripted(
        "pes-twice-boss", [plan(("delegate", {"agent": "geo", "task": "Capital of France?"})), plan(), answer("Paris.")]
    )

    def one_run() -> Run:
        directory = AgentDirectory()
        lead = directory.register(PESAgent("lead", config=PESConfig(model=boss.name, a2a_dir=str(tmp_path))))
        directory.register(PESAgent("geo", config=PESConfig(model="fake/pes-twice-helper")))
        return lead.process("Where is the French government seated?")

    first, second = one_run(), one_run()
    assert first.run_id != second.run_id
    assert first.info["a2a_tasks_file"] != second.info["a2a_tasks_file"]
    for run in (first, second):
        (task,) = A2ATaskRepository.load(run.info["a2a_tasks_file"])
        assert task["task_id"].startswith(run.run_id) and task["status"] == "completed"
    assert second.totals.cache_hits == second.totals.calls  # the second run replayed every call


def test_two_runs_never_share_a_workspace_even_when_they_claim_one_at_the_same_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: `fresh_workspace_name` claimed `<stem>-n`, then `Workspace.for_run` deleted and re-made it; a second
    run claiming the same name in between shared the folder and one run's file was overwritten. The timing is
    forced: the second run runs whole while the first is opening its workspace (every PES sweep run has the
    stem `pes-default`)."""
    import threading

    from promptlab.tools.workspace import Workspace

    def writer(text: str) -> Any:
        return pl.scripted(
            f"pes-ws-{text}", [plan(("write_file", {"path": "note.txt", "content": text})), plan(), answer(text)]
        )

    first_model, second_model = writer("first"), writer("second")
    cfg = {"tools": ["write_file"], "workspace_base": str(tmp_path)}
    runs: dict[str, Run] = {}
    original = Workspace.__init__

    def second_run_meanwhile(self: Workspace, *args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(Workspace, "__init__", original)  # only the first run's opening is interrupted
        t = threading.Thread(target=lambda: runs.update(second=run_pes("note", {**cfg, "model": second_model.name})))
        t.start()
        t.join()
        original(self, *args, **kwargs)

    monkeypatch.setattr(Workspace, "__init__", second_run_meanwhile)
    runs["first"] = run_pes("note", {**cfg, "model": first_model.name})
    first, second = Path(runs["first"].info["workspace"]), Path(runs["second"].info["workspace"])
    assert first != second
    assert (first / "note.txt").read_text() == "first" and (second / "note.txt").read_text() == "second"


def test_the_planner_and_the_synthesizer_see_every_tool_result_uncut() -> None:
    """The design document gives the planner the previous steps and the synthesizer the complete execution
    history: no tool result is cut (`result_chars` bounds them)."""
    from promptlab.tools.registry import Tool

    long = "".join(f"line {k} of a long listing\n" for k in range(160))  # about 4,000 characters
    big = Tool("listing", "A long listing.", lambda args: long, input_schema={"type": "object"})

    def one_run(name: str, **kw: Any) -> Any:
        m = pl.scripted(name, [plan(("listing", {})), plan(), answer("done")])
        PESAgent("a", tools=[big], config=PESConfig(model=m.name, **kw)).process("List it")
        return m

    m = one_run("pes-uncut")
    assert long.strip() in m.prompts[1] and long.strip() in m.prompts[2]  # planner round 2, synthesizer
    bounded = one_run("pes-cut", result_chars=200)
    assert long.strip() not in bounded.prompts[2] and "more characters]" in bounded.prompts[2]


def test_a_delegated_agent_can_delegate_further(tmp_path: Path) -> None:
    """The design document sets no delegation depth; `max_delegation_depth` bounds it."""

    def agents(tag: str, **kw: Any) -> PESAgent:
        directory = AgentDirectory()
        top = pl.scripted(
            f"{tag}-top",
            [plan(("delegate", {"agent": "middle", "task": "Ask the expert"})), plan(), answer("top: done")],
        )
        middle = pl.scripted(
            f"{tag}-middle",
            respond=lambda msgs: (
                plan(("delegate", {"agent": "expert", "task": "The answer?"}))
                if is_planning(msgs) and "Round 1:" not in msgs[-1]["content"]
                else plan()
                if is_planning(msgs)
                else answer(
                    "middle relayed: "
                    + ("expert says 42" if "expert answered: 42" in msgs[-1]["content"] else "no expert")
                )
            ),
        )
        expert = pl.scripted(f"{tag}-expert", [plan(), answer("42")])
        lead = directory.register(PESAgent("top", config=PESConfig(model=top.name, a2a_dir=str(tmp_path), **kw)))
        for name, m in (("middle", middle), ("expert", expert)):
            directory.register(PESAgent(name, config=PESConfig(model=m.name, a2a_dir=str(tmp_path), **kw)))
        return lead

    run = agents("pes-deep").process("Find the answer")
    assert run.info["a2a_tasks"][0]["result"] == "middle relayed: expert says 42"
    capped = agents("pes-capped", max_delegation_depth=1).process("Find the answer")
    assert capped.info["a2a_tasks"][0]["result"] == "middle relayed: no expert"


def test_the_sync_process_returns_promptly_after_a_delegation_timeout(tmp_path: Path) -> None:
    """Bug: `process()` returned only when the orphaned in-process model call of the timed-out delegate had
    ended, because `asyncio.run` waits for its worker threads."""
    import threading

    release, finished = threading.Event(), threading.Event()

    def slow(messages: list[dict[str, Any]]) -> str:  # an in-process call that outlives the delegation's wait
        release.wait(60)
        finished.set()
        return plan()

    pl.scripted("pes-orphan", respond=slow)
    boss = pl.scripted(
        "pes-orphan-boss", [plan(("delegate", {"agent": "slow", "task": "think"})), plan(), answer("moved on")]
    )
    directory = AgentDirectory()
    lead = directory.register(
        PESAgent("lead", config=PESConfig(model=boss.name, delegate_timeout_s=0.2, a2a_dir=str(tmp_path)))
    )
    directory.register(PESAgent("slow", config=PESConfig(model="fake/pes-orphan")))
    try:
        run = lead.process("Ask the slow one", cache=False)
        assert not finished.is_set()  # process() returned while the orphaned call was still running
        assert run.final_output == "moved on" and run.info["a2a_tasks"][0]["status"] == "timeout"
    finally:
        release.set()
