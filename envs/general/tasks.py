"""General-world rows: the shipped tasks (tasks_data.py) as fixed train / held-out files.

python -m mimojax.envs.general.tasks      # rewrites envs/general/data/*.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mimojax.envs.general.tasks_data import TASKS, TEST_IDS

DATA_DIR = Path(__file__).with_name("data")


def task_row(task: dict) -> dict:
    """One data row: the prompt, the task id as ground truth, the rubric in extra."""
    return {
        "prompt": task["prompt"],
        "ground_truth": task["task_id"],
        "env": "general",
        "extra": {"task_id": task["task_id"], "task": task["prompt"], "rubric": task["rubric"]},
    }


def split_rows() -> tuple[list[dict], list[dict]]:
    """(train, held-out) rows; TEST_IDS (every 4th task) are held out."""
    train = [task_row(t) for t in TASKS if t["task_id"] not in TEST_IDS]
    test = [task_row(t) for t in TASKS if t["task_id"] in TEST_IDS]
    return train, test


def write_splits(out_dir: Path = DATA_DIR) -> None:
    """Writes general_train.jsonl and general_test.jsonl."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = split_rows()
    for name, rows in (("general_train.jsonl", train), ("general_test.jsonl", test)):
        with open(out_dir / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR)
    write_splits(p.parse_args().out)
