"""Fault injection: SIGTERM at each phase of a step (rollout, reward, update, sync, save), then
a resume, equals the uninterrupted run bitwise, with each step's metrics row logged exactly once
and no finished step run again; `mimojax train` exits 0 on SIGTERM and at once on a second one.

One uninterrupted 4-step tiny-config run shared by the five phases (module fixture), then per
phase a stopped run and its resume, in process; and two CLI subprocesses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS = ("critic/score/mean", "response_length/mean", "actor/pg_loss", "actor/grad_norm")
# where the signal lands: (object holding the phase's entry point, its name, trainer.step then)
PHASES = {
    "rollout": (lambda t: t, "_rollout", 2),
    "reward": (lambda t: t.pool, "score", 2),
    "update": (lambda t: t.actor, "update", 2),
    "sync": (lambda t: t.roles.rollout, "sync", 2),
    "save": (lambda t: t.checkpointer, "save", 2),  # the periodic save after step 2
}


@pytest.fixture(scope="module")
def overrides(module_length_mod_rows):
    return [
        f"data.train_files=('{module_length_mod_rows}',)",
        "reward.num_workers=0",
        "trainer.total_steps=4",
        "checkpoint.every_steps=2",
        "eval.at_start=False",
        "eval.at_end=False",
    ]


def _trainer(workdir, overrides):
    return Trainer(load_config("configs/grpo_tiny.py", overrides), str(workdir), progress=False)


def _signal_at(trainer, phase):
    holder_of, name, at_step = PHASES[phase]
    holder = holder_of(trainer)
    original, fired = getattr(holder, name), []

    def wrapped(*args, **kwargs):
        if trainer.step == at_step and not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # handled before the next line runs
        return original(*args, **kwargs)

    setattr(holder, name, wrapped)
    return fired


def _state(trainer):
    return jax.tree.leaves(
        jax.device_get((trainer.actor.state.params, trainer.actor.state.opt_state))
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, overrides):
    """The reference every phase's stopped-and-resumed run must equal: run once per module."""
    workdir = tmp_path_factory.mktemp("full")
    trainer = _trainer(workdir, overrides)
    trainer.train()
    return _state(trainer), read_metrics(str(workdir))


@pytest.mark.parametrize("phase", sorted(PHASES))
def test_sigterm_at_each_phase_then_resume_equals_uninterrupted(
    tmp_path, overrides, uninterrupted, phase, capsys
):
    workdir = tmp_path / phase
    stopped = _trainer(workdir, overrides)
    fired = _signal_at(stopped, phase)
    stopped.train()
    assert fired and stopped.stop.signal_name == "SIGTERM"
    # a step that had not started its update is abandoned; one that had, finishes and is saved
    finished = 3 if phase in ("update", "sync") else 2
    assert stopped.step == finished and stopped.checkpointer.latest_step() == finished
    assert f"stopped by SIGTERM after step {finished}" in capsys.readouterr().err
    assert [r["step"] for r in read_metrics(str(workdir))] == list(range(1, finished + 1))

    resumed = _trainer(workdir, overrides)
    assert resumed.step == finished
    resumed.train()
    full_state, full_rows = uninterrupted
    for a, b in zip(full_state, _state(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    rows = read_metrics(str(workdir))
    assert [r["step"] for r in rows] == [r["step"] for r in full_rows] == [1, 2, 3, 4]
    for got, want in zip(rows, full_rows):
        for key in KEYS:
            assert got[key] == want[key], (got["step"], key)
    after = [r for r in rows if r["step"] > finished]
    assert all(r["restarts/count"] == 1 and r["restarts/steps_redone"] == 0 for r in after)
    assert all(r["restarts/count"] == 0 for r in rows if r["step"] <= finished)


def _cli(workdir, *extra):
    cmd = [sys.executable, "-m", "mimojax.cli.main", "train", "--config", "configs/grpo_tiny.py"]
    cmd += [
        "--workdir",
        str(workdir),
        "--config.trainer.total_steps=200",
        "--config.eval.at_start=False",
    ]
    cmd += ["--config.eval.at_end=False", "--config.checkpoint.every_steps=50", *extra]
    err = open(f"{workdir}.stderr.txt", "w")  # a file, not a pipe: a full pipe would stall it
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT), err.name


def _wait_for_step(workdir, proc, step):
    deadline = time.monotonic() + 300
    while not any(r["step"] >= step for r in read_metrics(str(workdir))):
        assert proc.poll() is None, f"exited early ({proc.returncode})"
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_cli_sigterm_saves_and_exits_0_and_a_second_signal_exits_at_once(tmp_path):
    workdir = tmp_path / "run"
    proc, err = _cli(workdir)
    _wait_for_step(workdir, proc, 1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 0
    text = open(err).read()
    assert "stopped by SIGTERM after step" in text and "Traceback" not in text
    step = int(text.split("stopped by SIGTERM after step ")[1].split(";")[0])
    assert os.path.isdir(workdir / "checkpoints" / str(step))
    assert max(r["step"] for r in read_metrics(str(workdir))) == step

    proc, err = _cli(workdir)  # resumes from it; two signals in a row: out at once
    _wait_for_step(workdir, proc, step + 1)  # resumed: it trains past the saved step
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 60  # signals do not queue: wait for the first to be handled
    while "stopping at the next safe point" not in open(err).read():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=300) == 128 + signal.SIGINT
    assert "second SIGINT: exiting now" in open(err).read()
