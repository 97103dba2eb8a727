"""PCEE: placeholder piping, evaluation, self-correction, the retry budget, and the workspace through the loop."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import promptlab as pl
from promptlab.loops.pcee.config import PCEEConfig
from promptlab.loops.pcee.loop import run_pcee
from promptlab.loops.pcee.schemas import PlaceholderError, fill_placeholders
from promptlab.loops.registry import get_loop, run_loop
from promptlab.record import Run


def step(n: int, tool: str, tool_input: Any, instruction: str = "do it") -> dict[str, Any]:
    return {"step_id": n, "instruction": instruction, "tool_name": tool, "tool_input": tool_input}


def plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"plan": list(steps)})


def verdict(ok: bool, reason: str = "checked") -> str:
    return json.dumps({"verdict": "success" if ok else "failure", "reason": reason})


def models(name: str, planner: list[Any], evaluator: Any, corrector: tuple[Any, ...] = ()) -> tuple[Any, Any, Any]:
    """Scripted planner, evaluator and corrector; `evaluator` is a reply function of the messages."""
    return (
        pl.scripted(f"{name}-planner", planner),
        pl.scripted(f"{name}-eval", respond=evaluator),
        pl.scripted(f"{name}-fix", list(corrector)),
    )


def config(tmp_path: Path, p: Any, e: Any, c: Any, *, controller: Any = None, **kw: Any) -> PCEEConfig:
    roles = {"evaluator": e.name, "corrector": c.name} | ({"controller": controller.name} if controller else {})
    return PCEEConfig(model=p.name, role_models=roles, workspace_base=str(tmp_path / "ws"), **kw)


def extracts(name: str, *values: str) -> Any:
    """A scripted controller that extracts `values` in turn (the last repeats)."""
    return pl.scripted(f"{name}-controller", [json.dumps({"value": v}) for v in values])


def succeed(messages: list[dict[str, Any]]) -> str:
    return verdict(True)


def by_exit_code(messages: list[dict[str, Any]]) -> str:
    text = messages[-1]["content"]
    return verdict("exit code: 0," in text or "exit code:" not in text, "judged by the exit code")


def judge_errors(messages: list[dict[str, Any]]) -> str:
    """An evaluator that fails a step whose tool reported an error or a non-zero exit code."""
    text = messages[-1]["content"]
    return verdict(
        "the tool failed" not in text and ("exit code: 0," in text or "exit code:" not in text),
        "judged by the tool's result",
    )


# controller ----------------------------------------------------------------------------------------
def test_fill_placeholders_recurses_and_leaves_other_braces_alone() -> None:
    tool_input = {
        "path": "v_{step_1_output}.txt",
        "content": "x = {version}\n{step_2_output}",
        "list": ["{step_1_output}", 3, {"deep": "{step_2_output}!"}],
        "n": 7,
    }
    filled = fill_placeholders(tool_input, {1: "1.5", 2: "two"})
    assert filled == {
        "path": "v_1.5.txt",
        "content": "x = {version}\ntwo",
        "list": ["1.5", 3, {"deep": "two!"}],
        "n": 7,
    }
    assert tool_input["path"] == "v_{step_1_output}.txt"  # not mutated
    assert fill_placeholders("echo {step_1_output}{step_1_output}", {1: "a"}) == "echo aa"
    assert fill_placeholders("{step_x_output} {}", {}) == "{step_x_output} {}"
    with pytest.raises(PlaceholderError, match=r"\{step_3_output\} refers to step 3.*steps with output: 1, 2"):
        fill_placeholders({"a": ["{step_3_output}"]}, {1: "a", 2: "b"})
    with pytest.raises(PlaceholderError, match="steps with output: none"):
        fill_placeholders("{step_1_output}", {})


# the loop ------------------------------------------------------------------------------------------
def test_placeholders_pipe_step_outputs_into_later_steps(tmp_path: Path) -> None:
    p, e, c = models(
        "pipe",
        [
            plan(
                step(1, "shell", "echo 1.5.1", "find the version"),
                step(
                    2,
                    "write_file",
                    {"path": "v.py", "content": "version = '{step_1_output}'\n"},
                    "write a script holding the version",
                ),
                step(3, "shell", "cat v.py", "show the script"),
            )
        ],
        succeed,
    )
    run = run_pcee("Write the version into a script", config(tmp_path, p, e, c, piping="paste"))
    ws = Path(run.info["workspace"])
    assert (ws / "v.py").read_text() == "version = '1.5.1'\n"
    assert run.stop_reason == "plan_complete" and run.final_output == "version = '1.5.1'"
    assert [it.metrics["step_id"] for it in run.iterations] == [1, 2, 3]
    assert [it.decision for it in run.iterations] == ["next_step", "next_step", "stop"]
    assert [it.average for it in run.iterations] == [1.0, 1.0, 1.0]
    assert run.iterations[0].metrics == {"step_id": 1, "retries": 0, "tool": "shell", "kind": "plan", "exit_code": 0}
    assert (
        run.iterations[1].candidate
        == """write_file({"content": "version = '1.5.1'\\n", "path": "v.py"}) -> \
