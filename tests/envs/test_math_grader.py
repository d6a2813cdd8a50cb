"""envs/math: the answer checker on hand-written cases and the fixed train / held-out files."""

import json
import re

import pytest

from mimojax.envs.math.grader import answers_equal, extract_answer, grade
from mimojax.envs.math.tasks import DATA_DIR, FAMILIES, INSTRUCTION, make_rows


@pytest.mark.parametrize(
    "text, answer",
    [
        ("The answer is 42.", "42"),
        ("5 + 3 = 8", "8"),
        ("She had 10 - 3 = 7 left, so \\boxed{7}. Check: 7 + 3 = 10", "7"),
        ("Work... #### 1,234\nmore text 99", "1234"),
        ("Answer: -3/4 because 1 - 7/4", "-3/4"),
        ("\\boxed{\\frac{1}{2}}", "1/2"),
        ("Final answer: 12.50 dollars, not 13", "12.50"),
        ("There were 5-3 apples", "3"),  # "5-3": the minus is not glued to a sign
        ("no number here", None),
        ("\\boxed{", None),
    ],
)
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize(
    "a, b, equal",
    [
        ("12.0", "12", True),
        ("1/2", "0.5", True),
        ("1,000", "1000", True),
        ("-3", "3", False),
        ("1/0", "0", False),
        ("abc", "abc", False),
        ("9" * 300, "9" * 300, False),  # over the length cap: never handed to sympy
    ],
)
def test_answers_equal(a, b, equal):
    assert answers_equal(a, b) is equal


def test_grade_scores_correct_and_format():
    assert grade("The answer is 17.", "17") == {"score": 1.0, "correct": 1.0, "format": 1.0}
    assert grade("I think 17", "17") == {"score": 1.0, "correct": 1.0, "format": 0.0}
    assert grade("The answer is 16.", "17")["score"] == 0.0
    # a GSM8K-style worked ground truth carries its answer after ####
    assert grade("\\boxed{72}", "48 + 24 = 72\n#### 72")["score"] == 1.0
    with pytest.raises(ValueError, match="math ground truth has no number"):
        grade("3", "none")


def test_make_rows_is_deterministic_distinct_and_correct():
    rows = make_rows(90, seed=5)
    assert rows == make_rows(90, seed=5) and rows != make_rows(90, seed=6)
    assert len({r["prompt"] for r in rows}) == 90
    assert [r["extra"]["family"] for r in rows[:3]] == ["add", "sub", "mul"]
    for r in rows:
        assert r["prompt"].endswith(INSTRUCTION) and r["env"] == "math"
        a, b = (int(x) for x in re.findall(r"\d+", r["prompt"]))
        want = {"add": a + b, "sub": a - b, "mul": a * b}[r["extra"]["family"]]
        assert int(r["ground_truth"]) == want
    assert set(FAMILIES) >= {"add", "sub", "mul", "two_step"}


def test_shipped_splits_are_disjoint():
    def load(name):
        with open(DATA_DIR / name) as f:
            return [json.loads(line) for line in f]

    train, test = load("arith_train.jsonl"), load("arith_test.jsonl")
    assert len(train) > 1000 and len(test) == 200
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in test}
    assert all(grade(r["ground_truth"], r["ground_truth"])["score"] == 1.0 for r in test)
