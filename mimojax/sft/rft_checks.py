"""Which graded-correct answers an RFT warm-up keeps (`sft.rft.keep`).

A 135M model's "correct" samples on arithmetic word problems are mostly lucky hits: the math
grader reads the last number, so "7 + 3 = 10 shells. ... Number of shells = 7 + 1" scores 1 for a
truth of 1. Fine-tuning on such rows teaches the noise. `worked` keeps only answers whose
arithmetic is shown and true: at least one `a op b = c`, every such equation holds exactly, and
the last one's result is the ground truth. It is a rule check (verl's "verifiable" in the strict
sense), not a judge: it never reads the prose.
"""

from __future__ import annotations

import re
from fractions import Fraction

# "38 + 27 = 65", "10 - 9 = 1", "2 * 9 = 18", "3 x 8 = 24", "12 / 4 = 3"; commas in the
# numbers are thousands separators. In a chain "2 + 3 = 5 + 1 = 6" only the first link is read.
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
_EQUATION = re.compile(rf"({_NUM})\s*([+\-*/x×÷])\s*({_NUM})\s*=\s*({_NUM})")


def _value(token: str) -> Fraction:
    return Fraction(token.replace(",", ""))


def _holds(left: str, op: str, right: str, result: str) -> bool:
    a, b, c = _value(left), _value(right), _value(result)
    if op == "+":
        return a + b == c
    if op == "-":
        return a - b == c
    if op in "*x×":
        return a * b == c
    return b != 0 and a / b == c  # "/" and "÷"


def worked_answer(text: str, ground_truth: str | None) -> bool:
    """True when `text` shows its arithmetic, every equation in it holds and the last one's
    result equals `ground_truth` (a plain number string)."""
    equations = _EQUATION.findall(text)
    if not equations or ground_truth is None:
        return False
    if not all(_holds(*eq) for eq in equations):
        return False
    try:
        return _value(equations[-1][3]) == Fraction(str(ground_truth).replace(",", "").strip())
    except (ValueError, ZeroDivisionError):
        return False


_RULES = {
    "correct": lambda text, ground_truth: True,  # the grader's verdict alone
    "worked": worked_answer,
}
KEEP_RULES = tuple(_RULES)


def keeps(rule: str, text: str, ground_truth: str | None) -> bool:
    """Whether a graded-correct answer passes `sft.rft.keep = rule`."""
    if rule not in _RULES:
        raise ValueError(f"sft.rft.keep: unknown rule {rule!r}; have {KEEP_RULES}")
    return _RULES[rule](text, ground_truth)
