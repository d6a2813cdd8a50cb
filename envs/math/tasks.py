"""Templated arithmetic word problems with exact answers, and the fixed train / held-out files.

Each problem is a row for `mimojax.data.prompts`
({"prompt", "ground_truth", "env": "math", "extra"}).
The held-out split is generated from its own seed and every train question that also occurs in
it is dropped, so evaluation never sees a training prompt.

    python -m mimojax.envs.math.tasks            # rewrites envs/math/data/*.jsonl

Two mixes: `arith_*` (one-step add / sub / mul, the default job) and `hard_arith_*` (two-step
stories and two-digit add / sub with carries and borrows, `configs/grpo_arith_hard_smollm2.py`;
SmolLM2-135M-Instruct scores <= 15% greedy there). The hard files are named so that the
default split still sorts first (`mimojax eval --env math` scores `arith_test.jsonl`).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import NamedTuple

DATA_DIR = Path(__file__).with_name("data")
INSTRUCTION = "Answer with just the final number."

_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kai", "Lea")
_ITEMS = ("apples", "books", "coins", "shells", "stamps", "marbles", "pens", "cards")


class Problem(NamedTuple):
    """One generated problem; `expression` is the arithmetic a solver would compute (the
    scripted expert's calculator call, mimojax/envs/math/expert.py)."""

    question: str
    answer: int
    expression: str


def _add_story(rng: random.Random) -> Problem:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 15), rng.randint(2, 9)
    q = f"{who} has {a} {item} and gets {b} more. How many {item} does {who} have now?"
    return Problem(q, a + b, f"{a} + {b}")


def _sub_story(rng: random.Random) -> Problem:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a = rng.randint(5, 20)
    b = rng.randint(1, min(9, a - 1))
    q = f"{who} has {a} {item} and gives away {b}. How many {item} are left?"
    return Problem(q, a - b, f"{a} - {b}")


def _mul_story(rng: random.Random) -> Problem:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    q = f"{who} has {a} boxes with {b} {item} in each box. How many {item} are there in total?"
    return Problem(q, a * b, f"{a} * {b}")


def _two_step(rng: random.Random) -> Problem:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 12), rng.randint(2, 9)
    c = rng.randint(1, a + b - 1)
    q = (
        f"{who} has {a} {item}, buys {b} more, then gives {c} to a friend. "
        f"How many {item} does {who} have?"
    )
    return Problem(q, a + b - c, f"{a} + {b} - {c}")


def _add2_story(rng: random.Random) -> Problem:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(15, 89), rng.randint(12, 49)
    if (a % 10) + (b % 10) < 10:  # force a carry: no digit-by-digit shortcut
        b += 10 - (b % 10) + rng.randint(0, 9) if b % 10 else rng.randint(1, 9)
    q = f"{who} has {a} {item} and gets {b} more. How many {item} does {who} have now?"
    return Problem(q, a + b, f"{a} + {b}")


def _sub2_story(rng: random.Random) -> Problem:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a = rng.randint(31, 99)
    b = rng.randint(12, a - 11)
    if a % 10 >= b % 10 and a % 10 < 9:  # prefer a borrow
        b = b - (b % 10) + rng.randint(a % 10 + 1, 9)
        b = min(b, a - 1)
    q = f"{who} has {a} {item} and gives away {b}. How many {item} are left?"
    return Problem(q, a - b, f"{a} - {b}")


FAMILIES = {
    "add": _add_story,
    "sub": _sub_story,
    "mul": _mul_story,
    "two_step": _two_step,
    "add2": _add2_story,
    "sub2": _sub2_story,
}
# One-step problems: SmolLM2-135M mostly knows these sums, but answers verbosely, so within a
# tight token budget it scores 25-50% and RL can teach it to answer directly.
DEFAULT_FAMILIES = ("add", "sub", "mul")
# Where success is rare (issue 16): two-step stories and two-digit sums with carries / borrows.
HARD_FAMILIES = ("two_step", "add2", "sub2")
SPLITS = {
    "arith": dict(families=DEFAULT_FAMILIES, n_train=4000, n_test=200, seeds=(1, 1234)),
    "hard_arith": dict(families=HARD_FAMILIES, n_train=3000, n_test=200, seeds=(7, 4321)),
}


def make_rows(n: int, seed: int, families=DEFAULT_FAMILIES) -> list[dict]:
    """`n` distinct problems, families taken in turn, from `seed`."""
    rng, rows, seen = random.Random(seed), [], set()
    for _ in range(100 * n):
        if len(rows) == n:
            break
        family = families[len(rows) % len(families)]
        question, answer, _ = FAMILIES[family](rng)
        if question in seen:
            continue
        seen.add(question)
        rows.append(
            {
                "prompt": f"{question} {INSTRUCTION}",
                "ground_truth": str(answer),
                "env": "math",
                "extra": {"family": family},
            }
        )
    if len(rows) < n:
        raise ValueError(f"make_rows: only {len(rows)} distinct problems of {families}, wanted {n}")
    return rows


def write_splits(out_dir: Path = DATA_DIR, prefix: str = "arith") -> None:
    """Writes PREFIX_train.jsonl and PREFIX_test.jsonl (disjoint questions) of a SPLITS mix."""
    spec = SPLITS[prefix]
    families, n_train, n_test = spec["families"], spec["n_train"], spec["n_test"]
    train_seed, test_seed = spec["seeds"]
    test = make_rows(n_test, seed=test_seed, families=families)
    held_out = {r["prompt"] for r in test}
    train = [
        r
        for r in make_rows(n_train + n_test, seed=train_seed, families=families)
        if r["prompt"] not in held_out
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in ((f"{prefix}_train.jsonl", train[:n_train]), (f"{prefix}_test.jsonl", test)):
        with open(out_dir / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR)
    p.add_argument("--split", choices=sorted(SPLITS), nargs="*", default=sorted(SPLITS))
    args = p.parse_args()
    for prefix in args.split:
        write_splits(args.out, prefix)
