"""The RL loop on the tiny config: metrics, checkpoints, resume, skip and infra-failure paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from mimojax.checkpoint.manager import Checkpointer, CheckpointError
from mimojax.config.loader import ConfigError, load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer

TINY = "configs/grpo_tiny.py"


def tiny(*overrides):
    return load_config(TINY, list(overrides))


def run(workdir, *overrides):
    trainer = Trainer(tiny(*overrides), str(workdir), progress=False)
    trainer.train()
    return trainer


def test_three_steps_log_verl_metrics_and_checkpoint(tmp_path):
    trainer = run(tmp_path)
    rows = read_metrics(str(tmp_path))
    train_rows = [r for r in rows if "critic/score/mean" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3]
    for key in (
        "actor/pg_loss",
        "actor/entropy",
        "actor/grad_norm",
        "response_length/mean",
        "timing_s/gen",
        "timing_s/update_actor",
        "perf/throughput",
        "reward/infra_failures",
    ):
        assert np.isfinite(train_rows[-1][key]), key
    # eval before step 1 and after the last step
    assert "val-core/math/acc/greedy" in rows[0] and rows[0]["step"] == 0
    assert "val-core/math/pass@2" in train_rows[-1]
    assert trainer.checkpointer.all_steps() == [2, 3]  # keep=2, every 2 steps + final
    assert trainer.engine.policy_version == 3
    # the update changed the weights and the engine holds them
    assert train_rows[-1]["train/skipped_updates"] == 0.0


def _params(trainer):
    return jax.tree.leaves(jax.device_get(trainer.actor.state.params))


def _kill_after_checkpoint(workdir, step, *overrides):
    """`mimojax train` in a subprocess, SIGKILLed as soon as checkpoint `step` is committed."""
    cmd = [sys.executable, "-m", "mimojax.cli.main", "train", "--config", TINY]
    cmd += ["--workdir", str(workdir)] + [f"--config.{o}" for o in overrides]
    log_path = f"{workdir}.stderr.txt"  # a file, not a pipe: a full pipe would stall the run
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    committed = os.path.join(workdir, "checkpoints", str(step))
    deadline = time.monotonic() + 600
    while not os.path.isdir(committed):  # orbax renames the tmp dir to "<step>" when done
        if proc.poll() is not None:
            tail = open(log_path).read()[-2000:]
            raise AssertionError(f"run exited ({proc.returncode}) early: {tail}")
        assert time.monotonic() < deadline, "no checkpoint within 10 min"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_kill9_resume_matches_uninterrupted_run_bitwise(tmp_path):
    opts = ("trainer.total_steps=4", "checkpoint.every_steps=2", "eval.at_start=False",
            "eval.at_end=False")  # fmt: skip
    full = run(tmp_path / "full", *opts)
    _kill_after_checkpoint(tmp_path / "cut", 2, *opts)
    assert Checkpointer(str(tmp_path / "cut" / "checkpoints"), keep=1).all_steps() == [2]
    resumed = run(tmp_path / "cut", *opts)
    assert resumed.step == 4
    for a, b in zip(_params(full), _params(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(
        jax.tree.leaves(jax.device_get(full.actor.state.opt_state)),
        jax.tree.leaves(jax.device_get(resumed.actor.state.opt_state)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    # metrics continue: no duplicate or missing step, and the same samples were drawn and scored
    cut_rows, full_rows = read_metrics(str(tmp_path / "cut")), read_metrics(str(tmp_path / "full"))
    assert [r["step"] for r in cut_rows] == [r["step"] for r in full_rows] == [1, 2, 3, 4]
    for key in ("critic/score/mean", "response_length/mean", "actor/pg_loss"):
        assert [r[key] for r in cut_rows] == [r[key] for r in full_rows], key


def test_non_finite_loss_skips_update(tmp_path):
    # NaN actor params (the engine keeps its finite copy) give a NaN loss and gradient.
    trainer = Trainer(tiny("trainer.total_steps=1"), str(tmp_path), progress=False)
    before = _params(trainer)
    state = trainer.actor.state
    trainer.actor.state = state._replace(params=jax.tree.map(lambda x: x * np.nan, state.params))
    metrics = trainer.train_step()
    trainer.close()
    assert metrics["train/skipped_updates"] == 1.0
    assert all(np.isnan(a).all() for a in _params(trainer))  # not updated: still the NaN params
    assert int(trainer.actor.state.step) == 0 and len(before) == len(_params(trainer))


def test_grader_failure_is_infra_flag_and_excluded(tmp_path, monkeypatch):
    # Rows graded by a function that raises: every sample is an infra failure, none trains.
    monkeypatch.setenv("PYTHONPATH", os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = tmp_path / "bad.jsonl"
    rows.write_text(
        "".join(
            json.dumps(
                {
                    "prompt": f"What is {i} + 1?",
                    "ground_truth": str(i + 1),
                    "env": "tests.reward_fixtures:raises",
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    trainer = Trainer(
        tiny("trainer.total_steps=1", f"data.train_files=('{rows}',)"),
        str(tmp_path / "run"),
        progress=False,
    )
    before = _params(trainer)
    metrics = trainer.train_step()
    trainer.close()
    assert metrics["reward/infra_failures"] == 8.0
    # excluded: no tokens to learn from, so the actor is untouched
    for a, b in zip(before, _params(trainer)):
        np.testing.assert_array_equal(a, b)


def test_unknown_algorithm_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="algorithm.adv_estimator: unknown name 'grpoo'"):
        Trainer(tiny("algorithm.adv_estimator=grpoo"), str(tmp_path), progress=False)


def test_incompatible_config_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model.value_head"):
        Trainer(tiny("algorithm.adv_estimator=gae"), str(tmp_path), progress=False)


def test_checkpoint_of_other_model_is_rejected(tmp_path):
    run(tmp_path, "trainer.total_steps=2", "eval.at_start=False", "eval.at_end=False")
    other = load_config(TINY + ":model=tiny-random-qwen3", ["trainer.total_steps=3"])
    with pytest.raises(CheckpointError, match="different model"):
        Trainer(other, str(tmp_path), progress=False)
