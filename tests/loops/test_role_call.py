"""One request across the loop-to-call seam (`promptlab.loops.runtime.role_call.RoleCall`): a role's call is one
typed value, `RunContext.ask` makes and records it, and `RunContext.call` is its short form."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from pydantic import BaseModel

import promptlab as pl
from promptlab.llm.call.settings import Settings
from promptlab.loops import RoleCall
from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.context import RunContext
from promptlab.record import Task


class PairConfig(LoopConfig):
    ROLES = ("writer", "judge")


class Grade(BaseModel):
    score: int


def test_a_role_call_takes_the_run_s_defaults_and_its_own_overrides() -> None:
    pl.scripted("role-judge")
    cfg = PairConfig(model="fake/auto", role_models={"judge": "fake/role-judge"}, temperature=0.3, max_tokens=50)
    plain = RoleCall("writer", "write", "hi", sample_offset=2)
    assert plain.model_of(cfg) == "fake/auto" and RoleCall("judge", "grade", "x").model_of(cfg) == "fake/role-judge"
    assert RoleCall("judge", "grade", "x", model="fake/other").model_of(cfg) == "fake/other"
    assert plain.call_args(cfg, 5, None) == {
        "schema": None,
        "system": None,
        "temperature": 0.3,
        "max_tokens": 50,
        "sample": 7,
        "settings": None,
    }
    fixed = RoleCall(
        "judge", "grade", "x", schema=Grade, system="S", sample=1, temperature=0.0, max_tokens=9, logprobs=True
    )
    args = fixed.call_args(cfg, 5, Settings(retries=1))
    assert args == {
        "schema": Grade,
        "system": "S",
        "temperature": 0.0,
        "max_tokens": 9,
        "sample": 1,
        "settings": Settings(retries=1),
        "logprobs": True,
        "top_logprobs": 20,
    }
    once = RoleCall("judge", "grade", "x", parse_attempts=1).call_args(cfg, 0, Settings(retries=1))
    assert once["settings"] == Settings(retries=1, parse_attempts=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.role = "judge"  # type: ignore[misc]


def test_ask_and_its_short_form_make_the_same_call_and_record_it() -> None:
    """`ask` returns the whole Completion and the step (named by the judge, left unplaced when asked); `call`
    builds the same RoleCall and returns the parsed reply; an option that is no field of RoleCall is refused."""
    pl.scripted("role-writer", ["first", "second"])
    pl.scripted("role-judge", ['{"score": 4}'])
    cfg = PairConfig(model="fake/role-writer", role_models={"judge": "fake/role-judge"})

    async def run() -> None:
        ctx = RunContext("role_call", Task(id="t", prompt="p"), cfg, cache=False)
        it = ctx.new_iteration()
        c, step = await ctx.ask(RoleCall("writer", "write", "hi", iteration=it, judge="named", place=False))
        assert c is not None and c.text == "first" and c.model == "fake/role-writer"
        assert (step.role, step.phase, step.model, step.iteration) == ("named", "write", "fake/role-writer", 1)
        assert it.steps == [] and step.call is not None and step.output == {"text": "first"}
        text, placed = await ctx.call("writer", "write", "again", iteration=it)
        assert text == "second" and it.steps == [placed]
        grade, graded = await ctx.call("judge", "grade", "how good?", schema=Grade, iteration=it)
        assert isinstance(grade, Grade) and grade.score == 4 and graded.output == {"score": 4}
        with pytest.raises(TypeError, match="bogus"):
            await ctx.call("writer", "write", "x", bogus=1)

    asyncio.run(run())
