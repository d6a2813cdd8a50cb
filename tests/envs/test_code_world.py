"""envs/code: every shipped task against its reference and wrong solutions, the grader's
reward-hack guards, the JSONL loader and the tools, all in the real sandbox (no mocks)."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mimojax.data.prompts import read_rows
from mimojax.envs.code.grader import grade, last_code_block
from mimojax.envs.code.harness import run_tests
from mimojax.envs.code.tasks import (
    DATA_DIR,
    CodeDataError,
    load_jsonl,
    split_rows,
)
from mimojax.envs.code.tasks_data import TASKS, TEST_IDS
from mimojax.rewards.pool import get_reward_fn
from mimojax.rollout.tools import ToolSettings, make_tool_env
from mimojax.sandbox import bwrap as sandbox

pytestmark = pytest.mark.skipif(
    not sandbox.available(),
    reason="bubblewrap (bwrap) is missing or cannot create namespaces here; the code world "
    "runs model code only inside it",
)
ADD = next(t for t in TASKS if t.task_id == "add")


def _fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}```\nDone."


def test_data_files_are_the_generated_split():
    train, test = split_rows()
    assert (len(train), len(test)) == (len(TASKS) - len(TEST_IDS), len(TEST_IDS))
    assert len(TASKS) >= 30 and len(test) >= 8
    for name, rows in (("code_train.jsonl", train), ("code_test.jsonl", test)):
        assert [json.loads(line) for line in open(DATA_DIR / name)] == rows
        for row in read_rows(str(DATA_DIR / name)):  # the trainer's reader accepts them
            assert row["env"] == "code" and row["extra"]["hidden_tests"]
    assert {r["ground_truth"] for r in train}.isdisjoint(r["ground_truth"] for r in test)
    assert all(r["agent"] == "tool_agent" and "solution.py" in r["prompt"] for r in train + test)
    assert len({t.task_id for t in TASKS}) == len(TASKS)


def _check_task(task) -> list[str]:
    problems = []
    ref = grade("no code here", task.task_id, {"artifacts": {"solution.py": task.reference}})
    if ref != {"score": 1.0, "tests_passed": len(task.hidden), "tests_total": len(task.hidden),
               "format": 1.0}:  # fmt: skip
        problems.append(f"{task.task_id}: reference via artifacts scored {ref}")
    visible = run_tests(list(task.visible), solution=task.reference)
    if not all(o.ok for o in visible):
        problems.append(f"{task.task_id}: reference fails visible tests {visible}")
    wrong = grade(_fenced(task.wrong), task.task_id, {"hidden_tests": list(task.hidden)})
    if not (wrong["format"] == 1.0 and wrong["score"] < 1.0):
        problems.append(f"{task.task_id}: wrong solution via fenced block scored {wrong}")
    return problems


def test_every_task_reference_passes_and_wrong_solution_does_not():
    with ThreadPoolExecutor(4) as pool:
        problems = [p for ps in pool.map(_check_task, TASKS) for p in ps]
    assert not problems, "\n".join(problems)


def test_registered_through_the_reward_registry():
    fn = get_reward_fn("code")
    assert fn is grade
    assert fn(_fenced(ADD.reference), "add", None)["score"] == 1.0  # extra may be None


def test_artifacts_win_over_the_response_and_fall_back_to_it():
    wrong_file = {"artifacts": {"solution.py": ADD.wrong}}
    assert grade(_fenced(ADD.reference), "add", wrong_file)["score"] < 1.0
    # No solution.py (or an empty one): the response's last block counts.
    for artifacts in ({}, {"notes.txt": "x"}, {"solution.py": "  \n"}):
        out = grade(_fenced(ADD.reference), "add", {"artifacts": artifacts, "turns": ["t"]})
        assert out["score"] == 1.0, artifacts
    # The last Python block counts, bare ``` blocks too; other languages do not.
    text = f"```python\n{ADD.wrong}```\nbetter:\n```\n{ADD.reference}```\n```text\nnope\n```"
    assert last_code_block(text) == ADD.reference
    assert grade(text, "add", {})["score"] == 1.0


@pytest.mark.parametrize(
    "response",
    ["", "I don't know.", "```python\nunclosed block", "```text\ndef add(a, b): return a+b\n```"],
)
def test_no_code_scores_zero_with_format_zero(response):
    out = grade(response, "add", {})
    assert out == {"score": 0.0, "tests_passed": 0, "tests_total": 4, "format": 0.0}


@pytest.mark.parametrize(
    "code",
    [
        "def add(a, b)\n    return a + b\n",  # syntax error
        "def plus(a, b):\n    return a + b\n",  # wrong name
        "raise RuntimeError('boom')\n",
        "\x00\x01 not python",
    ],
)
def test_broken_code_scores_zero_without_raising(code):
    out = grade(_fenced(code), "add", {})
    assert out["score"] == 0.0 and out["format"] == 1.0


HACKS = {
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "exit in the function": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "fake PASS lines": "print('PASS ' * 50)\nfor i in range(10):\n"
    '    print(i, \'{"i": %d, "ok": true, "err": ""}\' % i)\nimport os\nos._exit(0)\n',
    "always-equal object": "class Eq:\n    def __eq__(self, other):\n        return True\n"
    "    __hash__ = None\ndef add(a, b):\n    return Eq()\n",
    "int subclass equal to all": "class N(int):\n    def __eq__(self, other):\n"
    "        return True\ndef add(a, b):\n    return N(0)\n",
    "patched AssertionError": "import builtins\nclass Nope(Exception):\n    pass\n"
    "builtins.AssertionError = Nope\ndef add(a, b):\n    return None\n",
    "patched exec": "import builtins\nbuiltins.exec = lambda *a, **k: None\n"
    "def add(a, b):\n    return None\n",
    "patched math.isclose": "import math\nmath.isclose = lambda *a, **k: True\n"
    "def add(a, b):\n    return 0.5\n",
    "patched builtins.type": "import builtins\nbuiltins.type = lambda x: int\n"
    "def add(a, b):\n    return str(a + b)\n",
    "kills the runner": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "kills everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_reward_hacks_score_zero(name):
    out = grade(_fenced(HACKS[name]), "add", {})
    assert out["score"] == 0.0, (name, out)


def test_each_test_counts_on_its_own():
    # Hangs on one input, crashes on another, right on the rest: one bad test hides no other.
    code = (
        "def add(a, b):\n"
        "    if (a, b) == (0, 0):\n        while True:\n            pass\n"
        "    if (a, b) == (-4, 10):\n        raise ValueError('no')\n"
        "    return a + b\n"
    )
    start = time.perf_counter()
    out = grade(_fenced(code), "add", {})
    assert out["tests_passed"] == 2 and out["score"] == 0.5
    assert time.perf_counter() - start < 8.0
    # A correct solution is graded fast (the budget is ~1 s per sample).
    start = time.perf_counter()
    assert grade(_fenced(ADD.reference), "add", {})["score"] == 1.0
    assert time.perf_counter() - start < 2.0


def test_row_without_tests_is_an_infra_error():
    with pytest.raises(ValueError, match="no hidden tests"):
        grade(_fenced(ADD.reference), "no_such_task", {})


def test_load_jsonl(tmp_path):
    path = tmp_path / "mbpp_mini.jsonl"
    records = [
        {"prompt": "Write a function that doubles x.", "tests": [
            "assert double(2) == 4", "assert double(0) == 0", "assert double(-3) == -6"]},
        {"text": "Return the square of x.", "test_list": [
            "assert square(3) == 9", "assert square(-2) == 4"], "task_id": 7},
        {"prompt": "def inc(x):\n    '''x + 1'''\n", "entry_point": "inc",
         "test": "def check(candidate):\n    assert candidate(1) == 2\n"
                 "    assert candidate(-1) == 0\n"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    rows = load_jsonl(path, visible=1)
    assert [r["ground_truth"] for r in rows] == ["mbpp_mini/1", "mbpp_mini/7", "mbpp_mini/3"]
    first = rows[0]["extra"]
    assert first["entry_point"] == "double"
    assert first["visible_tests"] == ["assert double(2) == 4"]
    assert first["hidden_tests"] == ["assert double(0) == 0", "assert double(-3) == -6"]
    assert "assert double(2) == 4" in rows[0]["prompt"] and "double" in rows[0]["prompt"]
    assert rows[2]["extra"]["visible_tests"] == []  # one test only: it stays hidden
    solutions = ["def double(x):\n    return 2 * x\n", "def square(x):\n    return x * x\n",
                 "def inc(x):\n    return x + 1\n"]  # fmt: skip
    for row, code in zip(rows, solutions, strict=True):
        assert row["env"] == "code" and row["agent"] == "tool_agent"
        assert grade(_fenced(code), row["ground_truth"], row["extra"])["score"] == 1.0
    assert grade(_fenced("def inc(x):\n    return x\n"), "x", rows[2]["extra"])["score"] == 0.0
    assert load_jsonl(path, visible=0)[0]["extra"]["visible_tests"] == []


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "malformed JSON"),
        ('{"prompt": "p"}', "'tests'"),
        ('{"tests": ["assert f() == 1"]}', "'prompt'"),
        ('{"prompt": "p", "tests": []}', "'tests'"),
        ('{"prompt": "p", "tests": ["assert f() == 1"], "entry_point": "no way"}', "entry_point"),
    ],
)
def test_load_jsonl_errors_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok", "tests": ["assert f() == 1"]}\n' + line + "\n")
    with pytest.raises(CodeDataError, match=message) as err:
        load_jsonl(path)
    assert f"{path}:2" in str(err.value)


def test_tools_through_the_tool_env():
    row = json.loads((DATA_DIR / "code_train.jsonl").read_text().splitlines()[0])
    assert row["ground_truth"] == "add"
    env = make_tool_env(row, ToolSettings(timeout_s=1.0))
    try:
        assert [s["function"]["name"] for s in env.schemas()] == [
            "write_file", "run_python", "run_tests"]  # fmt: skip
        assert env.artifacts() == {}
        assert "No solution.py" in env.call_sync("run_tests", {}).text
        minus = "def add(a, b):\n    return a - b\n"
        out = env.call_sync("write_file", {"path": "solution.py", "content": minus})
        assert out.error is None and "solution.py" in out.text
        out = env.call_sync("run_tests", {})
        assert out.error is None and "0/1 visible tests passed" in out.text
        assert "FAIL assert add(2, 3) == 5\n  AssertionError: -1 != 5" in out.text
        env.call_sync("write_file", {"path": "solution.py", "content": ADD.reference})
        assert "1/1 visible tests passed" in env.call_sync("run_tests", {}).text
        out = env.call_sync("run_python", {"code": "from solution import add\nprint(add(20, 22))"})
        assert out.error is None and "exit code: 0" in out.text and "42" in out.text
        out = env.call_sync("run_python", {"code": "import sys\nprint('x', file=sys.stderr)\n1/0"})
        assert "exit code: 1" in out.text and "ZeroDivisionError" in out.text
        out = env.call_sync("run_python", {"code": "while True:\n    pass"})
        assert "timeout" in out.text or "cpu limit" in out.text
        # Bad calls are observations, not exceptions.
        assert env.call_sync("write_file", {"path": "x.py"}).error == "bad_arguments"
        assert env.call_sync("run_python", {"code": 3}).error == "bad_arguments"
        assert env.call_sync("run_tests", {"extra": 1}).error == "bad_arguments"
        assert env.call_sync("no_such_tool", {}).error == "unknown_tool"
        out = env.call_sync("write_file", {"path": "../escape.py", "content": "x"})
        assert out.error == "tool_exception" and "relative" in out.text
        artifacts = env.artifacts()
        assert artifacts["solution.py"] == ADD.reference
        extra = {**row["extra"], "artifacts": artifacts, "turns": ["..."]}
        assert grade("no block", row["ground_truth"], extra)["score"] == 1.0
    finally:
        env.close()
        env.close()
    assert env.artifacts() == {}
