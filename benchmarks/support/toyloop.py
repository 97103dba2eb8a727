"""A loop small enough to read, for sweep tests and benchmarks, made with `define_loop` like every other loop:
importable by a subprocess or a kernel (PYTHONPATH=benchmarks/support).

A writer rewrites the prompt, a judge grades it 1-10 (structured); `counter` appends a line per run,
`marks` a line per iteration once its calls are done, `fail_on` makes the loop raise on that task, `exit_on`
ends the whole process there (a dying worker), `env_log` appends the process's PROMPTLAB_LIMIT_SHARE per run,
`delay_s` slows each iteration and `style` changes the writer's prompt (new calls per value). With
$TOYLOOP_HOLD_AFTER_A_CELL set to a results dir, a run waits for ever once a cell of that dir has finished (a test
then kills a sweep with exactly its first cell done, however fast or slow the machine). With
$TOYLOOP_EXIT_AFTER_CELLS set to "N:<results dir>", `exit_on` first waits (up to a minute) until N cells of that
dir have a status.json (a test then kills a worker only once the other cells have recorded their outcomes).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel, Field

from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.context import RunContext
from promptlab.loops.runtime.define import define_loop
from promptlab.record import Run, Score, Task


class ToyConfig(LoopConfig):
    ROLES = ("writer", "judge")
    CRITIC_ROLES = frozenset({"judge"})
    finish_threshold: float | None = Field(None, ge=1, le=10)
    delay_s: float = Field(0.0, ge=0)
    fail_on: str | None = None
    exit_on: str | None = None
    env_log: str | None = None
    counter: str | None = None
    marks: str | None = None
    style: str = "plain"


class Grade(BaseModel):
    score: int = Field(ge=1, le=10)


@define_loop("toy", ToyConfig, "a tiny loop for sweep tests")
async def arun_toy(ctx: RunContext, task: Task, config: ToyConfig) -> Run:
    """Rewrite the prompt and grade it, `max_iterations` times (or until the grade reaches `finish_threshold`)."""
    held = os.environ.get("TOYLOOP_HOLD_AFTER_A_CELL")
    while held and any(Path(held).glob("cells/*/status.json")):
        await asyncio.sleep(0.05)
    if config.counter:
        with open(config.counter, "a") as f:
            f.write(f"{task.id} {ctx.run.sample} {config.max_iterations}\n")
    if config.env_log:
        with open(config.env_log, "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('PROMPTLAB_LIMIT_SHARE')}\n")
    if config.exit_on == task.id:
        await cells_done(os.environ.get("TOYLOOP_EXIT_AFTER_CELLS", ""))
        os._exit(3)
    if config.fail_on == task.id:
        raise RuntimeError(f"toy loop fails on task {task.id}")
    text: str | None = task.prompt
    for _ in range(config.max_iterations):
        it = ctx.new_iteration()
        text, _ = await ctx.call("writer", "generate", f"Improve this prompt ({config.style}): {text}", iteration=it)
        it.candidate = text
        grade, _ = await ctx.call("judge", "evaluate", f"Grade 1-10: {text}", schema=Grade, iteration=it)
        ctx.score(it, [Score(criterion="overall", score=None if grade is None else float(grade.score))])
        if config.marks:  # an iteration's calls are done: a kill now finds no request in flight
            with open(config.marks, "a") as f:
                f.write(f"{task.id} {ctx.run.sample} {it.index}\n")
        await asyncio.sleep(config.delay_s)
        if config.finish_threshold is not None and it.average is not None and it.average >= config.finish_threshold:
            ctx.decide(it, "FINISH", "threshold reached")
            return ctx.finish("threshold", text)
        ctx.decide(it, "CONTINUE", "below threshold")
    return ctx.finish("max_iterations", text)


async def cells_done(spec: str) -> None:
    """Wait until the cells named by `spec` ("N:<results dir>") have a status.json, for up to a minute."""
    if not spec:
        return
    count, _, results = spec.partition(":")
    for _ in range(1200):
        if len(list(Path(results).glob("cells/*/status.json"))) >= int(count):
            return
        await asyncio.sleep(0.05)


run_toy = arun_toy.sync
