"""Templated arithmetic word problems with exact answers, and the fixed train / held-out files.

Each problem is a row for `mimojax.data` ({"prompt", "ground_truth", "env": "math", "extra"}).
The held-out split is generated from its own seed and every train question that also occurs in
it is dropped, so evaluation never sees a training prompt.

    python -m mimojax.envs.math.tasks            # rewrites envs/math/data/*.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

DATA_DIR = Path(__file__).with_name("data")
INSTRUCTION = "Answer with just the final number."

_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kai", "Lea")
_ITEMS = ("apples", "books", "coins", "shells", "stamps", "marbles", "pens", "cards")


def _add_story(rng: random.Random) -> tuple[str, int]:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 15), rng.randint(2, 9)
    q = f"{who} has {a} {item} and gets {b} more. How many {item} does {who} have now?"
    return q, a + b


def _sub_story(rng: random.Random) -> tuple[str, int]:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a = rng.randint(5, 20)
    b = rng.randint(1, min(9, a - 1))
    q = f"{who} has {a} {item} and gives away {b}. How many {item} are left?"
    return q, a - b


def _mul_story(rng: random.Random) -> tuple[str, int]:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    q = f"{who} has {a} boxes with {b} {item} in each box. How many {item} are there in total?"
    return q, a * b


def _two_step(rng: random.Random) -> tuple[str, int]:
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 12), rng.randint(2, 9)
    c = rng.randint(1, a + b - 1)
    q = (
        f"{who} has {a} {item}, buys {b} more, then gives {c} to a friend. "
        f"How many {item} does {who} have?"
    )
    return q, a + b - c


FAMILIES = {"add": _add_story, "sub": _sub_story, "mul": _mul_story, "two_step": _two_step}
# One-step problems: SmolLM2-135M mostly knows these sums, but answers verbosely, so within a
# tight token budget it scores 25-50% and RL can teach it to answer directly.
DEFAULT_FAMILIES = ("add", "sub", "mul")


def make_rows(n: int, seed: int, families=DEFAULT_FAMILIES) -> list[dict]:
    """`n` distinct problems, families taken in turn, from `seed`."""
    rng, rows, seen = random.Random(seed), [], set()
    for _ in range(100 * n):
        if len(rows) == n:
            break
        family = families[len(rows) % len(families)]
        question, answer = FAMILIES[family](rng)
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


def write_splits(out_dir: Path = DATA_DIR, n_train: int = 4000, n_test: int = 200) -> None:
    """Writes arith_train.jsonl and arith_test.jsonl (disjoint questions)."""
    test = make_rows(n_test, seed=1234)
    held_out = {r["prompt"] for r in test}
    train = [r for r in make_rows(n_train + n_test, seed=1) if r["prompt"] not in held_out]
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("arith_train.jsonl", train[:n_train]), ("arith_test.jsonl", test)):
        with open(out_dir / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR)
    args = p.parse_args()
    write_splits(args.out)
