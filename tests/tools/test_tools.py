"""Tools: the registry, input validation, the calculator, search_docs, and tool errors as results."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from promptlab.errors import ConfigError
from promptlab.tools.builtin import BUILTIN_TOOLS, ToolEnv, build_tools
from promptlab.tools.calculator import calculator_tool, evaluate
from promptlab.tools.registry import Tool, ToolError, ToolRegistry
from promptlab.tools.search import default_docs_dir, search, search_docs_tool
from promptlab.tools.workspace import Workspace


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# registry ------------------------------------------------------------------------------------------
def test_unknown_tool_name_lists_the_known_ones() -> None:
    reg = build_tools(["calculator", "search_docs"])
    with pytest.raises(ConfigError, match="known tools: calculator, search_docs"):
        reg.get("weather")
    result = run(reg.run("weather", {"city": "Oslo"}))
    assert result.status == "error" and "unknown tool 'weather'" in (result.error or "")
    assert "calculator, search_docs" in (result.error or "") and result.input == {"city": "Oslo"}


def test_build_tools_rejects_unknown_names_and_workspace_tools_need_a_workspace(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown tool.*'nope'.*known tools:.*calculator"):
        build_tools(["calculator", "nope"])
    with pytest.raises(ConfigError, match="needs a workspace"):
        build_tools(["shell"])
    reg = build_tools(["shell", "read_file"], ToolEnv(workspace=Workspace(tmp_path / "ws")))
    assert reg.names() == ["shell", "read_file"]
    assert {"calculator", "search_docs", "search", "write_file", "read_file", "list_files", "shell"} <= set(
        BUILTIN_TOOLS
    )


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="already registered"):
        ToolRegistry([calculator_tool(), calculator_tool()])


class Greeting(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    times: int = 1


def test_pydantic_input_is_validated_with_defaults_and_bad_input_is_an_error_result() -> None:
    tool = Tool("greet", "Greets.", lambda a: ("hi " + a["name"]) * a["times"], input_model=Greeting)
    assert tool.input_schema["required"] == ["name"]
    ok = run(tool.run({"name": "Ada"}))
    assert ok.status == "success" and ok.output == "hi Ada" and ok.text == "hi Ada"
    bad = run(tool.run({"times": "many"}))
    assert bad.status == "error" and "name: Field required" in (bad.error or "")
    assert "times" in (bad.error or "")
    bare = run(tool.run("Ada"))
    assert bare.status == "error" and "takes an object input" in (bare.error or "")


def test_dict_schema_is_checked_with_jsonschema_and_async_tools_run() -> None:
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"sum": args["a"] + args["b"]}

    schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    tool = Tool("add", "Adds.", add, input_schema=schema)
    assert run(tool.run({"a": 2, "b": 3})).output == {"sum": 5}
    bad = run(tool.run({"a": "two"}))
    assert bad.status == "error" and "'two' is not of type 'number'" in (bad.error or "")
    assert "'b' is a required property" in (bad.error or "")
    with pytest.raises(ConfigError, match="not a valid JSON schema"):
        Tool("broken", "x", add, input_schema={"type": "no-such-type"})
    with pytest.raises(ConfigError, match="tool name"):
        Tool("has space", "x", add, input_schema=schema)


def test_exceptions_and_unsafe_outputs_become_error_results() -> None:
    def boom(args: dict[str, Any]) -> Any:
        raise RuntimeError("disk on fire")

    schema = {"type": "object"}
    failed = run(Tool("boom", "x", boom, input_schema=schema).run({}))
    assert failed.status == "error" and failed.error == "RuntimeError: disk on fire" and failed.output is None
    unsafe = run(Tool("nan", "x", lambda a: {"v": float("nan")}, input_schema=schema).run({}))
    assert unsafe.status == "error" and "not JSON-safe" in (unsafe.error or "")
    objects = run(Tool("obj", "x", lambda a: object(), input_schema=schema).run({}))
    assert objects.status == "error"


def test_describe_lists_each_tool_with_its_schema() -> None:
    text = build_tools(["calculator", "search_docs"]).describe()
    assert "- calculator:" in text and '"expression"' in text and "- search_docs:" in text and '"top_k"' in text
    assert '"title"' not in text


# calculator ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, value",
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("2 ** 10", 1024),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("-3 + +1", -2),
        ("sqrt(16) + abs(-2)", 6.0),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("round(2 * pi, 2)", 6.28),
        ("1.5e3 / 3", 500.0),
    ],
)
def test_calculator_computes(expr: str, value: float) -> None:
    assert evaluate(expr) == pytest.approx(value)


@pytest.mark.parametrize(
    "expr, message",
    [
        ("1/0", "division by zero"),
        ("__import__('os').system('true')", "unknown function"),
        ("(1).real", "Attribute is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("9 ** 9 ** 9", "too large"),
        ("2 +", "not an arithmetic expression"),
        ("sqrt(-1)", "cannot compute"),
        ("[1, 2]", "List is not allowed"),
        ("1" * 600, "too long"),
        ("exp(1000)", "too large"),
    ],
)
def test_calculator_refuses(expr: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        evaluate(expr)


def test_calculator_tool_takes_a_bare_string_and_reports_errors_as_results() -> None:
    tool = calculator_tool()
    ok = run(tool.run("6 * 7"))
    assert ok.output == {"expression": "6 * 7", "result": 42} and ok.text == "42"
    err = run(tool.run({"expression": "1/0"}))
    assert err.status == "error" and err.error == "division by zero in '1/0'"
    assert math.isclose(run(tool.run("e")).output["result"], math.e)


# search_docs ---------------------------------------------------------------------------------------
def test_shipped_docs_exist_and_are_found_by_keyword() -> None:
    docs = sorted(p.name for p in default_docs_dir().glob("*.md"))
    assert 5 <= len(docs) <= 8
    hits = search(default_docs_dir(), "few-shot examples order", top_k=2)
    assert hits[0]["file"] == "few_shot_prompting.md" and "example" in hits[0]["snippet"].lower()
    assert len(hits) <= 2 and hits == sorted(hits, key=lambda h: -h["score"])
    judge = search(default_docs_dir(), "judge position bias")
    assert judge[0]["file"] == "llm_as_judge.md"


def test_search_ranks_by_keywords_and_reports_missing_folders(tmp_path: Path) -> None:
    (tmp_path / "cats.md").write_text("Cats purr.\n\nA cat sleeps most of the day. Cats cats cats.")
    (tmp_path / "dogs.txt").write_text("Dogs bark. A dog may chase a cat once.")
    (tmp_path / "ignored.py").write_text("cat cat cat cat")
    tool = search_docs_tool(tmp_path)
    out = run(tool.run({"query": "cats", "top_k": 5})).output
    assert [m["file"] for m in out["matches"]] == ["cats.md"]
    both = run(tool.run("cat")).output["matches"]
    assert [m["file"] for m in both] == ["cats.md", "dogs.txt"]
    none = run(tool.run("giraffe"))
    assert none.status == "success" and none.output["matches"] == [] and "no document matches" in none.text
    stop = run(tool.run("the of and"))
    assert stop.status == "error" and "no searchable word" in (stop.error or "")
    missing = run(search_docs_tool(tmp_path / "nowhere").run("cat"))
    assert missing.status == "error" and "does not exist" in (missing.error or "")
    assert run(tool.run({"query": "cat", "top_k": 99})).status == "error"
    assert search_docs_tool(tmp_path, name="search").name == "search"


def test_secret_environment_values_are_redacted_from_every_tool_result(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-ant-" + "Zx81" * 6
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}

    def leaky(args: dict[str, Any]) -> dict[str, Any]:
        if args.get("q") == "fail":
            raise RuntimeError(f"could not use {secret}")
        return {"echo": [f"key is {secret}"]}

    tool = Tool("leaky", "Leaks.", leaky, input_schema=schema, render=lambda o: o["echo"][0])
    ok = run(tool.run({"q": secret}))
    assert ok.output == {"echo": ["key is [REDACTED:ANTHROPIC_API_KEY]"]}
    assert ok.text == "key is [REDACTED:ANTHROPIC_API_KEY]" and ok.input == {"q": "[REDACTED:ANTHROPIC_API_KEY]"}
    bad = run(tool.run({"q": "fail"}))
    assert bad.error == "RuntimeError: could not use [REDACTED:ANTHROPIC_API_KEY]"
    assert secret not in run(ToolRegistry([tool]).run("nope", {"q": secret})).model_dump_json()
