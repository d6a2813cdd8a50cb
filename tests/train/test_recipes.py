"""The PPO (GAE + critic) and DAPO recipes run a few steps on the tiny model."""

from __future__ import annotations

import numpy as np
import pytest

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer

QUICK = ["trainer.total_steps=2", "eval.at_start=False", "eval.at_end=False"]


def _run(spec, workdir):
    trainer = Trainer(load_config(spec, QUICK), str(workdir), progress=False)
    trainer.train()
    return [r for r in read_metrics(str(workdir)) if "critic/score/mean" in r]


def test_ppo_recipe_trains_critic_and_actor(tmp_path):
    rows = _run("configs/ppo_arith_smollm2.py:tiny=True", tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    last = rows[-1]
    for key in ("critic/vf_loss", "critic/values/mean", "critic/grad_norm", "actor/pg_loss"):
        assert np.isfinite(last[key]), key
    assert "timing_s/old_log_prob" in last and "timing_s/ref" in last  # 2 epochs, KL in reward
    assert "actor/reward_kl_penalty" in last


def test_dapo_recipe_filters_groups_and_shapes_overlong(tmp_path):
    rows = _run("configs/dapo_arith_smollm2.py:tiny=True", tmp_path)
    last = rows[-1]
    assert last["reward/overlong_frac"] == pytest.approx(1.0)  # random model: always max length
    # tiny random model: every group scores all-zero, so every group is filtered and the
    # actor sees no tokens (the update is skipped, not run on zeros)
    assert last["batch/groups"] == 2 and last["batch/groups_kept"] == 0
    assert "actor/pg_loss" not in last


def test_dapo_recipe_clips_higher_on_groups_that_survive_the_filter(tmp_path, length_mod_rows):
    # A grader whose score varies inside groups (response length mod 5), so groups survive the
    # filter; 2 PPO epochs and 2 mini-batches move the ratio off 1, so the asymmetric clip acts.
    overrides = QUICK + [
        f"data.train_files=('{length_mod_rows}',)",
        "reward.num_workers=0",
        "trainer.ppo_epochs=2",
        "trainer.mini_batch_size=1",
        "trainer.micro_batch_size=4",
        "roles.actor.devices=(0,1,2,3)",  # 4 samples per mini-batch: 4 data-parallel devices
        "optimizer.lr=3e-3",
    ]
    trainer = Trainer(
        load_config("configs/dapo_arith_smollm2.py:tiny=True", overrides),
        str(tmp_path / "run"),
        progress=False,
    )
    trainer.train()
    rows = [r for r in read_metrics(str(tmp_path / "run")) if "critic/score/mean" in r]
    hp = trainer.actor.hparams
    assert dict(hp.loss_options)["clip_high"] == 0.28 and dict(hp.loss_options)["clip_low"] == 0.2
    assert all(r["batch/groups_kept"] >= 1 for r in rows)  # the filter kept trainable groups
    assert all(np.isfinite(r["actor/pg_loss"]) for r in rows)
    # the second epoch's ratios left [0.8, 1.28] on some tokens: the clip ran on kept groups
    assert max(r["actor/pg_clipfrac"] for r in rows) > 0
