"""The math world's tool: `calculator`, exact arithmetic over an AST walk (never `eval`).

Numbers are exact `Fraction`s (`0.1 + 0.2` is `0.3`); + - * / // % ** and parentheses, unary
+ and -. Limits keep a model's expression from hanging or exhausting the process: its length,
the exponent of a power (checked before the power is computed, so `9**9**9` returns at once),
and the digits of every intermediate result. A bad expression returns an `Error: ...`
observation (the tool agent counts it as a `tool_error`), never an exception.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from fractions import Fraction

from mimojax.rollout.tools import Tool, ToolEnv, ToolSettings, register_tool_env

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64  # |exponent| of a power
MAX_RESULT_DIGITS = 60  # digits of a numerator or denominator, intermediate results included
DECIMALS = 10  # places shown for a result that is not a terminating decimal


class CalcError(ValueError):
    """What is wrong with an expression (its message is the observation after "Error: ")."""


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def _checked(value: Fraction) -> Fraction:
    for part in (value.numerator, value.denominator):
        # 4 bits a digit is more than log2(10): a cheap first bound before converting to text
        if abs(part).bit_length() > 4 * MAX_RESULT_DIGITS or len(str(abs(part))) > (
            MAX_RESULT_DIGITS
        ):
            raise CalcError(f"result too large (more than {MAX_RESULT_DIGITS} digits)")
    return value


def _decimal(literal: str) -> Fraction:
    """A decimal literal's exact value, from its source text (`0.1` is 1/10, not a float's)."""
    mantissa, _, exponent = literal.lower().replace("_", "").partition("e")
    # beyond this exponent a nonzero mantissa (at most MAX_EXPRESSION_CHARS digits) leaves more
    # than MAX_RESULT_DIGITS digits: refuse before Fraction builds 10**exponent
    if exponent and abs(int(exponent)) > MAX_EXPRESSION_CHARS + MAX_RESULT_DIGITS:
        if mantissa.strip("0.") == "":
            return Fraction(0)
        raise CalcError(f"result too large (more than {MAX_RESULT_DIGITS} digits)")
    return Fraction(literal)


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalcError("exponent must be a whole number")
    if abs(exponent) > MAX_EXPONENT:
        raise CalcError(f"exponent too large (at most {MAX_EXPONENT})")
    if base == 0 and exponent < 0:
        raise CalcError("division by zero")
    # |base| ** |exp| digits ~ digits(base) * exp: refuse before computing a huge power
    digits = max(len(str(abs(base.numerator))), len(str(base.denominator)))
    if (digits - 1) * abs(int(exponent)) > MAX_RESULT_DIGITS:
        raise CalcError(f"result too large (more than {MAX_RESULT_DIGITS} digits)")
    return base ** int(exponent)


def _walk(node: ast.AST, source: str) -> Fraction:
    if isinstance(node, ast.Expression):
        return _walk(node.body, source)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _checked(Fraction(node.value))
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return _checked(_decimal(ast.get_source_segment(source, node) or repr(node.value)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _walk(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise CalcError("'^' is not a power here: use ** for powers")
        left, right = _walk(node.left, source), _walk(node.right, source)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        fn = _BINARY.get(type(node.op))
        if fn is None:
            raise CalcError(f"unsupported operator {type(node.op).__name__}")
        if right == 0 and isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod):
            raise CalcError("division by zero")
        return _checked(Fraction(fn(left, right)))
    raise CalcError(
        f"unsupported element {type(node).__name__!r} (only numbers, + - * / // % ** and "
        "parentheses)"
    )


def _format(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:  # a terminating decimal: exact
        places = 0
        while (value * 10**places).denominator != 1:
            places += 1
        text = f"{value.numerator * 10**places // value.denominator:d}"
        sign = "-" if text.startswith("-") else ""
        digits = text.lstrip("-").rjust(places + 1, "0")
        return f"{sign}{digits[:-places]}.{digits[-places:]}"
    scaled = round(value * 10**DECIMALS)
    text = _format(Fraction(scaled, 10**DECIMALS))
    return text


def evaluate(expression: str) -> str:
    """The value of `expression` as text, or `Error: <what is wrong>`; never raises."""
    try:
        if not isinstance(expression, str):
            raise CalcError("the expression must be a string")
        text = expression.strip()
        if len(text) > MAX_EXPRESSION_CHARS:
            raise CalcError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
        text = text.removesuffix("=").strip()
        if not text:
            raise CalcError("empty expression")
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError):
            raise CalcError(f"invalid syntax in {text!r}") from None
        return _format(_walk(tree, text))
    except CalcError as e:
        return f"Error: {e}"
    except Exception as e:  # RecursionError, MemoryError, ...: still an observation
        return f"Error: cannot evaluate ({type(e).__name__})"


def is_error(text: str) -> bool:
    """Whether a calculator observation reports an error."""
    return text.startswith("Error:")


CALCULATOR = Tool(
    "calculator",
    "Evaluate arithmetic: numbers, + - * / // % ** ( ).",
    # listed in every prompt: no more schema than the call needs (~100 tokens with the rest)
    {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
    lambda expression: evaluate(expression),
)


@register_tool_env("math")
def make(example: Mapping, settings: ToolSettings) -> ToolEnv:
    """The math world's ToolEnv: the calculator (stateless, no sandbox needed)."""
    return ToolEnv([CALCULATOR], max_observation_chars=settings.max_observation_chars)
