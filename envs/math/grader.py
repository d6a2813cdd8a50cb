"""Answer checker for arithmetic and word problems: final number vs the ground truth.

The final answer is, in order of preference: the last `\\boxed{...}`, the last `#### X` line,
the last "Answer: X" / "The answer is X" / "final answer is X", else the last number in the
text. Numbers compare as exact rationals (sympy), so "12.0" == "12" and "1/2" == "0.5".
"""

from __future__ import annotations

import re

import sympy

from mimojax.rewards.pool import register_reward

# A number token: thousands commas ("1,234"), decimals, a fraction ("3/4", "3 / 4"). The
# minus sign counts only when glued to the digits and not to a preceding digit or word
# ("5-3" and "10 - 3" do not contain "-3").
_PLAIN = r"(?:\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_NUMBER = re.compile(rf"(?:(?<![\w)\]}}])-)?{_PLAIN}(?:\s*/\s*{_PLAIN})?")
_FULL_NUMBER = re.compile(rf"-?{_PLAIN}(?:/{_PLAIN})?")
_HASHES = re.compile(r"####")
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer\s*(?:is\b|:|=)|the\s+answer\s*(?:is\b|:|=)|\banswer\s*[:=])\s*",
    re.IGNORECASE,
)
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_TEXT = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{[^{}]*\}")
_BRACE = re.compile(r"[{}]")
_BOXED = "\\boxed"
# Longer digit strings are not answers; capping them keeps sympy (and int()'s 4300-digit
# limit) out of trouble on garbage input.
_MAX_NUMBER_CHARS = 200


def _normalize_latex(text: str) -> str:
    """Rewrite the LaTeX a model wraps numbers in (\\frac, \\text{}, \\$, {,}) as plain text."""
    text = _FRAC.sub(r"\1/\2", text)
    text = _TEXT.sub(" ", text)
    for old, new in (
        ("{,}", ","),
        ("\\!", ""),
        ("\\,", " "),
        ("\\$", " "),
        ("\\%", " "),
        ("\u2212", "-"),
    ):
        text = text.replace(old, new)
    return text


def _canonical(token: str) -> str | None:
    """A well-formed number string without spaces or thousands commas; None if not one."""
    token = re.sub(r"\s*/\s*", "/", token.strip())
    if len(token) > _MAX_NUMBER_CHARS or not _FULL_NUMBER.fullmatch(token):
        return None
    return token.replace(",", "")


def _numbers(text: str) -> list[str]:
    found = (_canonical(m.group()) for m in _NUMBER.finditer(text))
    return [n for n in found if n is not None]


def _last_boxed(text: str) -> str | None:
    """Contents of the last \\boxed{...}, braces matched; None if absent or unclosed."""
    start = text.rfind(_BOXED + "{")
    if start < 0:
        return None
    begin = start + len(_BOXED) + 1
    depth = 1
    for m in _BRACE.finditer(text, begin):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return text[begin : m.start()]
    return None


def _after_last(pattern: re.Pattern, text: str) -> str | None:
    """The rest of the line after the last match of `pattern`."""
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    return text[last.end() :].split("\n", 1)[0]


def _extract(text: str) -> tuple[str | None, bool]:
    """(answer, from_marker): the final answer and whether an explicit marker gave it."""
    boxed = _last_boxed(text)
    if boxed is not None:
        content = _normalize_latex(boxed)
        whole = _canonical(content)
        if whole is not None:
            return whole, True
        found = _numbers(content)
        if found:
            return found[-1], True
    for pattern in (_HASHES, _ANSWER_PHRASE):
        rest = _after_last(pattern, text)
        if rest is not None:
            found = _numbers(_normalize_latex(rest))
            if found:
                return found[0], True
    found = _numbers(_normalize_latex(text))
    return (found[-1], False) if found else (None, False)


def extract_answer(text: str) -> str | None:
    """The model's final numeric answer as a plain string ("1234", "-3/4"), or None."""
    return _extract(text)[0]


def _rational(text: str) -> sympy.Rational | None:
    """An exact rational from a plain number string; None if it is not one (never evals)."""
    token = _canonical(text)
    if token is None:
        return None
    numerator, _, denominator = token.partition("/")
    value = sympy.Rational(numerator)
    if denominator:
        den = sympy.Rational(denominator)
        if den == 0:
            return None
        value = value / den
    return value


def answers_equal(a: str, b: str) -> bool:
    """Same number? "12.0" == "12", "1/2" == "0.5", "1,000" == "1000"; non-numbers never are."""
    x, y = _rational(str(a)), _rational(str(b))
    return x is not None and y is not None and x == y


def _ground_truth_answer(ground_truth) -> str:
    text = _normalize_latex(str(ground_truth)).strip()
    whole = _canonical(text)
    if whole is not None:
        return whole
    # A full worked solution (GSM8K's "... #### 72") carries its answer at the end.
    answer = extract_answer(text)
    if answer is None:
        raise ValueError(f"math ground truth has no number: {str(ground_truth)[:80]!r}")
    return answer


@register_reward("math")
def grade(response: str, ground_truth: str, extra: dict | None = None) -> dict:
    """score = correct = 1.0 if the final answer equals ground_truth; format = 1.0 if marked."""
    truth = _ground_truth_answer(ground_truth)
    answer, marked = _extract(str(response))
    correct = float(answer is not None and answers_equal(answer, truth))
    return {"score": correct, "correct": correct, "format": float(marked)}
