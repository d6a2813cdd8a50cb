"""configs/grpo_general_smollm2.py:runlocal trains two GRPO steps on a tiny random model with
the real rubric grader (rule items; the judge is off in the smoke mode), in the reward pool."""

import numpy as np

from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer


def test_general_config_runs_grpo_steps(tmp_path, monkeypatch):
    monkeypatch.delenv("MIMOJAX_JUDGE_URL", raising=False)
    monkeypatch.delenv("MIMOJAX_JUDGE_MODEL", raising=False)
    cfg = load_config(
        "configs/grpo_general_smollm2.py:runlocal,model=tiny-random-llama",
        ["roles.actor.devices=(0,)", "reward.num_workers=1"],
    )
    import os

    assert os.environ["MIMOJAX_JUDGE_URL"] == "none"
    Trainer(cfg, str(tmp_path), progress=False).train()
    rows = [r for r in read_metrics(str(tmp_path)) if "critic/score/mean" in r]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["reward/infra_failures"] == 0.0
        assert r["reward/judge_calls/mean"] == 0.0 and "reward/judge_s/mean" in r
        assert "reward/rule_max_words/mean" in r or "reward/rule_format/mean" in r
        assert 0.0 <= r["critic/score/mean"] <= 1.0
        assert np.isfinite(r["actor/pg_loss"])
