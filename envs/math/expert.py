"""Scripted-expert calculator traces: the chats of the math world's tool-use warm-up.

Each trace is a chat row {"messages", "env": "math"}: the user turn is a problem from this
world's own generators (the word-problem families of `tasks.py`, and bare expressions), the
assistant calls `calculator` in the exact Hermes format the tool agent parses, the tool turn
holds the calculator's real output, and the last assistant turn gives the answer. Some traces
first send a broken expression, read the error and call again. The warm-up teaches the tool's
use, not the answers: no trace comes from `data.train_files`, and a question of any held-out
file (`data/*_test.jsonl`) is never written.

    python -m mimojax.envs.math.expert --n 8     # prints 8 traces
"""

from __future__ import annotations

import argparse
import json
import random

from mimojax.envs.math.tasks import DATA_DIR, FAMILIES, INSTRUCTION, Problem
from mimojax.envs.math.tools import evaluate
from mimojax.rollout.tool_calls import format_tool_call

# Phrasings, chosen at random per trace: variety keeps the warm-up from teaching one string.
_CALL_LEADS = ("", "", "Let me calculate.\n", "I'll use the calculator.\n", "Computing it:\n")
_ANSWERS = ("{v}", "{v}", "{v}", "The answer is {v}.", "Answer: {v}")
_RETRY_LEADS = ("", "Let me fix the expression.\n", "Retrying with valid syntax.\n")
_BARE_ASKS = ("What is {e}?", "Compute {e}.", "Calculate {e}.", "{e} = ?")


def _spaced(expression: str, rng: random.Random) -> str:
    """The same expression with or without spaces around its operators."""
    return expression if rng.random() < 0.7 else expression.replace(" ", "")


def _bare(rng: random.Random) -> Problem:
    """A bare expression (one or two operations, integer result)."""
    a, b, c = rng.randint(2, 99), rng.randint(2, 40), rng.randint(2, 12)
    kind = rng.randrange(6)
    if kind == 0:
        e = f"{a} + {b} * {c}"
    elif kind == 1:
        e = f"({a} - {b}) * {c}"
    elif kind == 2:
        e = f"{a * c} / {c}"
    elif kind == 3:
        e = f"{a} * {b}"
    elif kind == 4:
        e = f"{a} - {b} + {c}"
    else:
        e = f"{a} // {c} + {b} % {c}"
    q = rng.choice(_BARE_ASKS).format(e=e)
    return Problem(q, int(evaluate(e)), e)


def _broken(expression: str, rng: random.Random) -> str:
    """A wrong first attempt the calculator rejects (words, `x`, `^`, a dangling operator)."""
    kind = rng.randrange(4)
    if kind == 0:
        return (
            expression.replace(" + ", " plus ").replace(" - ", " minus ").replace(" * ", " times ")
        )
    if kind == 1:
        return expression.replace("*", "x") if "*" in expression else expression + " +"
    if kind == 2:
        return expression + " ^ 1"
    return expression + " -"


def held_out_questions() -> set[str]:
    """The user text of every held-out row this world ships (never written as a trace)."""
    out = set()
    for path in sorted(DATA_DIR.glob("*_test.jsonl")):
        with open(path) as f:
            out.update(json.loads(line)["prompt"] for line in f if line.strip())
    return out


def expert_trace(problem: Problem, rng: random.Random, *, with_error: bool) -> list[dict]:
    """One chat: user problem -> calculator call(s) with real outputs -> the answer."""
    messages = [{"role": "user", "content": f"{problem.question} {INSTRUCTION}"}]
    expression = _spaced(problem.expression, rng)
    if with_error:
        bad = _broken(problem.expression, rng)
        observation = evaluate(bad)
        if observation.startswith("Error:"):  # an attempt the calculator happens to accept
            lead = rng.choice(_CALL_LEADS)
            messages += [
                {
                    "role": "assistant",
                    "content": lead + format_tool_call("calculator", {"expression": bad}),
                },
                {"role": "tool", "content": observation},
            ]
            lead = rng.choice(_RETRY_LEADS)
        else:
            lead = rng.choice(_CALL_LEADS)
    else:
        lead = rng.choice(_CALL_LEADS)
    result = evaluate(expression)
    if result != str(problem.answer):
        raise AssertionError(f"expert: {expression!r} gives {result}, not {problem.answer}")
    messages += [
        {
            "role": "assistant",
            "content": lead + format_tool_call("calculator", {"expression": expression}),
        },
        {"role": "tool", "content": result},
        {"role": "assistant", "content": rng.choice(_ANSWERS).format(v=result)},
    ]
    return messages


def expert_chats(
    n: int,
    seed: int,
    *,
    families: tuple[str, ...] = tuple(FAMILIES),
    bare_share: float = 0.25,
    error_share: float = 0.15,
) -> list[dict]:
    """`n` distinct traces from `seed`: word problems of `families` in turn, a `bare_share` of
    bare expressions, an `error_share` that recovers from a rejected first call."""
    if n < 0 or not families:
        raise ValueError("expert_chats: n must be >= 0 and families non-empty")
    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"expert_chats: unknown family {f!r}; known: {sorted(FAMILIES)}")
    rng, skip = random.Random(seed), held_out_questions()
    rows, seen = [], set()
    for _ in range(100 * n + 100):
        if len(rows) == n:
            break
        if rng.random() < bare_share:
            problem = _bare(rng)
        else:
            problem = FAMILIES[families[len(rows) % len(families)]](rng)
        user = f"{problem.question} {INSTRUCTION}"
        if user in seen or user in skip:
            continue
        seen.add(user)
        messages = expert_trace(problem, rng, with_error=rng.random() < error_share)
        rows.append({"messages": messages, "env": "math"})
    if len(rows) < n:
        raise ValueError(f"expert_chats: only {len(rows)} distinct traces, wanted {n}")
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for row in expert_chats(args.n, args.seed):
        print(json.dumps(row))
