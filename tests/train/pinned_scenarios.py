"""Three tiny-config runs whose metrics were recorded before the controller refactor (issue 12).

`python tests/train/pinned_scenarios.py` (from the repo root) re-records `pinned_metrics.json`;
`test_pinned_metrics.py` replays them and compares. Rewards come from `length_mod` (graded in the
trainer process), so groups have reward variance and every loss term is non-zero.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

PINNED_PATH = os.path.join(os.path.dirname(__file__), "pinned_metrics.json")
GRADER = "tests.reward_fixtures:length_mod"
PINNED_KEYS = (
    "critic/score/mean",
    "response_length/mean",
    "actor/pg_loss",
    "actor/loss",
    "actor/grad_norm",
    "actor/kl_loss",
    "actor/pg_clipfrac",
    "critic/vf_loss",
    "critic/grad_norm",
    "critic/advantages/mean",
)

_COMMON = (
    "reward.num_workers=0",
    "eval.at_start=False",
    "eval.at_end=False",
    "checkpoint.every_steps=0",
)

SCENARIOS = {
    "grpo": (),
    "ppo_gae_kl_in_reward_overlong": (
        "algorithm.adv_estimator=gae",
        "model.value_head=True",
        "algorithm.use_kl_in_reward=True",
        "algorithm.kl_ctrl.kl_coef=0.05",
        "trainer.ppo_epochs=2",
        "trainer.mini_batch_size=1",
        "trainer.micro_batch_size=2",
        "reward.overlong_buffer.enable=True",
        "reward.overlong_buffer.len=8",
        "critic.lr=1e-4",
    ),
    "dapo_filter_klloss_entropy": (
        "algorithm.filter_groups=True",
        "algorithm.clip_ratio_high=0.28",
        "algorithm.use_kl_loss=True",
        "algorithm.kl_loss_coef=0.1",
        "algorithm.loss_agg_mode=seq-mean-token-mean",
        "algorithm.entropy_coeff=0.01",
        "trainer.micro_batch_size=4",
    ),
}


def train_rows(tmp_dir: str, scenario: str, train_fn, extra: tuple = ()) -> list[dict]:
    """Metrics rows of a 3-step run of `scenario`; `train_fn(overrides, workdir)` trains.

    Recorded on one CPU device; `extra` overrides place a replay on one device too."""
    workdir = os.path.join(tmp_dir, scenario)
    data = os.path.join(tmp_dir, "train_length_mod.jsonl")
    with open(data, "w") as f:
        for n in range(64):
            row = {"prompt": f"Count to {n % 7 + 2}.", "ground_truth": "", "env": GRADER}
            f.write(json.dumps(row) + "\n")
    overrides = [f"data.train_files=('{data}',)", *_COMMON, *SCENARIOS[scenario], *extra]
    train_fn(overrides, workdir)
    rows = []
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if "critic/score/mean" in row:
                rows.append({k: row[k] for k in PINNED_KEYS if k in row})
    return rows


def record() -> None:
    from mimojax.config.loader import load_config
    from mimojax.train.trainer import Trainer

    def train_fn(overrides, workdir):
        cfg = load_config("configs/grpo_tiny.py", overrides)
        Trainer(cfg, workdir, progress=False).train()

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCENARIOS:
            out[name] = train_rows(tmp, name, train_fn)
    with open(PINNED_PATH, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.path.append(os.getcwd())  # after site-packages: the top-level kernels/ shadows HF kernels
    record()
