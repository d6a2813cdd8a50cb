"""Code-task rows: the shipped tasks (tasks_data.py) as fixed train / held-out files, and a
loader for MBPP/HumanEval-style JSONL ({"prompt" | "text", "tests" | "test_list",
"entry_point"?}, or HumanEval's {"prompt", "test", "entry_point"}).

    python -m mimojax.envs.code.tasks            # rewrites envs/code/data/*.jsonl
    rows = load_jsonl("mbpp.jsonl", visible=1)   # first test shown to the model, rest hidden
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from mimojax.envs.code.tasks_data import TASKS, TEST_IDS, CodeTask

DATA_DIR = Path(__file__).with_name("data")
TASKS_BY_ID: dict[str, CodeTask] = {t.task_id: t for t in TASKS}
PROTOCOL = (
    "You can use tools: write your solution to `solution.py` with write_file, then check it "
    "with run_tests (runs the visible tests) or run_python. Or simply reply with the complete "
    "function in a final ```python code block."
)


class CodeDataError(ValueError):
    """A bad row in a code-task JSONL file: names the file and 1-based line."""


def task_prompt(task: CodeTask) -> str:
    """The user prompt of one shipped task."""
    return (
        f"Write a Python function `{task.signature}`\n{task.description}\n"
        f"Example: `{task.example}`\n\n{PROTOCOL}"
    )


def task_row(task: CodeTask) -> dict:
    """One data row ({"prompt", "ground_truth", "env", "agent", "extra"})."""
    return {
        "prompt": task_prompt(task),
        "ground_truth": task.task_id,
        "env": "code",
        "agent": "tool_agent",
        "extra": {
            "task_id": task.task_id,
            "entry_point": task.entry_point,
            "visible_tests": list(task.visible),
            "hidden_tests": list(task.hidden),
        },
    }


def split_rows() -> tuple[list[dict], list[dict]]:
    """(train, held-out) rows of the shipped tasks; TEST_IDS are the held-out ones."""
    unknown = set(TEST_IDS) - set(TASKS_BY_ID)
    if unknown:
        raise ValueError(f"TEST_IDS names unknown tasks: {sorted(unknown)}")
    train = [task_row(t) for t in TASKS if t.task_id not in TEST_IDS]
    test = [task_row(t) for t in TASKS if t.task_id in TEST_IDS]
    return train, test


def write_splits(out_dir: Path = DATA_DIR) -> None:
    """Writes code_train.jsonl and code_test.jsonl."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = split_rows()
    for name, rows in (("code_train.jsonl", train), ("code_test.jsonl", test)):
        with open(out_dir / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


_DEF = re.compile(r"^\s*assert\s+(?:not\s+)?\(?\s*([A-Za-z_]\w*)\s*\(")


def _entry_from_tests(tests: Sequence[str]) -> str | None:
    """The function the first test calls (`assert f(...)`), if it reads that way."""
    for t in tests:
        m = _DEF.match(t)
        if m and m.group(1) not in ("set", "sorted", "list", "tuple", "abs", "len", "math"):
            return m.group(1)
    return None


def row_from_record(
    rec: dict, *, visible: int = 1, where: str = "row", id_prefix: str = "jsonl"
) -> dict:
    """One MBPP/HumanEval-style record as a code row (the first `visible` tests shown)."""
    if not isinstance(rec, dict):
        raise CodeDataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    prompt = rec.get("prompt", rec.get("text"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise CodeDataError(f"{where}: missing a string 'prompt' (or 'text')")
    tests = rec.get("tests", rec.get("test_list"))
    if isinstance(tests, str):
        tests = [tests]
    if tests is None and isinstance(rec.get("test"), str) and rec.get("entry_point"):
        # HumanEval: one `check(candidate)` function, run as one hidden test.
        tests = [f"{rec['test']}\ncheck({rec['entry_point']})"]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise CodeDataError(
            f"{where}: 'tests' (or 'test_list') must be a non-empty list of strings"
        )
    entry = rec.get("entry_point") or _entry_from_tests(tests)
    raw_tests = tests
    setup = rec.get("test_setup_code") or ""
    if setup:
        tests = [f"{setup}\n{t}" for t in tests]
    if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
        raise CodeDataError(f"{where}: 'entry_point' must be a Python name, got {entry!r}")
    n_visible = max(0, min(int(visible), len(tests) - 1))  # at least one hidden test
    task_id = str(rec.get("task_id", rec.get("id", where.rsplit(":", 1)[-1])))
    task_id = task_id if task_id.startswith(id_prefix) else f"{id_prefix}/{task_id}"
    shown = tests[:n_visible]
    text = prompt.strip()
    if entry:
        text += f"\nName the function `{entry}`."
    if shown:
        text += "\nIt must pass:\n" + "\n".join(raw_tests[:n_visible])
    return {
        "prompt": f"{text}\n\n{PROTOCOL}",
        "ground_truth": task_id,
        "env": "code",
        "agent": "tool_agent",
        "extra": {
            "task_id": task_id,
            "entry_point": entry,
            "visible_tests": shown,
            "hidden_tests": tests[n_visible:],
        },
    }


def load_jsonl(
    path: str | os.PathLike, visible: int = 1, id_prefix: str | None = None
) -> list[dict]:
    """Rows from a JSONL of {"prompt", "tests" | "test_list", "entry_point"?, "task_id"?}."""
    path = os.fspath(path)
    prefix = id_prefix if id_prefix is not None else Path(path).stem
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise CodeDataError(f"{where}: malformed JSON: {e}") from e
            rows.append(row_from_record(rec, visible=visible, where=where, id_prefix=prefix))
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR)
    write_splits(p.parse_args().out)
