"""scripts/sweep_allocation.py: arms, the budget clock and stop, the summary and its table."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location(
        "sweep_allocation", ROOT / "scripts" / "sweep_allocation.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sa = _load()


def test_parse_arm_and_overrides():
    assert sa.parse_arm("8x4") == {"label": "8x4", "prompts": 8, "n": 4, "effort": None}
    assert sa.parse_arm("2X4x3")["effort"] == 3
    for bad in ("8", "8x0", "axb", "1x2x3x4"):
        with pytest.raises(ValueError):
            sa.parse_arm(bad)
    ov = sa.arm_overrides(sa.parse_arm("16x2"), eval_at_start=False, micro_batch_size=8)
    assert "data.batch_size=16" in ov and "rollout.n=2" in ov
    assert "trainer.mini_batch_size=16" in ov and "eval.at_start=False" in ov
    ov = sa.arm_overrides(sa.parse_arm("2x2"), eval_at_start=True, micro_batch_size=8)
    assert "trainer.micro_batch_size=4" in ov  # a divisor of the arm's 4 samples


def test_cap_hidden_tests(tmp_path):
    from mimojax.envs.code.tasks import DATA_DIR as CODE
    from mimojax.envs.math.tasks import DATA_DIR as MATH

    code = str(CODE / "code_train.jsonl")
    (out,) = sa.cap_hidden_tests([code], 1, str(tmp_path))
    rows = [json.loads(line) for line in open(out, encoding="utf-8")]
    full = [json.loads(line) for line in open(code, encoding="utf-8") if line.strip()]
    assert len(rows) == len(full)
    assert all(
        r["extra"]["hidden_tests"] == f["extra"]["hidden_tests"][:1] for r, f in zip(rows, full)
    )
    assert any(len(f["extra"]["hidden_tests"]) > 1 for f in full)
    with pytest.raises(ValueError, match="no hidden-test count"):
        sa.cap_hidden_tests([str(MATH / "arith_train.jsonl")], 1, str(tmp_path))


def test_cpu_clock_counts_child_processes():
    clock = sa.Clock("cpu")
    burn = (
        "import time\nwhile time.process_time() < 0.3: pass\n"
        "print('done', flush=True)\ntime.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        assert clock.delta() >= 0.25  # the child's ~0.3 CPU-s (10 ms ticks), though alive
        assert clock.delta() < 0.2  # counted once
    finally:
        child.kill()
        child.wait()
    wall = sa.Clock("wall", devices=4)
    assert wall.delta() >= 0.0
    with pytest.raises(ValueError):
        sa.Clock("gpu")


def _write_metrics(wd, rows):
    os.makedirs(wd, exist_ok=True)
    with open(os.path.join(wd, "metrics.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _step(step, dev_s, wall_s, acc=None):
    row = {"step": step, "timing_s/step": 1.0, "perf/device_s": dev_s, "perf/budget_s": 100.0}
    row.update({"perf/wall_s": wall_s, "critic/score/mean": 0.5})
    if acc is not None:
        row["val-core/math/acc/greedy"] = acc
    return row


def test_summary_table_and_plot(tmp_path):
    a, b = str(tmp_path / "4x8"), str(tmp_path / "8x4")
    _write_metrics(a, [
        {"step": 0, "perf/wall_s": 0.0, "val-core/math/acc/greedy": 0.3},
        _step(1, 40.0, 20.0), _step(2, 80.0, 41.0, acc=0.5), _step(3, 120.0, 60.0, acc=0.7),
    ])  # fmt: skip
    _write_metrics(b, [_step(1, 60.0, 30.0), _step(2, 110.0, 55.0, acc=0.4)])
    arms = {
        "4x8": {**sa.parse_arm("4x8"), "workdir": a},
        "8x4": {**sa.parse_arm("8x4"), "workdir": b},
    }
    out = sa.summarize(arms, target=0.6, usd_per_hour=0.036)
    first, second = out
    assert first["steps"] == 3 and first["device_s"] == 120.0
    assert first["before"] == 0.3 and first["after"] == 0.7
    assert first["gain_per_device_min"] == pytest.approx(0.4 / 2.0)
    assert first["to_target"]["device_s"] == 120.0 and first["to_target"]["step"] == 3
    assert first["to_target"]["usd"] == pytest.approx(120.0 * 0.036 / 3600)
    assert second["before"] == 0.3  # the first arm's step-0 evaluation, shared
    assert second["gain"] == pytest.approx(0.1) and second["to_target"] is None
    meta = {"clock": "cpu", "target": 0.6, "usd_per_hour": 0.036, "budget_s": 100.0}
    md = sa.table(out, meta)
    lines = md.splitlines()
    assert lines[0].startswith("| arm (prompts × n) | samples/step |")
    assert "| 4 × 8 | 32 |" in lines[2] and "0.30 → 0.70" in lines[2] and "+40" in lines[2]
    assert "+20.0" in lines[2] and "120 (step 3)" in lines[2]
    assert "not reached | not reached |" in lines[3]
    sa.plot(out, meta, str(tmp_path / "p.png"))
    assert os.path.getsize(tmp_path / "p.png") > 5_000


def test_budget_stops_a_tiny_run(tmp_path):
    """A real (tiny random-model) arm: stops after the step that crosses the CPU budget."""
    wd = str(tmp_path / "2x4")
    arm = sa.parse_arm("2x4")
    extra = ["eval.max_examples=2", "eval.pass_k=0", "rollout.max_new_tokens=8"]
    spec = {
        "arm": arm,
        "config": "configs/grpo_tiny.py",
        "overrides": extra + sa.arm_overrides(arm, eval_at_start=True, micro_batch_size=8),
        "workdir": wd,
        "clock": "cpu",
        "budget_s": 0.5,
        "eval_fractions": [0.5],
    }
    done = sa.run_arm(spec, progress=False)
    assert done["steps"] == 1 and done["spent_s"] >= 0.5  # the first step's compile alone
    assert os.path.isfile(os.path.join(wd, sa.DONE))
    s = sa.summarize({"2x4": {**arm, "workdir": wd}}, target=2.0, usd_per_hour=0.0)[0]
    assert s["steps"] == 1 and s["device_s"] == pytest.approx(done["spent_s"])
    assert [e[2] for e in s["evals"]] == [0, 1]  # before, and at the end
    assert s["to_target"] is None and s["usd"] is None


def test_notebook_executes_on_the_committed_sweep(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    fixture = ROOT / "notebooks" / "data" / "compute_allocation_cpu.json"
    monkeypatch.setenv("ALLOCATION_SWEEP", os.environ.get("TEST_ALLOCATION_SWEEP", str(fixture)))
    nb = nbformat.read(ROOT / "notebooks" / "compute_allocation.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert sum("image/png" in o.get("data", {}) for o in outs) == 2
    table = "".join(o.get("data", {}).get("text/markdown", "") for o in outs)
    assert table.startswith("| arm (prompts × n) |")
    sweep = json.loads(open(os.environ["ALLOCATION_SWEEP"], encoding="utf-8").read())
    assert table.count("\n| ") == len(sweep["arms"])  # one row per arm


def test_grader_effort_arms_cut_the_graders_work(tmp_path, monkeypatch):
    """Two real tiny code-world arms that differ only in E (`2x4x1` vs `2x4`: 1 hidden test
    per trajectory vs all): the capped arm's grader runs 1 test per sample in the sandbox and
    spends less grader CPU per sample; held-out evaluation grades every test in both."""
    from mimojax.envs.code import grader
    from mimojax.envs.code.tasks_data import TASKS, TEST_IDS
    from mimojax.rewards import pool as rewards
    from mimojax.sandbox import bwrap as sandbox

    if not sandbox.available():
        pytest.skip("bubblewrap (bwrap) is missing or cannot create namespaces here; the code "
                    "world grades only inside it")  # fmt: skip
    tasks = {t.task_id: t for t in TASKS}
    # A random model writes no code, so no test would run: each response is graded as the
    # task's reference solution instead (the rows' tests, as the arm capped them, unchanged).
    # reward.num_workers=0 grades in this process, where the patch applies.
    calls, real_get = [], rewards.get_reward_fn

    def get_reward_fn(env):
        if env != "code":
            return real_get(env)

        def grade(response, ground_truth, extra=None):
            calls.append((ground_truth, len(extra["hidden_tests"])))
            solution = f"```python\n{tasks[ground_truth].reference}```"
            return grader.grade(solution, ground_truth, extra)

        return grade

    monkeypatch.setattr(rewards, "get_reward_fn", get_reward_fn)
    args = sa.parse_args([
        "--config", "configs/grpo_code_smollm2.py:model=tiny-random-llama,runlocal",
        "--arms", "2x4x1", "2x4", "--budget-s", "0.5", "--eval-fractions", "--out", str(tmp_path),
        "--override", "reward.num_workers=0", "--override", "eval.max_examples=1",
        "--override", "rollout.agent.max_turns=1", "--override", "trainer.micro_batch_size=8",
        "--override", "rollout.max_new_tokens=8", "--override", "model.remat=none",
        "--override", "rollout.agent.max_response_tokens=8",
    ])  # fmt: skip
    arms, graded = {}, {}
    for label in args.arms:
        spec = sa.prepare_arm(sa.parse_arm(label), args, first=False)  # held-out at the end only
        start = len(calls)
        assert sa.run_arm(spec, progress=False)["steps"] == 1
        graded[label] = calls[start:]
        arms[label] = {**spec["arm"], "workdir": spec["workdir"]}
    capped, full = sa.summarize(arms, target=2.0, usd_per_hour=0.0)

    def split(label):
        train = [c for c in graded[label] if c[0] not in TEST_IDS]
        held_out = [c for c in graded[label] if c[0] in TEST_IDS]
        assert len(train) == 8 and held_out  # 2 prompts x 4 rollouts; the evaluation at the end
        assert all(n == len(tasks[t].hidden) for t, n in held_out)  # every test, both arms
        return train

    train_capped, train_full = split("2x4x1"), split("2x4")
    assert sorted(t for t, _ in train_capped) == sorted(t for t, _ in train_full)  # same prompts
    assert all(n == 1 for _, n in train_capped)
    assert all(n == len(tasks[t].hidden) > 1 for t, n in train_full)
    assert capped["tests_per_sample"] == 1.0
    assert full["tests_per_sample"] == sum(n for _, n in train_full) / 8
    assert 0 < capped["grader_cpu_s_per_sample"] < full["grader_cpu_s_per_sample"]
    md = sa.table([capped, full], {"clock": "cpu", "target": 2.0, "usd_per_hour": 0.0})
    assert "| 1 tests (1.0/sample) |" in md.splitlines()[2]
