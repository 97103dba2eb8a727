"""The gates: scripts/check (run by scripts/test before pytest) fails on a lint, a formatting or a type error and
passes on clean code, each seen on a copy of a real module in a temporary tree; and a user's type checker sees
the root's lazy names (`pl.run_p3ro`, ...) with their real signatures."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
MODULE = "promptlab/aio.py"
"""The module the gates are tried on (small, stdlib imports only, so mypy is quick)."""
BREAKS = {
    "ruff check": "\n\ndef lint_broken() -> None:\n    unused = 1\n",  # F841, formatted and typed
    "ruff format": "\n\nFORMAT_BROKEN = {'a':1}\n",  # lint- and type-clean
    "mypy": '\n\ndef type_broken() -> int:\n    return "not an int"\n',  # lint- and format-clean
}
"""Each gate's break: code that only that gate refuses, appended to the module."""
CANARY = """from pathlib import Path


def test_canary() -> None:
    (Path(__file__).parent / "pytest-ran").write_text("yes")
"""

needs_venv = pytest.mark.skipif(
    not all((BIN / tool).exists() for tool in ("ruff", "mypy")), reason="the gates need .venv (run scripts/setup)"
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout in miniature: pyproject.toml, scripts/check and scripts/test (scripts/setup a no-op), .venv/bin
    linking this checkout's tools, one real module of the package and a canary test that leaves a file."""
    root = tmp_path_factory.mktemp("gates")
    shutil.copy(ROOT / "pyproject.toml", root)
    (root / "scripts").mkdir()
    for name in ("check", "test"):
        shutil.copy(ROOT / "scripts" / name, root / "scripts" / name)
    (root / "scripts" / "setup").write_text("#!/bin/sh\nexit 0\n")
    (root / "scripts" / "setup").chmod(0o755)
    (root / ".venv" / "bin").mkdir(parents=True)
    for tool in ("ruff", "mypy", "python"):
        (root / ".venv" / "bin" / tool).symlink_to(BIN / tool)
    (root / "promptlab").mkdir()
    (root / "promptlab" / "__init__.py").write_text('"""A copy of one module of promptlab."""\n')
    shutil.copy(ROOT / MODULE, root / MODULE)
    (root / "tests").mkdir()
    (root / "tests" / "test_canary.py").write_text(CANARY)
    return root


@pytest.fixture
def broken(tree: Path) -> Iterator[tuple[Path, str]]:
    """The tree, for the test to break its module; the module is put back afterwards."""
    module = tree / MODULE
    clean = module.read_text()
    yield tree, clean
    module.write_text(clean)
    (tree / "tests" / "pytest-ran").unlink(missing_ok=True)


def run(tree: Path, script: str) -> tuple[int, str, list[str]]:
    """(exit code, stderr, the gates reported failed) of scripts/<script> in the tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}
    done = subprocess.run([tree / "scripts" / script], cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr, re.findall(r"^check: FAILED gate '([^']+)'", done.stderr, re.M)


@needs_venv
@pytest.mark.slow
@pytest.mark.parametrize("gate", list(BREAKS))
def test_each_gate_fails_on_its_break_and_says_which(broken: tuple[Path, str], gate: str) -> None:
    tree, clean = broken
    (tree / MODULE).write_text(clean + BREAKS[gate])
    code, err, failed = run(tree, "check")
    assert code == 1 and failed == [gate], err
    if gate == "ruff format":
        assert "ruff format ." in err  # the line says how to fix it


@needs_venv
@pytest.mark.slow
def test_scripts_test_runs_pytest_after_the_gates_pass_and_stops_before_it_when_one_fails(
    broken: tuple[Path, str],
) -> None:
    tree, clean = broken
    code, err, failed = run(tree, "test")
    assert code == 0 and failed == [] and "check: all gates passed" in err, err
    assert (tree / "tests" / "pytest-ran").exists()  # the unbroken copy passes every gate, then pytest runs

    (tree / "tests" / "pytest-ran").unlink()
    (tree / MODULE).write_text(clean + BREAKS["ruff format"])
    code, err, failed = run(tree, "test")
    assert code == 1 and failed == ["ruff format"], err
    assert not (tree / "tests" / "pytest-ran").exists()  # stopped before pytest


def names_table() -> tuple[dict[str, str], dict[str, str]]:
    """From promptlab/__init__.py's source: the table of the root's names (name -> module) and the TYPE_CHECKING
    imports (name -> module)."""
    tree = ast.parse((ROOT / "promptlab" / "__init__.py").read_text())
    table: dict[str, str] = {}
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "NAMES":
            table = ast.literal_eval(node.value)
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1, ast.unparse(imp)
                for alias in imp.names:  # `import x as x`: an explicit re-export, seen by a strict checker too
                    assert alias.asname == alias.name, ast.unparse(imp)
                    assert alias.name not in typed, f"{alias.name} imported twice"
                    typed[alias.name] = f"promptlab.{imp.module}"
    return table, typed


def test_the_roots_names_are_one_table_and_the_checkers_imports_agree_with_it() -> None:
    import promptlab

    table, typed = names_table()
    assert len(table) >= 100
    assert typed == table  # the same names from the same modules, both ways
    assert promptlab.__all__ == ["__version__", *table]  # __all__ is made from the table, not written again
    for name, module in table.items():  # each name is defined where the table says
        assert getattr(promptlab, name) is getattr(__import__(module, fromlist=[name]), name), name


def test_py_typed_ships_with_the_package() -> None:
    assert (ROOT / "promptlab" / "py.typed").exists()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["promptlab"]


USER_FILE = """import promptlab as pl

run: pl.Run = pl.run_p3ro("Write a haiku.", sample=1)
pl.run_p3ro("Write a haiku.", sample="first")
pl.run_p3ro("Write a haiku.", samples=1)
n: int = pl.run_p3ro("Write a haiku.")
"""


@needs_venv
@pytest.mark.slow
def test_a_users_mypy_sees_run_p3ros_real_signature(tmp_path: Path) -> None:
    """promptlab found the way an installed package is (on the path, so PEP 561's py.typed is required), checked
    with mypy's defaults from a directory outside the checkout."""
    (tmp_path / "user.py").write_text(USER_FILE)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [BIN / "mypy", "--cache-dir", tmp_path / ".mypy_cache", "user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = {int(m[1]): m[2] for m in re.finditer(r"^user\.py:(\d+): error: (.*)$", done.stdout, re.M)}
    assert set(errors) == {4, 5, 6}, done.stdout  # the right call (line 3) passes
    assert 'Argument "sample"' in errors[4] and 'expected "int"' in errors[4]
    assert 'Unexpected keyword argument "samples"' in errors[5]
    assert 'expression has type "Run"' in errors[6]  # the return type too, not Any
