"""Grader of the code world: the fraction of hidden tests the solution passes in the sandbox.

The solution is the trajectory's `solution.py` (extra["artifacts"]) if the model wrote one,
else the last ```python (or bare ```) block of the final response. Each hidden test runs in
its own process (sandbox_runner.py), so one failing, crashing or hanging test hides no other.
"""

from __future__ import annotations

import re

from mimojax.envs.code.harness import run_tests
from mimojax.envs.code.tasks_data import TASKS
from mimojax.rewards.pool import register_reward

SOLUTION_FILE = "solution.py"
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON_TAGS = ("", "python", "py", "python3", "py3")
_TASKS_BY_ID = {t.task_id: t for t in TASKS}


def last_code_block(text: str) -> str | None:
    """The body of the last closed ```python / ``` block of `text`; None if there is none."""
    blocks = [m.group(2) for m in _FENCE.finditer(str(text)) if m.group(1).lower() in _PYTHON_TAGS]
    return blocks[-1] if blocks else None


def find_solution(response: str, extra: dict) -> str | None:
    """artifacts["solution.py"] if non-empty, else the response's last Python block."""
    artifacts = extra.get("artifacts")
    if isinstance(artifacts, dict):
        text = artifacts.get(SOLUTION_FILE)
        if isinstance(text, str) and text.strip():
            return text
    block = last_code_block(response)
    return block if block is not None and block.strip() else None


def hidden_tests(ground_truth: str, extra: dict) -> list[str]:
    """The row's hidden tests, or the shipped task's (ground_truth is its id)."""
    tests = extra.get("hidden_tests")
    if not tests and ground_truth in _TASKS_BY_ID:
        tests = _TASKS_BY_ID[ground_truth].hidden
    if not tests:
        # A row without tests is a data bug: an infra failure, not a zero for the model.
        raise ValueError(f"code grader: no hidden tests for task {ground_truth!r}")
    return [str(t) for t in tests]


@register_reward("code")
def grade(response: str, ground_truth: str, extra: dict | None = None) -> dict:
    """score = fraction of hidden tests passed; tests_passed/tests_total; format 1 if code found."""
    extra = dict(extra or {})
    tests = hidden_tests(str(ground_truth), extra)
    solution = find_solution(str(response), extra)
    if solution is None:
        return {"score": 0.0, "tests_passed": 0, "tests_total": len(tests), "format": 0.0}
    passed = sum(o.ok for o in run_tests(tests, solution=solution))
    return {
        "score": passed / len(tests),
        "tests_passed": passed,
        "tests_total": len(tests),
        "format": 1.0,
    }
