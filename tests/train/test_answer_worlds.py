"""The music and visual worlds' configs train for two steps on a tiny random model with their
real graders in the reward pool (the random model's answers score 0: this checks the loop and
that every rule dimension reaches the metrics, not learning)."""

from __future__ import annotations

import numpy as np
import pytest

from mimojax.config.loader import load_config
from mimojax.envs.music.grader import DIMS as MUSIC_DIMS
from mimojax.envs.visual.grader import DIMS as VISUAL_DIMS
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer


@pytest.mark.parametrize("world, dims", [("music", MUSIC_DIMS), ("visual", VISUAL_DIMS)])
def test_world_config_runs_two_steps(tmp_path, world, dims):
    cfg = load_config(
        f"configs/grpo_{world}_smollm2.py:runlocal,model=tiny-random-llama",
        ["roles.actor.devices=(0,)", "reward.num_workers=1"],
    )
    Trainer(cfg, str(tmp_path), progress=False).train()
    rows = [r for r in read_metrics(str(tmp_path)) if "critic/score/mean" in r]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["reward/infra_failures"] == 0.0
        assert all(f"reward/{d}/mean" in r for d in dims), sorted(r)
        assert np.isfinite(r["actor/pg_loss"])
