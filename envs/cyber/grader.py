"""Grader of the cyber world: does the candidate input crash the target or leak its flag?

The input is the trajectory's input.txt (extra["artifacts"]) if there is one, else the last
fenced block of the final response. The target is built fresh in its own sandbox with a flag
that is random per grading run, so only an input that makes the program leak it can succeed.
An input identical to a file the agent could read (sample input, source, extra files) scores 0.
The reference exploits are never in the agent's work dir, so they are not such files.
"""

from __future__ import annotations

import re
import secrets

from mimojax.envs.cyber.catalog import INPUT_FILE, program_for
from mimojax.envs.cyber.target import run_target
from mimojax.rewards.pool import register_reward

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def last_fenced_block(text: str) -> str | None:
    """The body of the last closed fenced block of `text`, whatever its language tag."""
    blocks = _FENCE.findall(str(text))
    return blocks[-1] if blocks else None


def find_input(response: str, extra: dict) -> str | None:
    """artifacts["input.txt"] if the agent wrote one, else the response's last fenced block."""
    artifacts = extra.get("artifacts")
    if isinstance(artifacts, dict) and isinstance(artifacts.get(INPUT_FILE), str):
        return artifacts[INPUT_FILE]
    return last_fenced_block(response)


def is_copy(candidate: str, shipped: dict[str, str]) -> bool:
    """Whether the input is (up to surrounding whitespace) one of the agent-visible files."""
    text = candidate.strip()
    return bool(text) and any(text == content.strip() for content in shipped.values())


@register_reward("cyber")
def grade(response: str, ground_truth: str, extra: dict | None = None) -> dict:
    """score 1 when the goal is met ("crash" or "flag"); dims crashed, flag_leaked,
    copied_input, format (1: an input was found)."""
    extra = dict(extra or {})
    program = program_for(str(ground_truth), extra)
    goal = extra.get("goal") or program.goal
    if goal not in ("crash", "flag"):
        raise ValueError(f"cyber task {ground_truth!r}: unknown goal {goal!r}")
    dims = {"crashed": 0.0, "flag_leaked": 0.0, "copied_input": 0.0, "format": 0.0}
    candidate = find_input(str(response), extra)
    if candidate is None:
        return {"score": 0.0, **dims}
    dims["format"] = 1.0
    if is_copy(candidate, program.agent_files()):
        return {"score": 0.0, **dims, "copied_input": 1.0}
    flag = "FLAG{" + secrets.token_hex(16) + "}"
    out = run_target(program, candidate, flag=flag)
    dims["crashed"] = float(out.crashed)
    dims["flag_leaked"] = float(out.flag_leaked)
    success = out.crashed if goal == "crash" else out.flag_leaked
    return {"score": float(success), **dims}
