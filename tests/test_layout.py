"""The package's shape, read from its source: no facade modules, no import cycle, no private name imported
across modules, modules under 400 lines, and short functions in the call path (`llm/`) and the loop runtime."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "promptlab"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
SHORT_FUNCTIONS = ("llm", "loops/runtime")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def imported_module(name: str, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom reads from."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package(name) else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def top_level_imports(name: str) -> list[tuple[str, list[str]]]:
    """(module, names) of each ImportFrom executed when the module loads (not inside a function, nor under
    TYPE_CHECKING)."""
    out: list[tuple[str, list[str]]] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom):
                out.append((imported_module(name, node), [a.name for a in node.names]))
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)

    walk(TREES[name].body)
    return out


def test_no_module_only_re_exports_other_modules_names() -> None:
    """A module (not a package's __init__) must define something: a module that only imports and lists names is a
    facade."""
    facades = []
    for name, tree in TREES.items():
        if is_package(name):
            continue
        defines = [
            n
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            or (
                isinstance(n, (ast.Assign, ast.AnnAssign))
                and not any(
                    isinstance(t, ast.Name) and t.id == "__all__"
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                )
            )
        ]
        if not defines:
            facades.append(name)
    assert facades == []


def test_every_name_in_a_modules_all_is_defined_there() -> None:
    """`__all__` of a module lists what it defines; re-exporting is the job of a package's __init__."""
    wrong = {}
    for name, tree in TREES.items():
        if is_package(name):
            continue
        defined = {
            n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        defined |= {
            e.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign)
            for t in n.targets
            for e in ast.walk(t)
            if isinstance(e, ast.Name)
        }
        defined |= {
            n.target.id for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                extra = [n for n in ast.literal_eval(node.value) if n not in defined]
                if extra:
                    wrong[name] = extra
    assert wrong == {}


def test_package_code_imports_each_name_from_the_module_that_defines_it() -> None:
    """Inside the package, `from X import n` names the module that defines `n` (or a submodule), never a
    package's __init__ that re-exports it, so the import graph shows the real dependencies."""
    through = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = imported_module(name, node)
            if source in MODULES and is_package(source) and source != "promptlab" or source == "promptlab":
                for alias in node.names:
                    if f"{source}.{alias.name}" not in MODULES:
                        through.append(f"{name}: from {source} import {alias.name}")
    assert through == []


def test_no_private_name_is_imported_across_modules() -> None:
    private = [
        f"{name}: {n}"
        for name, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and imported_module(name, node).startswith("promptlab")
        for n in (a.name for a in node.names)
        if n.startswith("_") and n != "__version__"
    ]
    assert private == []


def all_imports(name: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import the module makes, at load time or inside a function (not those under
    TYPE_CHECKING, which never run); `import a.b` reads as (a.b, [])."""
    out: list[tuple[str, list[str]]] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                walk(child)
            return
        if isinstance(node, ast.ImportFrom):
            out.append((imported_module(name, node), [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(TREES[name])
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the promptlab modules it imports, at load time or inside a function."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        for source, names in all_imports(name):
            if not source.startswith("promptlab"):
                continue
            for target in [f"{source}.{n}" if f"{source}.{n}" in MODULES else source for n in names] or [source]:
                if target in MODULES and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle_counting_imports_inside_functions() -> None:
    """The graph of every import (at load time and inside functions; a package's __init__ left out where its own
    submodules import it) has no cycle: a function-level import hides a circle from the interpreter, not from a
    reader."""
    graph = import_graph()
    for name, targets in graph.items():
        targets -= {t for t in targets if is_package(t) and name.startswith(f"{t}.")}
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_test_sees_an_import_inside_a_function() -> None:
    """The walk counts a function-level import and skips one under TYPE_CHECKING (so the test above can fail)."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import x\n"
        "def f():\n    from .c import y\n    import promptlab.d\n"
    )
    TREES["promptlab.llm.probe_of_the_walk"] = tree
    MODULES["promptlab.llm.probe_of_the_walk"] = PACKAGE / "llm" / "probe_of_the_walk.py"
    try:
        assert all_imports("promptlab.llm.probe_of_the_walk") == [
            ("typing", ["TYPE_CHECKING"]),
            ("promptlab.llm.c", ["y"]),
            ("promptlab.d", []),
        ]
    finally:
        del TREES["promptlab.llm.probe_of_the_walk"], MODULES["promptlab.llm.probe_of_the_walk"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_llm_imports_nothing_from_the_research_packages() -> None:
    """The call path knows simulated critics only as a registered model provider: `llm` imports nothing from
    `critics` (nor from the loops, evaluation or analysis built on it), not even inside a function."""
    above = ("promptlab.critics", "promptlab.loops", "promptlab.eval", "promptlab.analysis", "promptlab.sweeps")
    wrong = [
        f"{name} -> {target}"
        for name, targets in import_graph().items()
        if name.startswith("promptlab.llm")
        for target in targets
        if target.startswith(above)
    ]
    assert wrong == []


MODEL_REGISTRY = {
    "promptlab.llm.providers.registry",
    "promptlab.llm.providers.resolved",
    "promptlab.llm.providers.hosted",
    "promptlab.llm.providers.own_models",
    "promptlab.critics.simulated",
}
"""Where model names are read: the providers' registry, resolution and the providers themselves."""
OWN_PREFIXES = ("sim", "fake", "local", "openai")
"""Provider prefixes a module could test a name for: promptlab's own, and litellm's OpenAI-compatible one."""
KIND_HELPERS = {"is_simulated", "is_own", "is_local", "is_scripted", "OWN_PROVIDERS", "target_of", "supports_logprobs"}
NAME_VARIABLES = {"model", "target", "name", "model_name"}
"""What a model name is called where one is cut at its '/' to read its prefix."""


def _cuts_a_name(node: ast.Call) -> bool:
    """`model.split('/')`, `target.partition('/')` ...: a model name cut at its prefix."""
    func = node.func
    assert isinstance(func, ast.Attribute)
    named = func.value.id if isinstance(func.value, ast.Name) else getattr(func.value, "attr", None)
    first = node.args[0] if node.args else None
    slash = isinstance(first, ast.Constant) and first.value == "/"
    return slash and named in NAME_VARIABLES and func.attr in ("partition", "split", "rpartition", "rsplit")


def prefix_tests(tree: ast.AST) -> list[str]:
    """Where a module reads a model's kind from its name: a literal 'sim/' or 'openai/' (outside an f-string that
    builds a name), a startswith/endswith of such a prefix, a model name cut at its '/', a comparison with a
    provider's prefix, or a helper of the old kind (`is_simulated`, `is_own`, `is_local`, ...)."""
    in_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in ast.walk(n)}
    slashed = {f"{p}/" for p in OWN_PREFIXES}
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and node.value in slashed and id(node) not in in_fstring:
            found.append(f"{line}: the literal {node.value!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith", "partition", "split", "removeprefix"):
                consts = [c.value for a in node.args for c in ast.walk(a) if isinstance(c, ast.Constant)]
                if any(isinstance(c, str) and c.startswith(tuple(slashed)) for c in consts):
                    found.append(f"{line}: {node.func.attr}({consts[0]!r})")
                elif _cuts_a_name(node):
                    found.append(f"{line}: a model name cut at its '/' ({ast.unparse(node)})")
        elif isinstance(node, ast.Compare):
            consts = [
                c.value
                for part in [node.left, *node.comparators]
                for c in ast.walk(part)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
            if any(c in OWN_PREFIXES or c in slashed for c in consts):
                found.append(f"{line}: a comparison with a provider's prefix")
        elif isinstance(node, (ast.FunctionDef, ast.Name, ast.alias)):
            named = node.name if isinstance(node, (ast.FunctionDef, ast.alias)) else node.id
            if named in KIND_HELPERS:
                found.append(f"{line}: {named}")
    return found


def test_no_module_outside_the_model_registry_reads_a_model_name() -> None:
    """Callers ask the resolved model (`promptlab.llm.providers.resolved.resolve_model`) what it is, never its name."""
    wrong = [
        f"{name}:{hit}" for name, tree in TREES.items() if name not in MODEL_REGISTRY for hit in prefix_tests(tree)
    ]
    assert wrong == []


def test_the_prefix_scan_finds_what_it_looks_for() -> None:
    code = (
        "def is_simulated(m): return m.startswith('sim/')\n"
        "x = m.partition('/')[0] == 'fake'\n"
        "y = 'local/'\n"
        "z = f'fake/{id}'\n"
        "direct = model.startswith('openai/')\n"
        "provider = model.split('/', 1)[0] if '/' in model else 'openai'\n"
        "url = base.rstrip('/').split('/')\n"
    )
    hits = prefix_tests(ast.parse(code))
    # not line 4 (an f-string that builds a name) nor line 7 (a URL cut at its slashes)
    assert {hit.partition(":")[0] for hit in hits} == {"1", "2", "3", "5", "6"}
    assert any("is_simulated" in h for h in hits) and any("startswith" in h for h in hits)


BELOW_THE_DOOR = (
    "promptlab.llm.call",
    "promptlab.llm.spending",
    "promptlab.llm.concurrency",
    "promptlab.llm.cache",
    "promptlab.llm.local",
)
"""Where a call runs once its model is resolved: every step there asks the `ResolvedModel`, never a name."""
MODEL_NAME_PARAMETERS = {"model", "models", "target", "targets", "name", "names", "model_name"}
NAMES_TAKEN_AT_A_DOOR = {
    "promptlab.llm.call.entry:complete.model": "the door: the name the caller wrote, resolved by build_request",
    "promptlab.llm.call.entry:acomplete.model": "the door, async",
    "promptlab.llm.call.request:build_request.model": "the door's one resolution (`resolve_model`)",
    "promptlab.llm.call.preflight:validate_model_name.model": "a door of its own: a loop config's field, checked "
    "before any call",
    "promptlab.llm.call.preflight:problem.model": "a door of its own: one line of `preflight`'s message",
    "promptlab.llm.call.preflight:warm_up.models": "a door of its own: the names a script warms up for, before any call",
    "promptlab.llm.call.preflight:preflight.models": "a door of its own: every name of a run or sweep, checked "
    "before anything is written",
    "promptlab.llm.call.settings:Settings.check_models.models": "names checked against the override names a user "
    "wrote, before any call",
    "promptlab.llm.spending.tally:Tally.add_failure.model": "a record's key: totals count by the name a caller "
    "wrote, as results on disk hold it",
    "promptlab.llm.spending.tally:Usage.add_failure.model": "the same record's key",
    "promptlab.llm.call.completion:_field.name": "a reply field's name, not a model's",
    "promptlab.llm.call.wire:_count.name": "a usage field's name, not a model's",
    "promptlab.llm.concurrency.call_loop:LoopThread.__init__.name": "a thread's name",
}
"""String parameters below the door that are not a model name a step would resolve again, each with its reason."""
GGUF_NAMES = "promptlab.llm.local.pool"
"""The local pool's `name` is a GGUF model file's name (`local/<name>`'s part after the prefix), not a model name."""


def model_name_parameters(name: str, tree: ast.AST) -> list[str]:
    """'module:function.parameter' of each parameter called like a model name and typed as a string (`str`,
    `str | None`, `Iterable[str]` ...) in the module's functions and methods."""
    found = []

    def walk(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{where}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                    typed = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                    if arg.arg in MODEL_NAME_PARAMETERS and re.search(r"\bstr\b", typed):
                        found.append(f"{name}:{where}{child.name}.{arg.arg}")
                walk(child, f"{where}{child.name}.")

    walk(tree, "")
    return found


def names_below_the_door(trees: dict[str, ast.AST]) -> list[str]:
    return [
        hit
        for name, tree in trees.items()
        if name.startswith(BELOW_THE_DOOR) and name != GGUF_NAMES
        for hit in model_name_parameters(name, tree)
        if hit not in NAMES_TAKEN_AT_A_DOOR
    ]


def test_no_function_below_the_call_s_door_takes_a_model_name() -> None:
    """A call resolves its model once, at its door (`complete`, `acomplete`, `build_request`); every step below
    it (the protocol, transports, failures, the cache key, the spending cap, limits, the in-process models)
    takes the `ResolvedModel` and asks it, so no step can resolve a name again, or read its prefix."""
    assert names_below_the_door(TREES) == []
    stale = [hit for hit in NAMES_TAKEN_AT_A_DOOR if hit.partition(":")[0] not in MODULES]
    assert stale == []


def test_the_model_name_scan_finds_a_planted_name() -> None:
    """The scan above sees a string `model` in a function, a method and an optional one, and leaves the resolved
    model alone (so it can fail)."""
    planted = ast.parse(
        "def price(model: str) -> float: ...\n"
        "class Cap:\n    def charge(self, target: str | None, cost: float) -> None: ...\n"
        "def checked(models: Iterable[str]) -> None: ...\n"
        "def fine(model: ResolvedModel, text: str) -> None: ...\n"
    )
    hits = names_below_the_door({"promptlab.llm.spending.planted": planted, "promptlab.sweeps.planted": planted})
    assert hits == [
        "promptlab.llm.spending.planted:price.model",
        "promptlab.llm.spending.planted:Cap.charge.target",
        "promptlab.llm.spending.planted:checked.models",
    ]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_under_400_lines(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{MODULES[name]} has {lines} lines"


def test_functions_in_the_call_path_and_loop_runtime_are_short() -> None:
    long = []
    for name, tree in TREES.items():
        rel = MODULES[name].relative_to(PACKAGE).as_posix()
        if not rel.startswith(SHORT_FUNCTIONS):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    assert long == []


MAX_ANY_FUNCTION_LINES = 80
"""The longest function anywhere in the package (the call path and loop runtime keep to MAX_FUNCTION_LINES)."""


def long_functions(tree: ast.AST, limit: int) -> list[str]:
    """`name:line (n lines)` of each function or method in `tree` longer than `limit` lines, docstring included."""
    return [
        f"{node.name}:{node.lineno} ({length} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > limit
    ]


def test_no_function_in_the_package_runs_past_80_lines() -> None:
    long = {name: found for name, tree in TREES.items() if (found := long_functions(tree, MAX_ANY_FUNCTION_LINES))}
    assert long == {}


def test_the_length_scan_finds_a_long_method() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(80))
    tree = ast.parse(f"class A:\n    def short(self):\n        pass\n\n    def long(self):\n{body}\n")
    assert long_functions(tree, MAX_ANY_FUNCTION_LINES) == ["long:5 (81 lines)"]


def test_the_root_names_the_documented_api_and_loads_lazily() -> None:
    import promptlab as pl

    for name in (
        "complete",
        "acomplete",
        "sweep",
        "load",
        "report",
        "run_p3ro",
        "evaluate_prompt",
        "calibration",
        "compare",
        "register_model",
        "Explorer",
        "RunBrowser",
    ):
        assert callable(getattr(pl, name)), name
    from importlib.metadata import version

    assert pl.__version__ == version("promptlab-loops")


HISTORY_IN_NAME = re.compile(r"round_?\d+|issue_?\d+", re.IGNORECASE)


def test_no_file_name_carries_a_round_or_an_issue_number() -> None:
    """Files are named by what they hold, not by when or why they were written (`round3_battery.py`,
    `issue41_battery.py`): a name with a round or issue number says nothing to a newcomer."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=PACKAGE.parent, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(tracked) > 100
    assert [path for path in tracked if HISTORY_IN_NAME.search(Path(path).name)] == []
    assert HISTORY_IN_NAME.search("issue41_battery.py") and HISTORY_IN_NAME.search("test_bad_input_round3.py")


MAX_DOCSTRING_LINES = 25


def test_no_module_docstring_is_longer_than_25_lines() -> None:
    """A module opens with a short summary; the long explanation lives in docs/ (the docstring points there)."""
    long = {
        name: len(doc.splitlines())
        for name, tree in TREES.items()
        if (doc := ast.get_docstring(tree)) and len(doc.splitlines()) > MAX_DOCSTRING_LINES
    }
    assert long == {}
    assert len(ast.get_docstring(TREES["promptlab.sweeps.run"]) or "") > 0  # the walk reads real docstrings


def test_the_maps_name_every_module_as_it_is() -> None:
    """docs/calls.md names every module of the call path (`llm/`, by its path in its room, e.g. `call/steps`), and the README's map every
    subpackage: a module added or renamed without its line in the map fails here."""
    root = PACKAGE.parent
    calls = (root / "docs" / "calls.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    unnamed = [
        str(p.relative_to(PACKAGE))
        for p in sorted((PACKAGE / "llm").rglob("*.py"))
        if p.name != "__init__.py"
        and not re.search(rf"\b{re.escape(p.relative_to(PACKAGE / 'llm').with_suffix('').as_posix())}\b", calls)
    ]
    assert unnamed == []
    subpackages = [p.name for p in sorted(PACKAGE.iterdir()) if (p / "__init__.py").exists()]
    assert len(subpackages) >= 9
    assert [name for name in subpackages if f"`promptlab.{name}`" not in readme] == []
