"""Every Python example of README.md and docs/*.md runs, so that none can rot.

The ```python blocks of one file run in order in one namespace (a later block may use what an earlier one
defined), in a scratch project that links the repository's data/ and experiments/ and holds a results/demo
made by sweeping experiments/demo.yaml with the scripted model. A model the example names is replaced by the
scripted model `fake/auto` (MODELS below: hosted models would need a key and the network, and the local model
takes minutes), which goes through the same call path. A line `# <Python literal>` right under an expression
states its value, and is checked.

A block that cannot run offline says so in the markdown, on the line before it:
`<!-- example: not run offline: <why> -->`; the test skips it and checks that a reason is given.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MODELS = {"local/smollm2": "fake/auto", "gpt-4o-mini": "fake/auto"}
"""Model names in the examples and the scripted model each runs as here."""
BLOCK = re.compile(
    r"(?:<!--\s*example:\s*(?P<directive>.*?)\s*-->\s*\n)?^```python\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE
)
SKIP = re.compile(r"^not run offline:\s*(?P<why>\S.*)$")


def blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """The ```python blocks of a markdown file: (line, code, directive or None)."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start("code")) + 1, m.group("code"), m.group("directive")) for m in BLOCK.finditer(text)
    ]


def offline(code: str) -> str:
    """The code with every model name of MODELS replaced by its scripted stand-in."""
    for name, stand_in in MODELS.items():
        code = code.replace(f'"{name}"', f'"{stand_in}"').replace(f"'{name}'", f"'{stand_in}'")
    return code


def stated_values(code: str) -> list[tuple[int, str, Any]]:
    """(line, expression, value) for each expression followed on the next line by `# <Python literal>`."""
    lines = code.splitlines()
    found = []
    for node in ast.parse(code).body:
        if not isinstance(node, ast.Expr) or node.end_lineno is None or node.end_lineno >= len(lines):
            continue
        comment = lines[node.end_lineno].strip()
        if comment.startswith("#"):
            try:
                value = ast.literal_eval(comment[1:].strip())
            except (ValueError, SyntaxError):
                continue
            found.append((node.end_lineno, ast.get_source_segment(code, node) or "", value))
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch project: data/ and experiments/ of the repository, and results/demo, the demo experiment
    swept with fake/auto in every role (what `scripts/demo` makes with the local model)."""
    import promptlab as pl

    root = tmp_path_factory.mktemp("examples")
    for name in ("data", "experiments"):
        (root / name).symlink_to(ROOT / name, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROMPTLAB_CACHE_DIR", str(root / ".promptlab" / "cache"))
        demo = pl.load_experiment(ROOT / "experiments" / "demo.yaml")
        data = demo.model_dump(mode="json")  # every model the demo names (its pairings too) runs as fake/auto
        data["config"] = {**data["config"], "model": "fake/auto"}
        data["pairings"] = [{k: MODELS.get(v, v) for k, v in pair.items()} for pair in data.get("pairings") or []]
        data["replicates"] = min(data.get("replicates") or 1, 2)
        exp = pl.Experiment.from_dict(data, demo.base_dir)
        assert "local/smollm2" not in str(exp.model_dump(mode="json"))  # no minutes-long local-model sweep here
        result = pl.sweep(exp, root / "results" / "demo", progress=False)
    assert not result.failed
    return root


CASES = [pytest.param(path, id=str(path.relative_to(ROOT))) for path in FILES if blocks(path)]


def test_some_examples_are_checked() -> None:
    assert len(CASES) >= 5 and sum(len(blocks(p)) for p in FILES) >= 11


@pytest.mark.parametrize("path", CASES)
def test_the_examples_run(path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    namespace: dict[str, Any] = {"__name__": "__example__"}
    ran = 0
    for line, code, directive in blocks(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        if directive is not None:
            skip = SKIP.match(directive)
            assert skip, f"{where}: unknown directive {directive!r} (known: 'not run offline: <why>')"
            continue
        code = offline(code)
        try:
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 -- the project's own documentation
        except Exception as e:
            raise AssertionError(f"the example at {where} fails: {type(e).__name__}: {e}") from e
        for at, expression, value in stated_values(code):
            got = eval(compile(expression, where, "eval"), namespace)  # noqa: S307 -- as above
            assert got == value, f"{where}, line {at} of the block: {expression} is {got!r}, the text says {value!r}"
        ran += 1
    assert ran, f"{path.relative_to(ROOT)}: every example is marked as not runnable offline"
