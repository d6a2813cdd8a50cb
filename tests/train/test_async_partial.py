"""Partial rollouts in the trainer (tiny GRPO, async): with a slow decode, weights published
while a batch is generating reach it between two decode steps; the trained trajectories mix
versions, the batch's version is its oldest token's, and the staleness bound holds on it."""

from __future__ import annotations

import time

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer


def test_partial_rollouts_mix_versions_within_the_bound(tmp_path, length_mod_rows):
    cfg = load_config("configs/grpo_tiny.py", [
        f"data.train_files=('{length_mod_rows}',)", "reward.num_workers=0",
        "checkpoint.every_steps=0", "eval.at_start=False", "eval.at_end=False",
        "trainer.mode='async'", "trainer.max_off_policy_steps=1", "trainer.total_steps=4",
        "trainer.partial_rollouts=True",
    ])  # fmt: skip
    trainer = Trainer(cfg, str(tmp_path), progress=False)
    generate, batches = trainer.engine.generate, []

    def slow_generate(*args, **kwargs):  # a slow decode: updates land mid-batch
        time.sleep(0.15)
        return generate(*args, **kwargs)

    trainer.engine.generate = slow_generate
    build = trainer._produce

    def produce(index):
        out = build(index)
        batches.append([t.versions() for t in out[0].trajs])
        return out

    trainer._produce = produce
    trainer.train()
    rows = [r for r in read_metrics(str(tmp_path)) if "critic/score/mean" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert max(r["async/staleness/max"] for r in rows) <= 1  # on the oldest token
    assert all(r["async/dropped_stale"] == 0 for r in rows)
    assert rows[-1]["async/partial/swaps"] >= 1
    assert max(r["async/partial/multi_version_share"] for r in rows) > 0
    assert max(r["async/partial/versions_per_traj_max"] for r in rows) == 2
    for versions in (v for batch in batches for v in batch):
        assert versions == sorted(versions)  # a token never runs on older weights than before
    mixed = [r for r in rows if r["async/partial/multi_version_share"] > 0]
    for r in mixed:  # newer tokens than the oldest: the token lag is below the batch's
        assert r["async/partial/token_staleness/mean"] < r["async/staleness/max"] + 1e-9
