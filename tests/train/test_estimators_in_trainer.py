"""Every kind of estimator runs in the trainer: ReMax (its greedy baseline rollout), the optimal
token baselines (their sum_pi_squared from the log-prob pass); and token-budget micro-batches
give the same step as row micro-batches.

Each case is a 2-step tiny-config run (~10 s) graded by `length_mod`, so advantages are non-zero.
"""

from __future__ import annotations

import numpy as np
import pytest

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer


@pytest.fixture
def data(length_mod_rows):
    return length_mod_rows


def _rows(workdir, data, *overrides):
    base = [
        f"data.train_files=('{data}',)",
        "reward.num_workers=0",
        "trainer.total_steps=2",
        "eval.at_start=False",
        "eval.at_end=False",
        "checkpoint.every_steps=0",
    ]
    cfg = load_config("configs/grpo_tiny.py", base + list(overrides))
    Trainer(cfg, str(workdir), progress=False).train()
    return [r for r in read_metrics(str(workdir)) if "critic/score/mean" in r]


@pytest.mark.parametrize(
    "estimator, phase",
    [
        ("remax", "timing_s/gen_max"),
        ("optimal_token_baseline", "timing_s/old_log_prob"),
        ("tir_optimal_token_baseline", "timing_s/old_log_prob"),
    ],
)
def test_estimator_with_extra_inputs_trains(tmp_path, data, estimator, phase):
    rows = _rows(tmp_path, data, f"algorithm.adv_estimator={estimator}")
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert phase in r
        assert np.isfinite(r["actor/pg_loss"]) and r["actor/grad_norm"] > 0
        assert r["critic/advantages/max"] > r["critic/advantages/min"]  # a real signal
        assert r["train/skipped_updates"] == 0.0


def test_token_budget_micro_batches_equal_row_micro_batches(tmp_path, data):
    four = ("roles.actor.devices=(0,1,2,3)", "trainer.micro_batch_size=4")  # 2 row micro-batches
    rows = _rows(tmp_path / "rows", data, *four)
    tokens = _rows(tmp_path / "tokens", data, *four, "trainer.micro_batch_tokens=256")
    for want, got in zip(rows, tokens):
        for key in ("critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
