"""Each agentic world's config trains for two GRPO steps on a tiny random model, with real
tool agents, real sandboxes and real graders (the random model's answers score 0: this checks
the loop, not learning). ~20 s per world, mostly compiles for the multi-turn shapes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bwrap: apt-get install bubblewrap"
)


@pytest.mark.parametrize("world", ["code", "cyber"])
def test_world_config_runs_grpo_steps(tmp_path, world):
    cfg = load_config(
        f"configs/grpo_{world}_smollm2.py:runlocal,model=tiny-random-llama",
        ["roles.actor.devices=(0,)", "reward.num_workers=1"],
    )
    assert cfg.rollout.agent.default == "tool_agent"
    Trainer(cfg, str(tmp_path), progress=False).train()
    rows = [r for r in read_metrics(str(tmp_path)) if "critic/score/mean" in r]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["num_turns/min"] >= 1 and r["num_turns/max"] <= cfg.rollout.agent.max_turns
        assert "agent_loop/wall_s/mean" in r and "agent_loop/tool_error_rate" in r
        finishes = sum(v for k, v in r.items() if k.startswith("agent_loop/finish/"))
        assert finishes == pytest.approx(1.0)
        assert r["reward/infra_failures"] == 0.0
        assert r["reward/grader_cpu_s/sum"] >= 0.0
        assert np.isfinite(r["actor/pg_loss"])
        assert r["response_length/max"] <= cfg.rollout.agent.max_response_tokens
