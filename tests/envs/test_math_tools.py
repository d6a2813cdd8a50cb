"""envs/math/tools.py: the calculator's values against hand-computed cases and Python's own int /
Fraction arithmetic, its formatting, every error observation, limits that return at once, a
seeded fuzz that never raises, and the "math" tool env it registers."""

import json
import random
import time
from fractions import Fraction

import pytest

from mimojax.envs.math.tools import (
    CALCULATOR,
    MAX_EXPONENT,
    MAX_EXPRESSION_CHARS,
    MAX_RESULT_DIGITS,
    evaluate,
    is_error,
)
from mimojax.rollout.tools import ToolSettings, make_tool_env

UNSUPPORTED = "(only numbers, + - * / // % ** and parentheses)"


def test_limits_are_the_documented_constants():
    assert (MAX_EXPRESSION_CHARS, MAX_EXPONENT, MAX_RESULT_DIGITS) == (200, 64, 60)


@pytest.mark.parametrize(
    "expression, value",
    [
        # precedence and parentheses
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("12*(3+4)", "84"),
        ("2 * 3 ** 2", "18"),
        ("2 ** 3 ** 2", "512"),  # right-associative, as in Python
        ("10 - 4 - 3", "3"),
        ("100 / 10 / 5", "2"),
        ("((((7))))", "7"),
        # unary
        ("-3 + 5", "2"),
        ("-(2 - 9)", "7"),
        ("--4", "4"),
        ("+4", "4"),
        ("-2 ** 2", "-4"),  # as in Python: -(2**2)
        ("(-2) ** 2", "4"),
        ("(-2) ** 3", "-8"),
        # decimals are exact
        ("0.1 + 0.2", "0.3"),
        ("0.1 * 3", "0.3"),
        ("2.5 * 4", "10"),
        (".5 + .25", "0.75"),
        ("1.5e3", "1500"),
        ("0.12345678901234567890123", "0.12345678901234567890123"),  # not a float's 17 digits
        ("1e-59", "0." + "0" * 58 + "1"),
        # division and formatting
        ("7/2", "3.5"),
        ("-7/2", "-3.5"),
        ("1/8", "0.125"),
        ("6/3", "2"),
        ("1/3", "0.3333333333"),
        ("2/3", "0.6666666667"),  # rounded, not cut
        ("-1/3", "-0.3333333333"),
        ("1/7", "0.1428571429"),
        ("1/3 * 3", "1"),  # exact: no 0.9999999999
        ("1/2**64", "0.0000000000000000000542101086242752217003726400434970855712890625"),
        # powers
        ("2**10", "1024"),
        ("2**-2", "0.25"),
        ("2**64", str(2**64)),
        ("(1/2)**-3", "8"),
        ("0**0", "1"),
        ("7**0", "1"),
        # whitespace and a trailing "="
        ("  8 + 3 - 3 =  ", "8"),
        ("2*3=", "6"),
        # the digit limit is inclusive: 60 digits pass
        ("9" * 60, "9" * 60),
        ("-" + "9" * 60, "-" + "9" * 60),
        ("10**59", "1" + "0" * 59),
    ],
)
def test_values(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("a, b", [(-7, 2), (7, -2), (-7, -2), (7, 2), (17, 5), (-17, 5), (0, 3)])
def test_floor_division_and_modulo_follow_python_ints(a, b):
    assert evaluate(f"{a} // {b}") == str(a // b)
    assert evaluate(f"{a} % {b}") == str(a % b)
    assert evaluate(f"({a}) // ({b})") == str(a // b)


@pytest.mark.parametrize("a, b", [("-7.5", "2"), ("7.5", "-2"), ("-1/3", "1/4"), ("5", "-1.5")])
def test_floor_division_and_modulo_follow_python_fractions(a, b):
    fa, fb = Fraction(a), Fraction(b)  # Fraction parses "-1/3" itself
    assert evaluate(f"({a}) // ({b})") == str(fa // fb)
    # -1/3 % 1/4 is 1/6: shown rounded to 10 places
    assert abs(Fraction(evaluate(f"({a}) % ({b})")) - fa % fb) <= Fraction(1, 2 * 10**10)


def _random_tree(rng: random.Random, depth: int) -> tuple[str, Fraction]:
    """A random expression and its value by Python's Fraction arithmetic (None: divides by 0)."""
    if depth == 0 or rng.random() < 0.3:
        n = rng.randint(-30, 30)
        if rng.random() < 0.3:
            tenths = Fraction(rng.randint(0, 99), 100)
            text = f"{abs(n)}.{tenths.numerator * 100 // tenths.denominator:02d}"
            value = abs(n) + tenths
            return (f"(-{text})", -value) if n < 0 else (text, value)
        return (f"({n})", Fraction(n)) if n < 0 else (str(n), Fraction(n))
    op = rng.choice(["+", "-", "*", "/", "//", "%"])
    (lt, lv), (rt, rv) = _random_tree(rng, depth - 1), _random_tree(rng, depth - 1)
    if lv is None or rv is None or (op in ("/", "//", "%") and rv == 0):
        return f"({lt} {op} {rt})", None
    value = {
        "+": lambda: lv + rv,
        "-": lambda: lv - rv,
        "*": lambda: lv * rv,
        "/": lambda: lv / rv,
        "//": lambda: Fraction(lv // rv),
        "%": lambda: lv % rv,
    }[op]()
    return f"({lt} {op} {rt})", value


def test_random_expressions_match_fraction_arithmetic():
    rng = random.Random(0)
    checked = 0
    for _ in range(500):
        expression, want = _random_tree(rng, 3)
        got = evaluate(expression)
        if want is None:
            assert got == "Error: division by zero", expression
            continue
        if max(len(str(abs(want.numerator))), len(str(want.denominator))) > MAX_RESULT_DIGITS:
            continue  # cannot happen at this depth, but the reference should not assume it
        checked += 1
        d = want.denominator
        while d % 2 == 0:
            d //= 2
        while d % 5 == 0:
            d //= 5
        if want.denominator == 1:
            assert got == str(want.numerator), expression
        elif d == 1:  # terminating: the exact decimal
            assert Fraction(got) == want and "." in got, expression
        else:  # rounded to 10 places, trailing zeros stripped
            assert abs(Fraction(got) - want) <= Fraction(1, 2 * 10**10), expression
            assert len(got.split(".")[-1]) <= 10 and not got.endswith("0"), (expression, got)
    assert checked > 300


@pytest.mark.parametrize(
    "expression, message",
    [
        ("1/0", "Error: division by zero"),
        ("5 // 0", "Error: division by zero"),
        ("5 % (2-2)", "Error: division by zero"),
        ("1 / (0.5 - 1/2)", "Error: division by zero"),
        ("0 ** -1", "Error: division by zero"),
        ("2+*3", "Error: invalid syntax in '2+*3'"),
        ("(1+2", "Error: invalid syntax in '(1+2'"),
        ("8 plus 3", "Error: invalid syntax in '8 plus 3'"),
        ("  ", "Error: empty expression"),
        ("=", "Error: empty expression"),
        ("3^2", "Error: '^' is not a power here: use ** for powers"),
        ("2**0.5", "Error: exponent must be a whole number"),
        ("4**(1/2)", "Error: exponent must be a whole number"),
        ("2**65", "Error: exponent too large (at most 64)"),
        ("2**-65", "Error: exponent too large (at most 64)"),
        ("9**9**9", "Error: exponent too large (at most 64)"),
        ("10**59*10**5", "Error: result too large (more than 60 digits)"),
        ("9" * 61, "Error: result too large (more than 60 digits)"),
        ("9" * 60 + " + 1", "Error: result too large (more than 60 digits)"),
        ("99**40", "Error: result too large (more than 60 digits)"),
        ("(10**30)**64", "Error: result too large (more than 60 digits)"),
        ("1e400", "Error: result too large (more than 60 digits)"),
        ("1e-400", "Error: result too large (more than 60 digits)"),  # not a float's 0.0
        ("1e99999999999999999999", "Error: result too large (more than 60 digits)"),
        ("__import__('os')", f"Error: unsupported element 'Call' {UNSUPPORTED}"),
        ("__import__('os').system('true')", f"Error: unsupported element 'Call' {UNSUPPORTED}"),
        ("abs(-3)", f"Error: unsupported element 'Call' {UNSUPPORTED}"),
        ("x + 1", f"Error: unsupported element 'Name' {UNSUPPORTED}"),
        ("pi", f"Error: unsupported element 'Name' {UNSUPPORTED}"),
        ("'a' * 3", f"Error: unsupported element 'Constant' {UNSUPPORTED}"),
        ("2j", f"Error: unsupported element 'Constant' {UNSUPPORTED}"),
        ("True + 1", f"Error: unsupported element 'Constant' {UNSUPPORTED}"),
        ("1 < 2", f"Error: unsupported element 'Compare' {UNSUPPORTED}"),
        ("(1).real", f"Error: unsupported element 'Attribute' {UNSUPPORTED}"),
        ("[1, 2]", f"Error: unsupported element 'List' {UNSUPPORTED}"),
        ("[1][0]", f"Error: unsupported element 'Subscript' {UNSUPPORTED}"),
        ("(1, 2)", f"Error: unsupported element 'Tuple' {UNSUPPORTED}"),
        ("~1", f"Error: unsupported element 'UnaryOp' {UNSUPPORTED}"),
        ("lambda: 1", f"Error: unsupported element 'Lambda' {UNSUPPORTED}"),
        ("1 << 3", "Error: unsupported operator LShift"),
        ("6 & 3", "Error: unsupported operator BitAnd"),
    ],
)
def test_bad_expressions_are_error_observations(expression, message):
    out = evaluate(expression)
    assert out == message
    assert is_error(out)


def test_successes_are_not_errors():
    assert not is_error(evaluate("1+1"))
    assert not is_error("-0.5")


def test_too_long_is_refused_before_parsing():
    longest = "1+" * ((MAX_EXPRESSION_CHARS - 1) // 2) + "1"
    assert len(longest) <= MAX_EXPRESSION_CHARS
    assert evaluate(longest) == str((MAX_EXPRESSION_CHARS - 1) // 2 + 1)
    too_long = "1+" * (MAX_EXPRESSION_CHARS // 2) + "1"
    assert evaluate(too_long) == "Error: expression longer than 200 characters"
    assert evaluate("(" * 300 + "1" + ")" * 300) == "Error: expression longer than 200 characters"


def test_huge_powers_return_at_once():
    start = time.perf_counter()
    for expression in (
        "9**9**9",
        "9**9**9**9",
        "2**64**64",
        "(2**64)**64",
        "((((((((9**64))))))))",
        "99999**64",
        "(1/99999)**64",
        "1e9999999999 ** 64",
        "-" * 150 + "9**9**9",
    ):
        assert is_error(evaluate(expression)), expression
    assert time.perf_counter() - start < 1.0


def test_fuzz_never_raises_and_is_fast():
    rng = random.Random(1234)
    alphabet = "0123456789" * 3 + "+-*/%()" * 3 + ".^= e_x'\"[],<"
    slowest = 0.0
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        start = time.perf_counter()
        out = evaluate(text)
        slowest = max(slowest, time.perf_counter() - start)
        assert isinstance(out, str) and out, text
    # numbers and powers only: the pieces that could blow up
    for _ in range(2000):
        parts = [rng.choice(["9", "99", "10", "2", "0", "0.5", "1e9", "-3", "(1/7)"])]
        for _ in range(rng.randint(1, 6)):
            parts += [rng.choice(["**", "*", "//", "%", "/"]), rng.choice(["9", "64", "-2", "0"])]
        text = "".join(parts)
        start = time.perf_counter()
        assert isinstance(evaluate(text), str), text
        slowest = max(slowest, time.perf_counter() - start)
    assert slowest < 0.2
    assert is_error(evaluate(None))  # not a string: still an observation


def test_the_math_tool_env_runs_the_calculator():
    env = make_tool_env({"env": "math", "prompt": "x"}, ToolSettings())
    assert [s["function"]["name"] for s in env.schemas()] == ["calculator"]
    ok = env.call_sync("calculator", {"expression": "12*(3+4)"})
    assert (ok.text, ok.error) == ("84", None)
    bad = env.call_sync("calculator", {"expression": "1/0"})
    # the ToolEnv marks a returned "Error: ..." observation as a tool_error
    assert (bad.text, bad.error) == ("Error: division by zero", "tool_error")
    wrong = env.call_sync("calculator", {"expr": "1"})
    assert wrong.error == "bad_arguments" and wrong.text.startswith("Error: bad arguments")
    assert env.call_sync("calculator", {"expression": 12}).error == "bad_arguments"
    assert env.call_sync("calc", {"expression": "1"}).error == "unknown_tool"
    env.close()


def test_the_schema_is_short():
    schema = CALCULATOR.schema()
    assert schema["function"]["name"] == "calculator"
    assert schema["function"]["parameters"]["required"] == ["expression"]
    assert len(json.dumps(schema)) < 300  # listed in every prompt
