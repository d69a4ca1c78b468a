"""A safe arithmetic evaluator for the `calculate` tool: Python's parser, our own walker.

Only numbers, + - * / // % ** (and ^ as a power), parentheses and a few math functions and
constants are allowed; names, attributes, subscripts and everything else are refused.
Limits keep a hostile expression from eating the CPU or memory (9 ** 9 ** 9 and the like).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from membot.llm.tools.registry import ToolError

MAX_EXPRESSION_CHARS = 500
MAX_POWER_EXPONENT = 10_000
MAX_INT_BITS = 4_096
MAX_DEPTH = 50


class CalcError(ToolError):
    """The expression is not allowed or cannot be computed; the message says why, and goes
    back to the model as the tool's error."""


Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitXor: operator.pow,  # people write 2^10 for a power; nobody means XOR here
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "ln": math.log,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "min": min,
    "max": max,
    "factorial": math.factorial,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def evaluate(expression: str) -> Number:
    text = expression.strip().replace("×", "*").replace("÷", "/")
    if not text:
        raise CalcError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalcError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise CalcError(f"cannot parse {expression!r} as arithmetic") from None
    try:
        return _eval(tree.body, 0)
    except ZeroDivisionError:
        raise CalcError("division by zero") from None
    except OverflowError:
        raise CalcError("the result is too large") from None
    except (ValueError, TypeError) as exc:
        raise CalcError(f"math error: {exc}") from None


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalcError("the expression is nested too deeply")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value: Number = node.value  # type: ignore[assignment]  # narrowed by the check above
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, depth + 1))  # type: ignore[no-any-return]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if type(node.op) in (ast.Pow, ast.BitXor):
            _check_power(left, right)
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, complex):
            raise CalcError("the result is not a real number")
        return _check_size(result)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        args = [_eval(arg, depth + 1) for arg in node.args]
        if node.func.id == "factorial" and (
            not args or not isinstance(args[0], int) or args[0] > 1000
        ):
            raise CalcError("factorial takes one whole number up to 1000")
        return _check_size(_FUNCTIONS[node.func.id](*args))
    raise CalcError(
        f"{_describe(node)} is not allowed; use numbers, + - * / ** ( ) and math functions"
    )


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > MAX_POWER_EXPONENT and abs(base) not in (0, 1):
        raise CalcError("the exponent is too large")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:  # noqa: SIM102
        # Exact integer powers grow without bound; floats overflow on their own.
        if base and abs(base).bit_length() * exponent > MAX_INT_BITS:
            raise CalcError("the result is too large")


def _check_size(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalcError("the result is too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalcError("the result is not a finite number")
    return value


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Call):
        return "this function call"
    return f"the syntax {type(node).__name__}"


def format_number(value: Number) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return format(value, ".12g")
    return str(value)