wrote 18 bytes to v.py"""
    )
    assert run.iterations[0].scores[0].criterion == "verdict" and run.iterations[0].scores[0].judge == e.name
    assert [s["step_id"] for s in run.info["plan"]] == [1, 2, 3]
    assert "Step instruction: write a script holding the version" in e.prompts[1]
    assert ws.parent == (tmp_path / "ws").resolve() and ws.name == f"{run.run_id}-1"
    assert Run.model_validate_json(run.model_dump_json()) == run and not run.errors


def test_a_failed_step_is_corrected_and_retried(tmp_path: Path) -> None:
    fix = plan(step(1, "write_file", {"path": "data.txt", "content": "42"}, "create the data file"))
    p, e, c = models("fix", [plan(step(1, "shell", "cat data.txt", "print the data file"))], by_exit_code, (fix,))
    run = run_pcee("Print the data", config(tmp_path, p, e, c))
    assert run.stop_reason == "plan_complete" and run.final_output == "42"
    its = run.iterations
    assert [(it.metrics["kind"], it.metrics["retries"], it.average, it.decision) for it in its] == [
        ("plan", 0, 0.0, "correct"),
        ("fix", 1, 1.0, "next_step"),
        ("retry", 1, 1.0, "stop"),
    ]
    assert its[0].metrics["exit_code"] == 1 and its[1].metrics["fix_for"] == 1
    assert its[0].steps[-1].role == "corrector"  # the fix plan is asked for within the failed iteration
    assert "Why it failed: judged by the exit code" in c.prompts[0] and "cat data.txt" in c.prompts[0]
    assert run.info["retries_used"] == 1 and run.info["corrections"][0]["fix_plan"][0]["tool_name"] == "write_file"
    assert run.best_score == 1.0


def test_the_retry_budget_runs_out_and_the_run_stops(tmp_path: Path) -> None:
    fixes = (plan(step(1, "shell", "true", "try something")), plan(step(1, "shell", "true", "try harder")))
    p, e, c = models(
        "budget", [plan(step(1, "shell", "exit 3", "succeed"), step(2, "shell", "echo never"))], by_exit_code, fixes
    )
    run = run_pcee("Do the impossible", config(tmp_path, p, e, c, retry_budget=2))
    assert run.stop_reason == "failed_step" and run.final_output is None
    assert [(it.metrics["kind"], it.decision) for it in run.iterations] == [
        ("plan", "correct"),
        ("fix", "next_step"),
        ("retry", "correct"),
        ("fix", "next_step"),
        ("retry", "stop"),
    ]
    assert run.info["failed_step"]["step_id"] == 1 and run.info["failed_step"]["iteration"] == 5
    assert "retry budget (2) is spent" in (run.iterations[-1].reason or "")
    assert run.info["retries_used"] == 2 and len(c.requests) == 2
    assert all(it.metrics["step_id"] != 2 for it in run.iterations if it.metrics["kind"] != "fix")
    p0, e0, c0 = models("budget0", [plan(step(1, "shell", "exit 3"))], by_exit_code)
    run0 = run_pcee("Fail fast", config(tmp_path, p0, e0, c0, retry_budget=0))
    assert run0.stop_reason == "failed_step" and len(run0.iterations) == 1 and not c0.requests


def test_a_failed_correction_is_not_followed_by_a_retry(tmp_path: Path) -> None:
    # the seed retries the failed step only after a successful correction
    fixes = (
        plan(step(1, "shell", "exit 1", "a fix that fails"), step(2, "shell", "true", "skipped")),
        plan(step(1, "shell", "true", "a fix that works")),
    )
    p, e, c = models("nofixretry", [plan(step(1, "shell", "test -f fixed || exit 3", "succeed"))], by_exit_code, fixes)
    run = run_pcee("Needs a fix", config(tmp_path, p, e, c, retry_budget=2))
    assert [(it.metrics["kind"], it.decision) for it in run.iterations] == [
        ("plan", "correct"),
        ("fix", "correct"),
        ("fix", "next_step"),
        ("retry", "stop"),
    ]
    assert "correction 1 failed: fix step 1 failed" in (run.iterations[1].reason or "")
    assert [x["succeeded"] for x in run.info["corrections"]] == [False, True]
    assert run.stop_reason == "failed_step" and run.info["retries_used"] == 2


def test_an_unreadable_fix_plan_asks_again_without_retrying_the_step(tmp_path: Path) -> None:
    p, e, c = models(
        "unreadable",
        [plan(step(1, "shell", "exit 3", "succeed"))],
        by_exit_code,
        ("not json", plan(step(1, "shell", "true"))),
    )
    run = run_pcee("Fix me", config(tmp_path, p, e, c, retry_budget=2), settings=pl.Settings(parse_attempts=1))
    assert [(it.metrics["kind"], it.decision) for it in run.iterations] == [
        ("plan", "correct"),
        ("fix", "next_step"),
        ("retry", "stop"),
    ]
    assert [x["succeeded"] for x in run.info["corrections"]] == [False, True]
    assert "could not be read" in run.iterations[0].reason or "correction 1 failed" in run.iterations[0].reason
    # the second correction is a fresh draw (the next sample), not the cached unreadable reply
    assert [r["params"].get("seed") for r in c.requests] == [0, 1]
    assert any(st.role == "corrector" and st.error is not None for st in run.iterations[0].steps)


def test_the_corrector_is_not_asked_when_no_fix_and_retry_can_run(tmp_path: Path) -> None:
    p, e, c = models(
        "atcap",
        [plan(step(1, "shell", "true"), step(2, "shell", "exit 3"))],
        by_exit_code,
        (plan(step(1, "shell", "true")),),
    )
    run = run_pcee("Cap", config(tmp_path, p, e, c, retry_budget=2, max_iterations=3))
    assert run.stop_reason == "failed_step" and not c.requests  # named for what happened (#29 item 13)
    assert "too few for a fix and a retry" in (run.iterations[-1].reason or "")
    assert run.info["failed_step"]["step_id"] == 2


def test_a_forward_reference_in_the_plan_is_refused_when_the_plan_is_made(tmp_path: Path) -> None:
    bad = plan(step(1, "shell", "echo {step_2_output}"), step(2, "shell", "echo hi"))
    good = plan(step(1, "shell", "echo hi"), step(2, "shell", "echo {step_1_output}"))
    p, e, c = models("forward", [bad, good], succeed)
    run = run_pcee("Pipe", config(tmp_path, p, e, c, controller=extracts("forward", "hi")))
    assert run.stop_reason == "plan_complete" and run.final_output == "hi"
    assert "step 1 uses {step_2_output}" in p.requests[1]["messages"][-1]["content"]
    p2, e2, c2 = models("forward2", [bad], succeed)
    run2 = run_pcee("Pipe", config(tmp_path, p2, e2, c2), settings=pl.Settings(parse_attempts=1))
    assert run2.stop_reason == "error" and not run2.iterations and not e2.requests


def test_an_unknown_tool_in_the_plan_is_a_recorded_step_failure(tmp_path: Path) -> None:
    p, e, c = models("unknown", [plan(step(1, "teleport", {"to": "mars"}))], judge_errors)
    run = run_pcee("Go to Mars", config(tmp_path, p, e, c, retry_budget=0))
    assert run.stop_reason == "failed_step" and len(e.requests) == 1  # the evaluator saw the tool error
    assert "unknown tool 'teleport'" in e.prompts[0]
    score = run.iterations[0].scores[0]
    assert (score.score, score.judge) == (0.0, e.name)
    assert "known tools: write_file, read_file, list_files, shell, search, calculator" in e.prompts[0]
    assert run.errors[0].kind == "ToolError" and run.errors[0].role == "teleport"
    assert "unknown tool 'teleport'" in run.info["failed_step"]["reason"]


def test_a_placeholder_without_output_fails_in_the_controller(tmp_path: Path) -> None:
    # plans are checked for forward references when made; a fix step can still name a step without output
    p, e, c = models(
        "noout",
        [plan(step(1, "shell", "exit 3"), step(2, "shell", "echo 2"))],
        by_exit_code,
        (plan(step(1, "shell", "echo {step_2_output}")),),
    )
    run = run_pcee("Out of order", config(tmp_path, p, e, c, retry_budget=1))
    assert run.stop_reason == "failed_step" and len(e.requests) == 1  # no evaluator call for the fix step
    fix = run.iterations[1]
    assert fix.metrics["kind"] == "fix" and fix.steps[0].role == "controller"
    assert [e.kind for e in run.errors] == ["ToolError", "PlaceholderError"]  # step 1's exit 3, then the fix
    assert "refers to step 2, which has no output" in fix.scores[0].justification


@pytest.mark.parametrize(
    "tool, tool_input",
    [
        ("write_file", {"path": "../escape.txt", "content": "x"}),
        ("read_file", "/etc/passwd"),
        ("read_file", "a/../../x"),
        ("write_file", {"path": "/tmp/abs.txt", "content": "x"}),
        ("list_files", ".."),
    ],
)
def test_workspace_escapes_are_refused_through_the_loop(tmp_path: Path, tool: str, tool_input: Any) -> None:
    p, e, c = models("escape", [plan(step(1, tool, tool_input))], judge_errors)
    run = run_pcee("Escape", config(tmp_path, p, e, c, retry_budget=0))
    assert run.stop_reason == "failed_step" and "refused path" in run.info["failed_step"]["reason"]
    assert not (tmp_path / "ws" / "escape.txt").exists() and "refused path" in e.prompts[0]


def test_a_symlink_out_made_by_a_shell_step_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    p, e, c = models(
        "symlink",
        [
            plan(
                step(1, "shell", f"ln -s {outside} out", "make a link"),
                step(2, "read_file", "out/secret.txt", "read through it"),
                step(3, "write_file", {"path": "out/new.txt", "content": "x"}),
            )
        ],
        judge_errors,
    )
    run = run_pcee("Sneak out", config(tmp_path, p, e, c, retry_budget=0))
    assert run.stop_reason == "failed_step" and run.info["failed_step"]["step_id"] == 2
    assert "leaves the workspace" in run.info["failed_step"]["reason"] and "secret" not in (run.final_output or "")


def test_a_hung_shell_step_is_killed_and_fails(tmp_path: Path) -> None:
    p, e, c = models("hung", [plan(step(1, "shell", "sleep 60"))], by_exit_code)
    run = run_pcee("Wait forever", config(tmp_path, p, e, c, retry_budget=0, shell_timeout_s=0.5))
    assert run.stop_reason == "failed_step"
    out = run.iterations[0].steps[0].output["output"]
    assert out["timed_out"] is True and run.iterations[0].metrics["exit_code"] is None


def test_max_iterations_caps_the_executions(tmp_path: Path) -> None:
    p, e, c = models(
        "cap", [plan(step(1, "shell", "echo 1"), step(2, "shell", "echo 2"), step(3, "shell", "echo 3"))], succeed
    )
    run = run_pcee("Count", config(tmp_path, p, e, c, max_iterations=2))
    assert run.stop_reason == "max_iterations" and len(run.iterations) == 2 and run.final_output == "2"
    assert run.iterations[-1].decision == "stop" and "max_iterations (2)" in (run.iterations[-1].reason or "")


def test_a_budget_stops_the_plan_before_the_execution_that_would_pass_it(tmp_path: Path) -> None:
    steps = [step(n, "write_file", {"path": f"f{n}.txt", "content": "x"}) for n in range(1, 7)]
    p, e, c = models("budget", [plan(*steps)], succeed)
    run = run_pcee("Write six files", config(tmp_path, p, e, c, budget_calls=5))
    # the plan (1 call), then executions of one evaluator call each: the next one must not pass 5 calls
    assert run.stop_reason == "budget" and run.spent.calls == 5 and len(run.iterations) == 4
    assert run.iterations[-1].decision == "stop" and run.iterations[-1].reason.startswith("budget: 5 calls spent")
    assert [it.spent.calls for it in run.iterations[:3]] == [2, 3, 4]


def test_an_unparseable_verdict_is_a_missing_score_routed_as_failure(tmp_path: Path) -> None:
    p, e, c = models("garbled", [plan(step(1, "shell", "echo hi"))], lambda msgs: "looks good to me")
    run = run_pcee("Say hi", config(tmp_path, p, e, c, retry_budget=0))
    score = run.iterations[0].scores[0]
    assert score.score is None and "evaluator output unusable" in score.justification
    assert run.iterations[0].average is None and run.best_score is None
    assert run.stop_reason == "failed_step" and run.errors[0].kind == "ParseError"


def test_a_failed_planner_call_ends_the_run(tmp_path: Path) -> None:
    p, e, c = models("noplan", [], succeed)
    pl.scripted(
        "noplan-planner", respond=lambda msgs: json.dumps({"plan": [step(1, "shell", "a"), step(1, "shell", "b")]})
    )
    run = run_pcee("Anything", config(tmp_path, p, e, c))
    assert run.stop_reason == "error" and run.final_output is None and run.info["plan"] is None
    assert "step_id values must be unique" in run.errors[0].message and not run.iterations


def test_registered_by_name_and_config_checks(tmp_path: Path) -> None:
    assert get_loop("pcee").config_cls is PCEEConfig
    p, e, c = models("named", [plan(step(1, "calculator", "6*7"))], succeed)
    run = run_loop(
        "pcee", "Multiply", {"model": p.name, "role_models": {"evaluator": e.name}, "workspace_base": str(tmp_path)}
    )
    assert run.final_output == "42" and run.models == {
        "planner": p.name,
        "controller": p.name,
        "corrector": p.name,
        "evaluator": e.name,
    }
    with pytest.raises(ValueError, match="unknown tool"):
        PCEEConfig(tools=["shell", "ftp"])


def test_a_replay_from_the_cache_is_comparable(tmp_path: Path) -> None:
    p, e, c = models("replay", [plan(step(1, "shell", "echo hi > a.txt; ls"), step(2, "read_file", "a.txt"))], succeed)
    first = run_pcee("Write and read", config(tmp_path, p, e, c))
    again = run_pcee("Write and read", config(tmp_path, p, e, c))
    assert again.totals.cache_hits == again.totals.calls == 3 and again.comparable() == first.comparable()
    assert again.final_output == "hi\n"
    # each run has its own workspace: the re-run did not wipe the first run's files
    assert again.info["workspace"] != first.info["workspace"]
    assert (Path(first.info["workspace"]) / "a.txt").read_text() == "hi\n"


@pytest.mark.local_model
def test_a_short_real_run_on_the_local_model(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    run = run_pcee(
        "Run the shell command: echo hello",
        PCEEConfig(
            model="local/smollm2", max_iterations=2, max_tokens=400, retry_budget=0, workspace_base=str(tmp_path / "ws")
        ),
        cache=tmp_path / "cache",
        settings=pl.Settings(parse_attempts=1),
    )  # one try per call
    elapsed = time.perf_counter() - t0
    # a run whose every call failed would stop with "error" and no iteration: that is a failure here
    assert run.stop_reason in {"plan_complete", "failed_step", "max_iterations"}, (run.stop_reason, run.errors)
    assert run.iterations and run.info["plan"]
    assert Path(run.info["workspace"]).is_dir() and run.totals.calls >= 1
    assert Run.model_validate_json(run.model_dump_json()) == run
    print(f"PCEE local run: {elapsed:.1f} s, stop {run.stop_reason}, iterations {len(run.iterations)}")


def test_the_loop_toolkit_is_public_and_the_sync_twins_are_shared() -> None:
    from promptlab import loops
    from promptlab.loops.pcee.loop import arun_pcee
    from promptlab.loops.pes.agent import arun_pes, run_pes

    assert {"as_task", "as_config"} <= set(loops.__all__)
    assert loops.as_task("Say hi.").prompt == "Say hi." and loops.as_config(PCEEConfig, None) == PCEEConfig()
    assert run_pes.__wrapped__ is arun_pes and run_pcee.__wrapped__ is arun_pcee  # built by sync_twin


def test_one_cut_helper_writes_values_as_json_and_can_say_how_much_is_left_out() -> None:
    from promptlab.loops.runtime.toolkit import cut

    assert cut({"b": 1, "a": "é"}, None) == '{"a": "é", "b": 1}'
    assert cut("x" * 10, 6) == "xxx..." and cut("  short  ", 6) == "short"
    assert cut("x" * 10, 6, count=True) == "xxxxxx... [4 more characters]"
    assert cut(["y" * 20], 5, count=True) == '["yyy... [19 more characters]'


# Issue 18 ---------------------------------------------------------------------------------------------


def test_a_long_success_reason_is_the_evaluators_verdict(tmp_path: Path) -> None:
    """Bug: a 'success' verdict whose reason was over 300 characters failed validation three times and the
    step failed."""
    p, e, c = models(
        "long-reason",
        [plan(step(1, "shell", "echo hi"))],
        lambda msgs: verdict(True, "The command printed hi as asked. " * 12),
    )
    run = run_pcee("Say hi", config(tmp_path, p, e, c, retry_budget=0))
    assert len(e.requests) == 1 and run.stop_reason == "plan_complete" and run.final_output == "hi"
    assert run.iterations[0].scores[0].score == 1.0 and len(run.iterations[0].scores[0].justification) > 300


def test_the_evaluator_inspects_a_step_whose_tool_failed(tmp_path: Path) -> None:
    """Bug: a tool error failed the step without asking the evaluator; the design document's supervisor inspects every
    result and has the power to declare a step a success or a failure."""
    p, e, c = models("tool-error", [plan(step(1, "read_file", "missing.txt", "read the notes"))], judge_errors)
    run = run_pcee("Read the notes", config(tmp_path, p, e, c, retry_budget=0))
    assert len(e.requests) == 1 and "cannot read 'missing.txt'" in e.prompts[0]
    score = run.iterations[0].scores[0]
    assert (score.score, score.judge, score.justification) == (0.0, e.name, "judged by the tool's result")
    assert run.stop_reason == "failed_step" and run.errors[0].kind == "ToolError"  # the tool error stays recorded
    lenient = pl.scripted("tool-error-ok", respond=succeed)  # the supervisor may accept it
    run2 = run_pcee("Read the notes", config(tmp_path, p, lenient, c, retry_budget=0))
    assert run2.stop_reason == "plan_complete" and run2.iterations[0].scores[0].score == 1.0


def test_plans_longer_than_the_generation_schema_offers_are_run(tmp_path: Path) -> None:
    """The seed has no limit on plan length, fix-plan length or instruction length: the limits are in the
    generation schema only."""
    long = "Print the number and make sure the output is exactly that number. " * 6
    steps = [step(k, "calculator", f"{k}+0", long) for k in range(1, 14)]
    fix = plan(*[step(k, "shell", "true", long) for k in range(1, 5)])
    p, e, c = models("long-plans", [plan(*steps, step(14, "shell", "test -f fixed || exit 3"))], judge_errors, (fix,))
    run = run_pcee(
        "Count to thirteen",
        config(tmp_path, p, e, c, max_iterations=30, retry_budget=1),
        settings=pl.Settings(parse_attempts=1),
    )
    assert len(p.requests) == 1 and len(run.info["plan"]) == 14 and len(long) > 300
    assert [it.metrics["kind"] for it in run.iterations][13:] == ["plan", "fix", "fix", "fix", "fix", "retry"]
    assert len(run.info["corrections"][0]["fix_plan"]) == 4
    from promptlab.loops.pcee.schemas import plan_schemas
    from promptlab.tools.builtin import build_tools

    plan_cls, fix_cls = plan_schemas(build_tools(["calculator"]))
    assert plan_cls.model_json_schema()["properties"]["plan"]["maxItems"] == 12
    assert fix_cls.model_json_schema()["properties"]["plan"]["maxItems"] == 3


SEED_PLAN = [  # the design document's example plan, as it gives it (step 3's script needs no network here)
    step(
        1,
        "tavily_search",
        "scikit-learn latest version pypi",
        "Search the web to find the latest version number for the 'scikit-learn' Python package.",
    ),
    step(
        2,
        "write_file",
        {
            "file": "install_and_verify.py",
            "content": "version = '{step_1_output}'\nprint(f'Successfully installed scikit-learn version {version}')",
        },
        "Create a Python script named 'install_and_verify.py' that will install the version found in the "
        "previous step and then print it.",
    ),
    step(
        3,
        "workspace_shell",
        "python3 install_and_verify.py",
        "Execute the 'install_and_verify.py' script to perform the installation and confirm the version.",
    ),
]


def test_the_design_documents_example_plan_runs_with_its_tool_names_and_an_extracting_controller(
    tmp_path: Path,
) -> None:
    import re

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scikit-learn.md").write_text(
        "# scikit-learn on PyPI\n\nThe latest version of scikit-learn on PyPI is 1.5.1, released in July.\n"
    )

    def controller(messages: list[dict[str, Any]]) -> str:  # extracts from the earlier step's output it is shown
        found = re.search(r"output:\n.*?(\d+\.\d+\.\d+)", messages[-1]["content"], re.DOTALL)
        return json.dumps({"value": found.group(1) if found else "?"})

    p, e, c = models("seedplan", [plan(*SEED_PLAN)], by_exit_code)
    ctl = pl.scripted("seedplan-controller", respond=controller)
    request = (
        "Please find the latest version of the 'scikit-learn' library and write a Python script that "
        "installs it and prints the version."
    )
    run = run_pcee(request, config(tmp_path, p, e, c, controller=ctl, docs_dir=str(docs)))
    assert run.stop_reason == "plan_complete" and not run.errors
    assert [it.metrics["tool"] for it in run.iterations] == ["tavily_search", "write_file", "workspace_shell"]
    assert [it.steps[0].role for it in run.iterations][0] == "tavily_search"
    script = (Path(run.info["workspace"]) / "install_and_verify.py").read_text()
    assert script.startswith("version = '1.5.1'\n")  # the value, not the whole search result
    assert run.final_output == "Successfully installed scikit-learn version 1.5.1"
    assert json.loads(str(run.iterations[1].metrics["extracted"])) == {"step_1_output": "1.5.1"}
    (asked,) = ctl.prompts
    assert "{step_1_output}" in asked and "The latest version of scikit-learn on PyPI is 1.5.1" in asked
    pasted = run_pcee(request, config(tmp_path, p, e, c, piping="paste", docs_dir=str(docs)))
    assert pasted.stop_reason == "plan_complete", pasted.errors
    script = (Path(pasted.info["workspace"]) / "install_and_verify.py").read_text()
    assert script.startswith("version = '[scikit-learn.md] The latest version")  # the whole output, pasted
    assert len(ctl.prompts) == 1  # no controller call


def test_an_extraction_that_fails_fails_the_step_in_the_controller(tmp_path: Path) -> None:
    p, e, c = models(
        "badextract", [plan(step(1, "shell", "echo 7"), step(2, "shell", "echo {step_1_output}"))], succeed
    )
    ctl = pl.scripted("badextract-controller", ["no json here"])
    run = run_pcee(
        "Echo", config(tmp_path, p, e, c, controller=ctl, retry_budget=0), settings=pl.Settings(parse_attempts=1)
    )
    assert run.stop_reason == "failed_step" and len(e.requests) == 1  # step 2 never ran, nor was evaluated
    score = run.iterations[1].scores[0]
    assert (score.score, score.judge) == (
        0.0,
        "controller",
    ) and "could not extract {step_1_output}" in score.justification
    assert run.errors[0].role == "controller" and run.errors[0].kind == "ParseError"


def test_the_corrector_sees_the_whole_execution_history_uncut(tmp_path: Path) -> None:
    long = "x" * 3000
    steps = [step(k, "shell", f"echo step{k}") for k in range(1, 10)]
    steps += [step(10, "shell", f"echo {long}"), step(11, "shell", "exit 3", "fail")]
    fix = plan(step(1, "shell", "true"))

    def one_run(name: str, **kw: Any) -> str:
        p, e, c = models(name, [plan(*steps)], by_exit_code, (fix,))
        run_pcee("Many steps", config(tmp_path, p, e, c, max_iterations=20, retry_budget=1, **kw))
        (asked,) = c.prompts
        return str(asked)

    seen = one_run("history-all")
    assert all(f"step {k} (plan) shell(echo step{k})" in seen for k in range(1, 10))  # all 11 executions
    assert "step 11 (plan) shell(exit 3) ->\nthe tool failed: exit code: 3" in seen
    assert long in seen.split("Executions so far:")[1]  # uncut
    bounded = one_run("history-bounded", correction_history=2, result_chars=200).split("Executions so far:")[1]
    assert "step 9 (plan)" not in bounded and "step 10 (plan)" in bounded and "step 11 (plan)" in bounded
    assert long not in bounded and "xxx... [2800 more characters]" in bounded
