"""Scripted-expert tool traces for the code world, from the shipped reference solutions.

A trace is a chat row {"messages", "env": "code"} over a training task (never a held-out one,
`TEST_IDS`): write_file(solution.py, reference) -> run_tests -> a short answer, every tool turn
the real output of the code world's tools in the bubblewrap sandbox. Some traces first write
the task's known-wrong solution, read the failing tests, and rewrite it. The warm-up
(mimojax/sft/warmup.py) fine-tunes on them, rendered as the tool agent renders them.

    python -m mimojax.envs.code.expert --n 4     # prints 4 traces (needs bubblewrap)
"""

from __future__ import annotations

import argparse
import json
import random

from mimojax.envs.code.tasks import split_rows
from mimojax.envs.code.tasks_data import TASKS, TEST_IDS
from mimojax.rollout.tool_calls import format_tool_call
from mimojax.rollout.tools import ToolSettings, make_tool_env

_WRITE_LEADS = ("", "I'll write the solution.\n", "Writing solution.py.\n")
_TEST_LEADS = ("", "Now the visible tests.\n", "Let me run the tests.\n")
_FIX_LEADS = ("A test fails; fixing it.\n", "That is wrong. Rewriting solution.py.\n")
_DONE = (
    "solution.py passes the visible tests.",
    "Done: `{entry}` is in solution.py and its tests pass.",
    "The function is written to solution.py.",
)


def _call(env, messages, lead: str, name: str, arguments: dict) -> str:
    """Appends one assistant call and the tool's real observation; returns the observation."""
    outcome = env.call_sync(name, arguments)
    if outcome.error is not None:
        raise RuntimeError(f"code expert: {name} failed: {outcome.text}")
    messages.append({"role": "assistant", "content": lead + format_tool_call(name, arguments)})
    messages.append({"role": "tool", "content": outcome.text})
    return outcome.text


def expert_chats(
    n: int, seed: int, *, error_share: float = 0.25, settings: ToolSettings | None = None
) -> list[dict]:
    """`n` traces over the training tasks in a seeded order (tasks repeat when n exceeds
    them, with other phrasings); an `error_share` first writes the wrong solution."""
    rows_by_id = {r["extra"]["task_id"]: r for r in split_rows()[0]}
    tasks = [t for t in TASKS if t.task_id not in TEST_IDS]
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        for task in rng.sample(tasks, len(tasks)):
            if len(out) == n:
                break
            row = rows_by_id[task.task_id]
            env = make_tool_env(row, settings or ToolSettings())
            try:
                messages = [{"role": "user", "content": row["prompt"]}]
                fix = rng.choice(_WRITE_LEADS)
                if rng.random() < error_share and task.wrong.strip():
                    tried = list(messages)
                    _call(env, tried, rng.choice(_WRITE_LEADS), "write_file",
                          {"path": "solution.py", "content": task.wrong})  # fmt: skip
                    report = _call(env, tried, rng.choice(_TEST_LEADS), "run_tests", {})
                    if "FAIL" in report:  # a wrong solution the visible tests catch: recover
                        messages, fix = tried, rng.choice(_FIX_LEADS)
                _call(env, messages, fix, "write_file",
                      {"path": "solution.py", "content": task.reference})  # fmt: skip
                report = _call(env, messages, rng.choice(_TEST_LEADS), "run_tests", {})
                if "FAIL" in report or "passed" not in report:
                    raise RuntimeError(f"code expert: {task.task_id}'s reference fails: {report}")
            finally:
                env.close()
            answer = rng.choice(_DONE).format(entry=task.entry_point)
            messages.append({"role": "assistant", "content": answer})
            out.append({"messages": messages, "env": "code"})
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for r in expert_chats(args.n, args.seed):
        print(json.dumps(r))
