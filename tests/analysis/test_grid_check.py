"""Counterfactual stopping against a real threshold x cap grid (`analysis.check_counterfactual`): a sweep of
scripted Creator/Critic runs, shown their errors as the demo's are, agrees with the truncation of the logged
runs wherever the counterfactual is exact."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import promptlab
from promptlab.analysis import agreement_table, check_counterfactual
from promptlab.results.store import load
from promptlab.sweeps import Experiment, sweep

NEXT = {"BAD start": "HALF v1", "HALF v1": "BAD v2", "BAD v2": "GOOD v3", "GOOD v3": "GOOD v4"}
"""The creator's rewrite of each latest version."""
CRITIC = {"BAD start": 3.0, "HALF v1": 8.0, "BAD v2": 6.0, "GOOD v3": 9.0}
"""The scripted critic's score of each candidate (the oracle's are 1, 5.5, 1 and 10)."""


def creator(messages: list[dict[str, Any]]) -> str:
    latest = re.search(r"Latest version:\n(.*)\n", messages[-1]["content"])
    assert latest is not None
    return NEXT[latest.group(1)]


def critic(messages: list[dict[str, Any]]) -> str:
    judged = re.search(r"<<<\n(.*)\n>>>", messages[-1]["content"], re.DOTALL)
    assert judged is not None
    return json.dumps({"score": CRITIC[judged.group(1)], "strengths": [], "weaknesses": [], "suggestions": []})


def target(messages: list[dict[str, Any]]) -> str:
    """'yes' for a GOOD prompt, for a HALF prompt on even items only, else 'no'."""
    text = messages[-1]["content"]
    item = int(text.rsplit("item ", 1)[1])
    return "yes" if text.startswith("GOOD") or (text.startswith("HALF") and item % 2 == 0) else "no"


def experiment(tmp_path: Path, name: str, grid: dict[str, list[Any]], config: dict[str, Any]) -> Experiment:
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(json.dumps({"input": f"item {i}", "target": "yes"}) + "\n" for i in range(12)))
    task = {"prompt": "BAD start", "goal": "answer yes", "examples": "examples.jsonl", "scorer": {"kind": "exact"}}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": t, **task, "split": {"seed": 0, "dev": 6}}) + "\n" for t in "ab"))
    models = {"model": "fake/gc-creator", "target_model": "fake/gc-target"}
    data = {
        "name": name,
        "loops": ["creator_critic"],
        "tasks": "tasks.jsonl",
        "config": {**models, "show_errors": 2, "show_critique": False, "final": "best", **config},
        "grid": grid,
        "pairings": [{"generator": "fake/gc-creator", "critic": c} for c in ("fake/gc-critic", "sim/oracle")],
        "replicates": 2,
    }
    return Experiment.from_dict(data, tmp_path)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    tmp_path = tmp_path_factory.mktemp("grid_check")
    promptlab.scripted("gc-creator", respond=creator)
    promptlab.scripted("gc-critic", respond=critic)
    promptlab.scripted("gc-target", respond=target)
    cache = tmp_path / "cache"
    logged = experiment(tmp_path, "logged", {}, {"max_iterations": 3, "finish_threshold": 10.0})
    grid = experiment(tmp_path, "grid", {"finish_threshold": [5.0, 8.0, 10.0], "max_iterations": [1, 2, 3]}, {})
    sweep(logged, tmp_path / "logged", progress=False, cache=cache)
    sweep(grid, tmp_path / "grid", progress=False, cache=cache)
    return load(tmp_path / "logged"), load(tmp_path / "grid")


def test_every_exact_grid_run_agrees_with_the_truncation(results: tuple[Any, Any]) -> None:
    logged, grid = results
    check = check_counterfactual(logged, grid)
    assert len(check) == 2 * 3 * 3 * 2 * 2  # critics x thresholds x caps x tasks x samples
    assert check["exact"].all() and check["agree"].all()
    # the rules differ: the scripted critic stops at 8 on HALF v1 (rewrite 1), the oracle only at 10 (GOOD v3)
    row = check[(check["critic_model"] == "fake/gc-critic") & (check["threshold"] == 8.0) & (check["cap"] == 3)]
    assert set(row["stop"]) == {1} and set(row["grounded"]) == {0.5}
    row = check[(check["critic_model"] == "sim/oracle") & (check["threshold"] == 8.0) & (check["cap"] == 3)]
    assert set(row["stop"]) == {3} and set(row["grounded"]) == {1.0}
    table = agreement_table(check)
    assert len(table) == 18 and (table["n_agree"] == table["n"]).all() and (table["n_exact"] == 4).all()


def test_a_run_that_disagrees_is_caught(results: tuple[Any, Any]) -> None:
    """The check can fail: a grid run whose returned iteration differs from the truncation's is flagged."""
    logged, grid = results
    runs = grid.runs.copy()
    runs.loc[runs.index[0], "final_iteration"] = 0 if runs["final_iteration"].iloc[0] != 0 else 1
    check = check_counterfactual(logged, replace(grid, runs=runs))
    assert int((~check["agree"]).sum()) == 1
    table = agreement_table(check)
    assert int((table["n"] - table["n_agree"]).sum()) == 1
