"""One way to define a loop (`promptlab.loops.runtime.define`): every built-in entry point has the same
parameters, docstring Args, sync twin and registration, a new loop needs only its body, and a type checker sees
the real signature."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import promptlab
from promptlab.errors import ConfigError
from promptlab.loops.registry import get_loop, run_loop
from promptlab.loops.runtime.config import LoopConfig
from promptlab.loops.runtime.context import RunContext
from promptlab.loops.runtime.define import LOOP_ARGS_DOC, LOOPS, define_loop, entry_doc
from promptlab.loops.runtime.toolkit import by_decision_score
from promptlab.record import Run, Score, Task

BUILTIN = ["ape", "creator_critic", "gepa", "opro", "p3ro", "pcee", "pes", "protegi", "resample"]
COMMON = ["task", "config", "sample", "on_event", "cache", "settings", "provenance"]


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_entry_point_is_made_by_define_loop(name: str) -> None:
    spec = get_loop(name)
    arun = spec.arun
    module = sys.modules[arun.__module__]
    run = getattr(module, f"run_{name}")
    assert arun is getattr(module, f"arun_{name}") and arun.__name__ == f"arun_{name}"
    assert run is arun.sync and run.__wrapped__ is arun and run.__name__ == f"run_{name}"  # type: ignore[attr-defined]
    assert arun.spec is spec and LOOPS[name] is spec  # type: ignore[attr-defined]
    params = inspect.signature(arun).parameters
    assert list(params) == COMMON and list(inspect.signature(run).parameters) == COMMON
    assert [p.name for p in params.values() if p.kind is p.KEYWORD_ONLY] == COMMON[2:]
    assert params["config"].annotation == spec.config_cls | dict[str, Any] | None
    doc = arun.__doc__ or ""
    assert LOOP_ARGS_DOC.format(config=spec.config_cls.__name__) in doc
    assert doc.index("Args:") < doc.index("Returns:") and doc.splitlines()[0].startswith("Run ")


def test_entry_doc_puts_the_shared_args_before_the_first_section_or_at_the_end() -> None:
    doc = entry_doc("Run it.\n\n    More.\n\n    Raises:\n        ConfigError: bad.\n", LoopConfig)
    assert doc.startswith("Run it.\n\nMore.\n\nArgs:\n    task:") and doc.endswith("Raises:\n    ConfigError: bad.\n")
    assert "config: a LoopConfig, a dict" in doc
    assert entry_doc("Just a line.", LoopConfig).startswith("Just a line.\n\nArgs:\n")


class EchoConfig(LoopConfig):
    ROLES = ("writer",)
    refuse: bool = False
    extra: str = "fake/define-extra"


def _check(task: Task, cfg: EchoConfig) -> list[str]:
    if cfg.refuse:
        raise ConfigError(f"task {task.id!r}: refused by the check")
    return [cfg.extra]


@define_loop("define_echo", EchoConfig, "a loop defined in a test", check=_check, rank_by=by_decision_score)
async def arun_echo(ctx: RunContext, task: Task, cfg: EchoConfig) -> Run:
    """Echo the writer's reply once.

    Returns:
        The Run.
    """
    it = ctx.new_iteration()
    it.candidate, _ = await ctx.call("writer", "write", f"Rewrite: {task.prompt}", iteration=it)
    ctx.score(it, [Score(criterion="overall", score=3.0)])
    it.decision_score = 7.0 if it.candidate == "first" else 1.0
    ctx.decide(it, "FINISH", "one iteration")
    return ctx.finish("max_iterations", it.candidate)


def test_a_new_loop_needs_only_its_body() -> None:
    writer = promptlab.scripted("define-writer", ["first", "second"])
    promptlab.scripted("define-extra")
    cfg = {"model": "fake/define-writer"}
    run = run_loop("define_echo", "Say hi.", cfg, sample=2, provenance={"experiment_hash": "abc"})
    assert run.loop == "define_echo" and run.final_output == "first" and run.sample == 2
    assert run.provenance["experiment_hash"] == "abc" and run.task.prompt == "Say hi."
    assert arun_echo.sync("Say hi.", EchoConfig(model="fake/define-writer")).final_output == "second"
    assert len(writer.requests) == 2
    # rank_by is the loop's rule: the decision score, not the average (3.0 for both)
    assert run.best_iteration == 1 and run.best_score == 3.0
    assert "Args:" in (arun_echo.__doc__ or "") and arun_echo.spec.description == "a loop defined in a test"


def test_the_check_and_the_models_it_names_are_refused_before_any_call() -> None:
    writer = promptlab.scripted("define-writer-2", ["never"])
    with pytest.raises(ConfigError, match="refused by the check"):
        arun_echo.sync({"id": "t1", "prompt": "x"}, {"model": "fake/define-writer-2", "refuse": True})
    with pytest.raises(ConfigError, match="'nosuchprovider/x'"):  # a model the check names is checked too
        arun_echo.sync("x", {"model": "fake/define-writer-2", "extra": "nosuchprovider/x"})
    with pytest.raises(ConfigError, match="config must be a EchoConfig"):
        arun_echo.sync("x", 5)  # type: ignore[arg-type]
    assert writer.requests == []


@pytest.mark.slow
def test_a_type_checker_sees_the_real_signature_of_an_entry_point(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        textwrap.dedent(
            """
            from promptlab.loops.p3ro import P3ROConfig, run_p3ro

            reveal_type(run_p3ro("Say hi.", P3ROConfig(), sample=1))
            run_p3ro("Say hi.", config=5)
            run_p3ro("Say hi.", sampel=1)
            """
        )
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(user)],
        capture_output=True,
        text=True,
        cwd=root,
    ).stdout
    assert 'Revealed type is "promptlab.record.Run"' in out, out
    assert 'Argument "config"' in out and 'expected "P3ROConfig | dict[str, Any] | None"' in out, out
    assert 'Unexpected keyword argument "sampel"' in out, out
