"""PCEE as its design document runs it (issue #29): no execution cap and no correction budget when the fields
say None, and the design document's `python` steps in the sandbox, a failing command read as a failure (scripted models)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import promptlab as pl
from promptlab.loops.pcee.config import PCEEConfig
from promptlab.loops.pcee.loop import run_pcee
from promptlab.tools.sandbox import sandbox_problem


def step(n: int, tool: str, tool_input: Any) -> dict[str, Any]:
    return {"step_id": n, "instruction": f"step {n}", "tool_name": tool, "tool_input": tool_input}


def plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"plan": list(steps)})


def judge_errors(messages: list[dict[str, Any]]) -> str:
    """An evaluator that fails a step whose tool reported an error."""
    ok = "the tool failed" not in messages[-1]["content"]
    return json.dumps({"verdict": "success" if ok else "failure", "reason": "judged by the tool's result"})


def test_max_iterations_none_runs_a_plan_longer_than_any_cap(tmp_path: Path) -> None:
    """A 12-step plan of successes completes with max_iterations=None (the seed has no cap); the default 8
    stops it."""
    steps = [step(n, "calculator", f"{n}+{n}") for n in range(1, 13)]
    planner = pl.scripted("seedcap-planner", respond=lambda m: plan(*steps))
    judge = pl.scripted("seedcap-eval", respond=judge_errors)
    cfg = {"model": planner.name, "role_models": {"evaluator": judge.name}, "workspace_base": str(tmp_path / "ws")}
    capped = run_pcee("Add", cfg)
    assert capped.stop_reason == "max_iterations" and len(capped.iterations) == 8
    free = run_pcee("Add", {**cfg, "max_iterations": None})
    assert free.stop_reason == "plan_complete" and len(free.iterations) == 12 and free.final_output == "24"


def test_retry_budget_none_corrects_until_the_step_passes(tmp_path: Path) -> None:
    """Three fix plans that fail, then one that works: four corrections, more than the default budget of 2;
    with retry_budget=None (the seed has no budget) the step is retried and the plan completes."""
    planner = pl.scripted("seedbudget-planner", respond=lambda m: plan(step(1, "read_file", {"path": "x.txt"})))
    judge = pl.scripted("seedbudget-eval", respond=judge_errors)
    fixes = [plan(step(1, "read_file", {"path": f"missing{k}.txt"})) for k in range(3)]
    fixes.append(plan(step(1, "write_file", {"path": "x.txt", "content": "found"})))
    fixer = pl.scripted("seedbudget-fix", respond=lambda m: fixes.pop(0) if len(fixes) > 1 else fixes[0])
    roles = {"evaluator": judge.name, "corrector": fixer.name}
    cfg = PCEEConfig(model=planner.name, role_models=roles, workspace_base=str(tmp_path / "ws"))
    run = run_pcee("Read x.txt", cfg.model_copy(update={"retry_budget": None, "max_iterations": None}))
    assert run.stop_reason == "plan_complete" and run.final_output is not None and "found" in run.final_output
    assert len(run.info["corrections"]) == 4
    assert any("correction 4 of unlimited" in (it.reason or "") for it in run.iterations)
    assert PCEEConfig(retry_budget=50, max_iterations=500).retry_budget == 50  # no upper bound either


@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here ({sandbox_problem()})")
def test_the_seeds_python_step_runs_and_a_command_not_found_reaches_the_evaluator_as_a_failure(
    tmp_path: Path,
) -> None:
    """The seed's plans run `python x.py` (only python3 exists here: the sandbox links python to it); a
    command that exits 127 is a failed tool result, which the evaluator reads as such (issue #29 item 12)."""
    steps = [
        step(1, "write_file", {"file": "hello.py", "content": "print('hi from python')"}),
        step(2, "workspace_shell", "python hello.py"),
        step(3, "workspace_shell", "no_such_tool_xyz --version"),
    ]
    planner = pl.scripted("seedpy-planner", respond=lambda m: plan(*steps))
    judge = pl.scripted("seedpy-eval", respond=judge_errors)
    cfg = PCEEConfig(
        model=planner.name, role_models={"evaluator": judge.name}, retry_budget=0, workspace_base=str(tmp_path / "ws")
    )
    run = run_pcee("Run the script, then the tool", cfg)
    ran, missing = run.iterations[1], run.iterations[2]
    assert ran.metrics["exit_code"] == 0 and ran.average == 1.0 and "hi from python" in (ran.candidate or "")
    assert missing.metrics["exit_code"] == 127 and missing.average == 0.0
    assert "the tool failed: exit code: 127" in judge.prompts[-1]
    assert run.stop_reason == "failed_step" and run.info["failed_step"]["step_id"] == 3
