"""An entropy target in the loop: the weight each step used, that the loss carried it, and that
the controller's state survives a checkpoint and resume bitwise."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from mimojax.config.loader import ConfigError, load_config, validate
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer

TINY = "configs/grpo_tiny.py"
# A target no policy reaches: the weight rises one delta after every step that updated.
OPTS = ("algorithm.entropy_control.target=100.0", "algorithm.entropy_control.delta=0.01",
        "eval.at_start=False", "eval.at_end=False")  # fmt: skip


def _train(workdir, *overrides):
    trainer = Trainer(load_config(TINY, [*OPTS, *overrides]), str(workdir), progress=False)
    trainer.train()
    return trainer


def test_entropy_target_sets_each_steps_bonus_and_resumes_bitwise(tmp_path):
    full = _train(tmp_path / "full", "trainer.total_steps=3")
    rows = [r for r in read_metrics(str(tmp_path / "full")) if "actor/entropy_coeff" in r]
    assert [r["actor/entropy_coeff"] for r in rows] == pytest.approx([0.0, 0.01, 0.02])
    for r in rows:  # the loss is the policy loss minus the step's weight times its entropy
        expect = r["actor/pg_loss"] - r["actor/entropy_coeff"] * r["actor/entropy"]
        assert r["actor/loss"] == pytest.approx(expect, rel=1e-4, abs=1e-6)
    assert rows[-1]["actor/entropy"] > 0.1  # a real bonus on the last step
    # Stop after step 1 (checkpointed), resume to 3: the controller's state comes back with it.
    cut = tmp_path / "cut"
    _train(cut, "trainer.total_steps=1", "checkpoint.every_steps=1")
    resumed = _train(cut, "trainer.total_steps=3")
    assert resumed.entropy_ctrl == full.entropy_ctrl
    for a, b in zip(
        jax.tree.leaves(jax.device_get(full.actor.state.params)),
        jax.tree.leaves(jax.device_get(resumed.actor.state.params)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    cut_rows = [r for r in read_metrics(str(cut)) if "actor/entropy_coeff" in r]
    for key in ("actor/entropy_coeff", "actor/loss"):
        assert [r[key] for r in cut_rows] == [r[key] for r in rows], key


def test_entropy_target_config_errors_name_the_keys():
    both = ["algorithm.entropy_control.target=0.3", "algorithm.entropy_coeff=0.01"]
    with pytest.raises(ConfigError, match="algorithm.entropy_control.target"):
        validate(load_config(TINY, both))
    with pytest.raises(ConfigError, match="algorithm.entropy_control"):
        validate(load_config(TINY, ["algorithm.entropy_control.delta=0.0"]))
