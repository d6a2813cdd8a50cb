"""envs/cyber: every program's reference exploit succeeds and its benign input does not, the
copy check, the random flag, and the tools, all in the real sandbox (no mocks)."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from mimojax.data.prompts import read_rows
from mimojax.envs.cyber.catalog import (
    DUMMY_FLAG,
    PROGRAMS,
    PROGRAMS_BY_NAME,
    TEST_PROGRAMS,
    VARIANTS,
)
from mimojax.envs.cyber.grader import grade
from mimojax.envs.cyber.target import run_target
from mimojax.envs.cyber.tasks import DATA_DIR, split_rows
from mimojax.rewards.pool import get_reward_fn
from mimojax.rollout.tools import ToolSettings, make_tool_env
from mimojax.sandbox import bwrap as sandbox

pytestmark = pytest.mark.skipif(
    not sandbox.available(),
    reason="bubblewrap (bwrap) is missing or cannot create namespaces here; the cyber world "
    "runs its targets only inside it",
)
BUG_CLASSES = ("out-of-bounds read", "integer overflow", "path traversal", "format string")


def test_programs_and_data_files():
    assert len(PROGRAMS) >= 8
    bugs = " | ".join(p.bug for p in PROGRAMS)
    assert all(b in bugs for b in BUG_CLASSES), bugs
    train, test = split_rows()
    assert len(train) + len(test) >= 16
    assert len(test) == len(TEST_PROGRAMS) * len(VARIANTS)
    for name, rows in (("cyber_train.jsonl", train), ("cyber_test.jsonl", test)):
        assert [json.loads(line) for line in open(DATA_DIR / name)] == rows
        assert read_rows(str(DATA_DIR / name))  # the trainer's reader accepts them
    # Split by program: no held-out program is trained on.
    assert {r["extra"]["program"] for r in train}.isdisjoint(r["extra"]["program"] for r in test)
    for row in train + test:
        program = PROGRAMS_BY_NAME[row["extra"]["program"]]
        assert row["env"] == "cyber" and row["agent"] == "tool_agent"
        assert row["extra"]["goal"] == program.goal and program.source_file in row["prompt"]
        assert "input.txt" in row["prompt"]
        assert program.exploit() not in row["prompt"]  # the reference exploit stays hidden


def _check_program(program) -> list[str]:
    problems = []
    name, exploit, goal_dim = program.name, program.exploit(), (
        "crashed" if program.goal == "crash" else "flag_leaked")  # fmt: skip
    # The reference exploit is hidden from the agent, so as the agent's own input it counts.
    for how, response, extra in (
        ("artifacts", "done", {"artifacts": {"input.txt": exploit, "sample.txt": "x"}}),
        ("fenced block", f"Input:\n```\n{exploit}```", {}),
    ):
        out = grade(response, f"{name}/plain", {**extra, "program": name})
        if out["score"] != 1.0 or out[goal_dim] != 1.0 or out["copied_input"] != 0.0:
            problems.append(f"{name}: exploit via {how} scored {out}")
    benign = run_target(program, program.sample(), flag="FLAG{benign_run}")
    if benign.returncode != 0 or benign.crashed or benign.flag_leaked or benign.timed_out:
        problems.append(f"{name}: the benign sample input {benign}")
    # A byte-identical (or whitespace-padded) copy of an agent-visible file is rejected.
    for copy in (program.sample(), program.sample().strip() + "\n\n", program.source()):
        out = grade("", f"{name}/hint", {"artifacts": {"input.txt": copy}})
        if out["score"] != 0.0 or out["copied_input"] != 1.0:
            problems.append(f"{name}: a copy of a shipped file scored {out}")
    return problems


def test_every_program_exploit_succeeds_and_benign_input_does_not():
    with ThreadPoolExecutor(4) as pool:
        problems = [p for ps in pool.map(_check_program, PROGRAMS) for p in ps]
    assert not problems, "\n".join(problems)


def test_flag_is_random_per_grading():
    calc = PROGRAMS_BY_NAME["calc"]
    # An input that prints a flag-shaped string it knows (the dummy one) leaks nothing.
    out = grade("", "calc/plain", {"artifacts": {"input.txt": f"'{DUMMY_FLAG}'\n"}})
    assert out["score"] == 0.0 and out["flag_leaked"] == 0.0
    run = run_target(calc, f"'{DUMMY_FLAG}'\n", flag="FLAG{0123}")
    assert DUMMY_FLAG in run.stdout and not run.flag_leaked
    assert grade("", "calc/plain", {"artifacts": {"input.txt": calc.exploit()}})["score"] == 1.0


def test_goal_must_match_not_just_any_outcome():
    # Crashing a flag task, or leaking on a crash task, is not the goal.
    tlv = PROGRAMS_BY_NAME["tlv_parser"]
    out = grade("", "tlv_parser/plain", {"artifacts": {"input.txt": tlv.exploit()},
                                         "goal": "flag"})  # fmt: skip
    assert out["crashed"] == 1.0 and out["score"] == 0.0


@pytest.mark.parametrize(
    "response, extra",
    [
        ("no input given", {}),
        ("```\nunclosed", {}),
        ("", {"artifacts": {"sample.txt": "x"}}),
    ],
)
def test_no_input_scores_zero_with_format_zero(response, extra):
    out = grade(response, "greeter/plain", extra)
    assert out == {"score": 0.0, "crashed": 0.0, "flag_leaked": 0.0, "copied_input": 0.0,
                   "format": 0.0}  # fmt: skip


@pytest.mark.parametrize("text", ["", "\x00\xff junk \u2603\n" * 50, "NAME " + "A" * 5000])
def test_garbage_input_scores_zero_without_raising(text):
    out = grade("", "greeter/plain", {"artifacts": {"input.txt": text}})
    assert out["score"] == 0.0 and out["format"] == 1.0


def test_registered_and_unknown_program_is_an_infra_error():
    assert get_reward_fn("cyber") is grade
    with pytest.raises(ValueError, match="unknown program"):
        grade("```\nx\n```", "no_such_program/plain", {})


def test_tools_through_the_tool_env():
    row = next(r for r in split_rows()[0] if r["ground_truth"] == "greeter/plain")
    greeter = PROGRAMS_BY_NAME["greeter"]
    env = make_tool_env(row, ToolSettings())
    try:
        assert [s["function"]["name"] for s in env.schemas()] == [
            "list_files", "read_file", "write_file", "run_target"]  # fmt: skip
        assert set(env.artifacts()) == {"greeter.c", "sample.txt"}
        listing = env.call_sync("list_files", {}).text
        assert "greeter.c" in listing and "sample.txt" in listing
        assert env.call_sync("read_file", {"path": "greeter.c"}).text == greeter.source()
        assert "No input.txt" in env.call_sync("run_target", {}).text
        out = env.call_sync("run_target", {"input": greeter.sample()})
        assert out.error is None and "exit code 0" in out.text and "crashed: no" in out.text
        assert "hello, alice!" in out.text
        # Editing the target's source changes nothing: runs use the shipped program.
        env.call_sync(
            "write_file", {"path": "greeter.c", "content": "int main(){return *(int*)0;}"}
        )
        out = env.call_sync("write_file", {"path": "input.txt", "content": greeter.exploit()})
        assert out.error is None
        out = env.call_sync("run_target", {})
        assert "SIGABRT" in out.text and "crashed: yes" in out.text
        assert "%n in writable segment" in out.text
        assert env.call_sync("run_target", {"input": 5}).error == "bad_arguments"
        assert env.call_sync("read_file", {}).error == "bad_arguments"
        assert env.call_sync("read_file", {"path": "missing.txt"}).error == "tool_exception"
        artifacts = env.artifacts()
        assert artifacts["input.txt"] == greeter.exploit()
        assert not any(p.startswith(".build") for p in artifacts)
        assert grade("", row["ground_truth"], {**row["extra"], "artifacts": artifacts})["score"]
    finally:
        env.close()
    assert env.artifacts() == {}


def test_flag_tools_see_a_dummy_flag():
    row = next(r for r in split_rows()[0] if r["ground_truth"] == "fileserver/hint")
    env = make_tool_env(row, ToolSettings())
    try:
        assert env.call_sync("read_file", {"path": "flag.txt"}).text.strip() == DUMMY_FLAG
        out = env.call_sync("run_target", {"input": "GET ../flag.txt\nGET index.html\n"})
        assert "flag leaked: no" in out.text and "<h1>Welcome</h1>" in out.text
        out = env.call_sync("run_target", {"input": PROGRAMS_BY_NAME["fileserver"].exploit()})
        assert "flag leaked: yes" in out.text and DUMMY_FLAG in out.text
    finally:
        env.close()
