"""Graders' per-dimension rewards reach estimators that take them (GDPO's rewards_BxK)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import numpy as np

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.rewards.pool import dims_BxK
from mimojax.train.trainer import Trainer
from tests.train.conftest import ROOT


def test_dims_matrix_by_hand():
    r = lambda dims, valid=True: SimpleNamespace(dims=dims, valid=valid)  # noqa: E731
    got = dims_BxK([r({"b": 1.0, "a": 0.5}), r({"a": 2.0}), r({"c": 9.0}, valid=False)])
    np.testing.assert_array_equal(got, np.float32([[0.5, 1.0], [2.0, 0.0], [0.0, 0.0]]))
    assert dims_BxK([r({}), r({"x": 1.0}, valid=False)]) is None


def _run(tmp_path, monkeypatch, estimator):
    monkeypatch.setattr(sys, "path", [*sys.path, ROOT])
    rows = tmp_path / "rows.jsonl"
    env = "tests.reward_fixtures:flat_score_varied_dims"
    lines = [
        json.dumps({"prompt": f"Say {n} words.", "ground_truth": "", "env": env}) for n in range(8)
    ]
    rows.write_text("\n".join(lines) + "\n")
    opts = [f"data.train_files=('{rows}',)", "eval.at_start=False", "eval.at_end=False",
            "trainer.total_steps=1", f"algorithm.adv_estimator={estimator}"]  # fmt: skip
    workdir = tmp_path / estimator
    Trainer(load_config("configs/grpo_tiny.py", opts), str(workdir), progress=False).train()
    return read_metrics(str(workdir))[-1]


def test_gdpo_learns_from_dimensions_grpo_sees_a_flat_score(tmp_path, monkeypatch):
    gdpo = _run(tmp_path, monkeypatch, "gdpo")
    grpo = _run(tmp_path, monkeypatch, "grpo")
    assert grpo["critic/advantages/max"] == grpo["critic/advantages/min"] == 0.0
    # random-length responses of the tiny model: some groups mix odd and even lengths
    assert gdpo["critic/advantages/max"] > 0.1 and gdpo["critic/advantages/min"] < -0.1
    assert 0.0 < gdpo["reward/odd/mean"] < 1.0 and "reward/mod3/mean" in gdpo
