"""The `calculator` tool: arithmetic on a parsed expression tree, never `eval`."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .registry import Tool, ToolError

MAX_EXPRESSION = 500
"""Longest expression accepted (characters)."""
MAX_POWER_BITS = 4096
"""Largest integer power result allowed, in bits (a guard against `9**9**9`)."""

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


class CalculatorInput(BaseModel):
    """Input of the calculator tool."""

    model_config = ConfigDict(extra="forbid")

    expression: str = Field(min_length=1, max_length=MAX_EXPRESSION)
    """An arithmetic expression such as '(3 + 4) * 2 ** 3 / sqrt(16)'."""


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression.

    Allowed: numbers, + - * / // % **, unary + and -, parentheses, the constants pi, e, tau and the
    functions abs, round, min, max, sqrt, log, log10, log2, exp, sin, cos, tan, floor, ceil.

    Raises:
        ToolError: a syntax error, anything outside the allowed set, division by zero, a result that
            is too large or not finite.
    """
    if len(expression) > MAX_EXPRESSION:
        raise ToolError(f"expression too long ({len(expression)} characters, at most {MAX_EXPRESSION})")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ToolError(f"not an arithmetic expression: {expression!r} ({e.msg})") from e
    try:
        value = _eval(tree.body)
    except ZeroDivisionError as e:
        raise ToolError(f"division by zero in {expression!r}") from e
    except OverflowError as e:
        raise ToolError(f"result too large in {expression!r}") from e
    except (ValueError, TypeError) as e:
        raise ToolError(f"cannot compute {expression!r}: {e}") from e
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"the result of {expression!r} is not a finite number")
    return value


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ToolError(f"only numbers are allowed, got {node.value!r}")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolError(f"unknown name {node.id!r}; constants: {', '.join(_CONSTANTS)}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ToolError(f"unknown function; allowed functions: {', '.join(_FUNCTIONS)}")
        if node.keywords:
            raise ToolError("keyword arguments are not allowed")
        return _FUNCTIONS[node.func.id](*[_eval(a) for a in node.args])
    raise ToolError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _check_power(base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        if exponent * math.log2(abs(base)) > MAX_POWER_BITS:
            raise ToolError(f"{base} ** {exponent} is too large (over {MAX_POWER_BITS} bits)")


def _calculate(args: dict[str, Any]) -> dict[str, Any]:
    return {"expression": args["expression"], "result": evaluate(args["expression"])}


def calculator_tool() -> Tool:
    """The `calculator` tool: {"expression": "..."} -> {"expression", "result"}."""
    return Tool(
        name="calculator",
        description="Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, log, sin, "
        "cos, min, max, round, pi, e) and return the number.",
        execute=_calculate,
        input_model=CalculatorInput,
        string_arg="expression",
        render=lambda out: str(out["result"]),
    )
