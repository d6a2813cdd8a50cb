"""Runs test asserts against a solution in the sandbox, each test on its own (see sandbox_runner).

    results = run_tests(["assert add(1, 2) == 3"], solution="def add(a, b): return a + b")
    [r.ok for r in results]

Used by the grader (a fresh sandbox holding only solution.py) and by the run_tests tool (the
trajectory's SandboxSession, whose work dir holds the model's solution.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
from collections.abc import Sequence
from pathlib import Path

from mimojax.sandbox.bwrap import SandboxResult, SandboxSession, run_untrusted

RUNNER_SOURCE = Path(__file__).with_name("sandbox_runner.py").read_text()
PER_TEST_TIMEOUT_S = 2.0
WORKERS = 4  # tests run in parallel inside one sandbox; each is its own process
MEMORY_MB = 512
# The runner's sandbox may spend this much beyond its tests' share of the clock (start-up).
_SLACK_S = 3.0


class HarnessError(RuntimeError):
    """The runner itself did not start or answer: an infra problem, not the solution's fault."""


@dataclasses.dataclass(frozen=True)
class TestOutcome:
    """One test: passed or not, and why not (the last stderr line, a timeout ...)."""

    test: str
    ok: bool
    error: str = ""


def total_timeout_s(n_tests: int, per_test_s: float = PER_TEST_TIMEOUT_S) -> float:
    """The sandbox clock for n tests: every test may use its whole timeout."""
    return per_test_s * math.ceil(max(n_tests, 1) / WORKERS) + _SLACK_S


def run_tests(
    tests: Sequence[str],
    *,
    solution: str | None = None,
    session: SandboxSession | None = None,
    per_test_s: float = PER_TEST_TIMEOUT_S,
    memory_mb: int = MEMORY_MB,
    allow_unsandboxed: bool = False,
) -> list[TestOutcome]:
    """Each test's outcome against `solution` (a fresh sandbox) or the session's solution.py."""
    if (solution is None) == (session is None):
        raise ValueError("run_tests: give either solution (source text) or session")
    tests = [str(t) for t in tests]
    if not tests:
        return []
    nonce = secrets.token_hex(16)
    spec = {"tests": tests, "timeout_s": per_test_s, "workers": WORKERS}
    stdin = nonce + "\n" + json.dumps(spec)
    timeout = total_timeout_s(len(tests), per_test_s)
    if session is not None:
        result = session.run(RUNNER_SOURCE, "python", timeout_s=timeout, stdin=stdin)
    else:
        result = run_untrusted(
            RUNNER_SOURCE,
            "python",
            timeout_s=timeout,
            memory_mb=memory_mb,
            files={"solution.py": solution},
            stdin=stdin,
            allow_unsandboxed=allow_unsandboxed,
        )
    return _parse(result, nonce, tests)


def _parse(result: SandboxResult, nonce: str, tests: list[str]) -> list[TestOutcome]:
    """Trusts only nonce-stamped lines; a test without one failed (the run was cut short)."""
    ready, found = False, {}
    prefix = nonce + " "
    for line in result.stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            msg = json.loads(line[len(prefix) :])
        except json.JSONDecodeError:
            continue
        if msg.get("ready"):
            ready = True
        elif isinstance(msg.get("i"), int) and 0 <= msg["i"] < len(tests):
            found[msg["i"]] = (bool(msg.get("ok")), str(msg.get("err", "")))
    if not ready:
        # The runner speaks before any solution code runs, so silence is the harness's fault.
        raise HarnessError(
            f"code test runner did not start (exit {result.exit_code}, "
            f"violation {result.violation}): {result.stderr[-500:]!r}"
        )
    why = f"not run: the sandbox stopped ({result.violation or f'exit {result.exit_code}'})"
    return [TestOutcome(t, *found.get(i, (False, why))) for i, t in enumerate(tests)]
